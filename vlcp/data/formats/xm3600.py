"""CLL-CLIP / TEIR (yangbang18/CLFM) data: XM3600, MSCOCO36 and the triplet TSV corpus.

Per-language caption files (CLFM `annotations/`), rows as in `karpathy.read_caption_rows`:
    xm3600/{lang}/test.json          [{"image": "<key>.jpg", "image/locale": str, "caption": [str...], "image_id": int}]
    mscoco36/en/{split}.json         [{"image": "val2014/COCO_val2014_....jpg", "caption": [5 str], "image_id": int}]
    mscoco36/translated/{lang}/{split}.json   (the 35 Google-translated languages; val, test)
Images: `xm3600/images/<key>.jpg`; `mscoco36/images/{train2014,val2014}/...` (may be a symlink to `../coco`).

Triplet corpus (`corpus/multilingual_coco/36langs/triplet/coco_vision-en-<lang>.tsv.gz`), one line per
English training caption, line-aligned with CLFM's teacher embedding `.npy` files:
    image_rpath \\t en_caption \\t target_caption
(`vision_text/coco_vision-<lang>.tsv.gz`, `image_rpath \\t target_caption`, reads the same way.)
"""
from __future__ import annotations

import gzip
import zlib
import re
from pathlib import Path
from typing import Iterator, Sequence

from vlcp.data.formats import Record, require
from vlcp.data.formats.karpathy import read_caption_rows
from vlcp.data.languages import XM3600
from vlcp.errors import VlcpError

CLFM_CODE = {"qu": "quz"}   # CLDR code -> CLFM's / XM3600's file code: only Quechua differs
CLDR_CODE = {v: k for k, v in CLFM_CODE.items()}


def clfm_code(lang: str) -> str:
    """CLFM's file code of a CLDR language code (XM3600 calls Quechua `quz`)."""
    return CLFM_CODE.get(lang, lang)


def cldr_code(code: str) -> str:
    """The CLDR code of a CLFM / XM3600 file code."""
    return CLDR_CODE.get(code, code)


# configs.xm3600_langs of CLFM (36 languages): the CLL-CLIP study's CLDR codes with XM3600's `quz` for `qu`.
XM3600_LANGUAGES = tuple(clfm_code(c) for c in XM3600)
# CLL-CLIP's continual-learning language order `order222` (seed-222 shuffle, en first).
CLL_CLIP_ORDER = ("en", "it", "de", "fil", "tr", "uk", "nl", "bn", "he", "fi", "sv", "quz", "fa", "mi", "fr", "el",
                  "zh", "id", "sw", "no", "hi", "da", "te", "th", "pt", "ru", "ro", "pl", "hr", "es", "vi", "ar",
                  "cs", "ko", "ja", "hu")

_TSV_NAME = re.compile(r"-(?:([a-z]+)-)?([a-z]+)\.tsv(?:\.gz)?$")


def read_xm3600(root: str | Path, languages: Sequence[str] = XM3600_LANGUAGES) -> list[Record]:
    """XM3600 test captions, one record per (language, image): `{root}/{lang}/test.json`, images `{root}/images/`.

    Records are language-major in `languages` order; `task` = `language` = the caption language
    (not the image's `image/locale`, the place the photo was taken).
    """
    root = require(Path(root), "XM3600 dataset")
    out = []
    for lang in languages:
        out += read_caption_rows(root / lang / "test.json", root / "images", "test", lang)
    return out


def read_mscoco36(root: str | Path, split: str = "test", languages: Sequence[str] = XM3600_LANGUAGES
                  ) -> list[Record]:
    """MSCOCO36 (COCO Karpathy val/test in 36 languages): `{root}/en/{split}.json` for English,
    `{root}/translated/{lang}/{split}.json` for the others; images `{root}/images/`.

    Records are language-major in `languages` order; `task` = `language`.
    """
    root = require(Path(root), "MSCOCO36 dataset")
    out = []
    for lang in languages:
        path = root / "en" / f"{split}.json" if lang == "en" else root / "translated" / lang / f"{split}.json"
        out += read_caption_rows(path, root / "images", split, lang)
    return out


def triplet_path(root: str | Path, language: str, dataset: str = "coco") -> Path:
    """CLFM's training file of one target language under `root` (its corpus `triplet/` directory's
    parent), `{root}/triplet/{dataset}_vision-en-{language}.tsv.gz` (English too: `...-en-en...`)."""
    return Path(root) / "triplet" / f"{dataset}_vision-en-{language}.tsv.gz"


def iter_triplet_lines(path: str | Path) -> Iterator[tuple[str, str | None, str]]:
    """(image_rpath, en_caption or None, target_caption) per line of a triplet / vision_text TSV
    (plain or .gz); a malformed line or unreadable file is a VlcpError naming it."""
    path = require(Path(path), "CLFM triplet TSV")
    lines = 0
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else
              open(path, encoding="utf-8")) as f:
            for lines, line in enumerate(f, 1):
                parts = line.rstrip("\r\n").split("\t")
                if len(parts) not in (2, 3) or not all(parts):
                    raise VlcpError(f"{path}: line {lines}: expected 'image_rpath<TAB>en_caption<TAB>target_caption'"
                                    f", got {len(parts)} field(s){' (one empty)' if len(parts) in (2, 3) else ''}")
                yield parts[0], (parts[1] if len(parts) == 3 else None), parts[-1]
    except (OSError, UnicodeDecodeError, EOFError, zlib.error) as e:
        raise VlcpError(f"{path}: not a readable TSV ({e})") from None
    if not lines:
        raise VlcpError(f"{path}: empty TSV (no lines)")


def read_triplets(path: str | Path, image_dir: str | Path, language: str | None = None) -> list[Record]:
    """CLFM's triplet TSV (plain or .gz): one record per line `image_rpath \\t en_caption \\t target_caption`.

    `captions` = (target,), `source_caption` = the English caption, `key` = the 0-based line
    number (row i of CLFM's teacher embeddings), `split` = "train". `language` (also `task`)
    defaults to the target language in the file name (`..._vision-en-<lang>.tsv.gz`).
    Two-field lines (`vision_text` files: `image_rpath \\t target_caption`) have no source caption.
    """
    path, image_dir = Path(path), Path(image_dir)
    require(path, "CLFM triplet TSV")
    require(image_dir, "images of the triplet TSV")
    if language is None and (m := _TSV_NAME.search(path.name)):
        language = m.group(2)
    return [Record(image=image_dir / rpath, captions=(target,), split="train", key=str(i), task=language,
                   language=language, source_caption=source)
            for i, (rpath, source, target) in enumerate(iter_triplet_lines(path))]
