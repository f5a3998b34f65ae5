"""The vendored CLDR table: emoji names (tts) and keywords in the 36 XM3600 languages.

Built by `scripts/build_cldr_table.py` from npm `cldr-annotations-full` /
`cldr-annotations-derived-full`; Unicode licence in `resources/LICENSE-UNICODE.txt`.
"""
from __future__ import annotations

import gzip
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).parent / "resources" / "cldr_xm3600.tsv.gz"


@dataclass(frozen=True)
class Annotation:
    name: str
    keywords: tuple[str, ...]


@lru_cache(maxsize=1)
def load_cldr(path: str | None = None) -> dict[str, dict[str, Annotation]]:
    """{lang: {emoji key (no U+FE0F): Annotation}}."""
    out: dict[str, dict[str, Annotation]] = {}
    with gzip.open(path or TABLE, "rt", encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or line.startswith("lang\t"):
                continue
            lang, key, tts, kws = line.rstrip("\n").split("\t")
            out.setdefault(lang, {})[key] = Annotation(tts, tuple(k for k in kws.split(" | ") if k))
    return out


def cldr_version(path: str | None = None) -> str:
    with gzip.open(path or TABLE, "rt", encoding="utf-8") as f:
        return f.readline().split()[2]


def coverage(keys: list[str]) -> dict[str, float]:
    """Share of `keys` that each language names."""
    table = load_cldr()
    return {lang: sum(k in ann for k in keys) / max(len(keys), 1) for lang, ann in sorted(table.items())}
