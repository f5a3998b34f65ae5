"""Build the vendored CLDR name/keyword table for the 36 XM3600 languages.

Reproducible: run it on the unpacked npm tarballs of `cldr-annotations-full` and
`cldr-annotations-derived-full` (the version is recorded in the table's header):

    mkdir /tmp/cldr && cd /tmp/cldr
    npm pack cldr-annotations-full@48.2.0 cldr-annotations-derived-full@48.2.0
    for f in *.tgz; do mkdir -p "${f%.tgz}" && tar xzf "$f" -C "${f%.tgz}"; done
    python scripts/build_cldr_table.py /tmp/cldr vlcp/data/resources/cldr_xm3600.tsv.gz

Output: a gzipped TSV with columns `lang, emoji, tts, keywords` (keywords joined by " | "),
one row per (XM3600 language, base emoji of `emoji-test.txt`) that CLDR names. Emoji keys
have U+FE0F removed. The Unicode licence notice ships beside it (LICENSE-UNICODE.txt).
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

# XM3600's 36 languages as CLDR locale codes (XM3600 `quz` = Cusco Quechua -> CLDR `qu`;
# `iw` -> `he`; `no` is Norwegian Bokmål in CLDR 48).
XM3600_LANGS = (
    "ar bn cs da de el en es fa fi fil fr he hi hr hu id it ja ko mi nl no pl pt qu ro ru sv sw "
    "te th tr uk vi zh"
).split()


def _read(path: Path, key: str) -> dict:
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))[key]["annotations"]


def main(src: str, out: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from vlcp.data.emoji_test import read_emoji_test  # no torch needed

    root = Path(src)
    full = next(root.glob("cldr-annotations-full*/package"))
    derived = next(root.glob("cldr-annotations-derived-full*/package"))
    version = json.loads((full / "package.json").read_text())["version"]
    wanted = {e.key for e in read_emoji_test()}
    rows = []
    for lang in XM3600_LANGS:
        ann = _read(full / "annotations" / lang / "annotations.json", "annotations")
        ann.update(_read(derived / "annotationsDerived" / lang / "annotations.json", "annotationsDerived"))
        if not ann:
            raise SystemExit(f"no CLDR annotations for language {lang!r} under {root}")
        for cp, entry in ann.items():
            key = cp.replace("\ufe0f", "")
            if key not in wanted or "tts" not in entry:
                continue
            kws = " | ".join(k.replace("\t", " ") for k in entry.get("default", []))
            rows.append((lang, key, entry["tts"][0].replace("\t", " "), kws))
    rows.sort()
    tmp = Path(out + ".tmp")
    with gzip.GzipFile(tmp, "wb", mtime=0) as f:  # mtime=0: byte-identical rebuilds
        f.write(f"# CLDR {version} annotations (Unicode-3.0 licence, see LICENSE-UNICODE.txt)\n".encode())
        f.write(b"lang\temoji\ttts\tkeywords\n")
        for r in rows:
            f.write(("\t".join(r) + "\n").encode("utf-8"))
    tmp.replace(out)
    print(f"wrote {len(rows)} rows for {len(XM3600_LANGS)} languages to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
