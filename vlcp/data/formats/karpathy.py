"""COCO and Flickr30K in Karpathy's split JSON, and CLFM's per-image caption rows.

Karpathy JSON (`dataset_coco.json`, `dataset_flickr30k.json`):
    {"images": [{"filepath": "val2014" (COCO only), "filename": str, "split": "train"|"restval"|"val"|"test",
                 "sentences": [{"raw": str, ...}, ...], "imgid": int, ...}, ...], "dataset": "coco"}
The Karpathy training set is splits ("train", "restval") for COCO (113,287 images); Flickr30K has
no restval. Test: 5,000 COCO / 1,000 Flickr30K images with 5 captions each.

CLFM rows (`annotations/coco/en/train.json`, `.../{val,test}.json`, XM3600's `test.json`):
    [{"image": "train2014/COCO_train2014_....jpg", "caption": str | [str, ...], "image_id": int}, ...]
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from vlcp.data.formats import Record, read_json_file, require, str_list
from vlcp.errors import VlcpError

KARPATHY_SPLITS = ("train", "restval", "val", "test")


def read_karpathy(path: str | Path, image_dir: str | Path, splits: Sequence[str] = ("test",)) -> list[Record]:
    """Images of `splits` from a Karpathy split JSON; image = `{image_dir}/{filepath}/{filename}`.

    One record per image with all its `raw` sentences; `key` = `filepath/filename`
    (or `filename`), `split` = the image's split. File order is kept.
    """
    path, image_dir = Path(path), Path(image_dir)
    bad = [s for s in splits if s not in KARPATHY_SPLITS]
    if bad:
        raise VlcpError(f"splits: {bad[0]!r} is not a Karpathy split ({', '.join(KARPATHY_SPLITS)})")
    data = read_json_file(path, "Karpathy split JSON")
    require(image_dir, "images of the Karpathy JSON")
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, list):
        raise VlcpError(f"{path}: field 'images' is missing or not a list")
    out = []
    for i, im in enumerate(images):
        where = f"{path}: images[{i}]"
        if not isinstance(im, dict):
            raise VlcpError(f"{where}: expected an object, got {type(im).__name__}")
        for field in ("filename", "split"):
            if not isinstance(im.get(field), str):
                raise VlcpError(f"{where}: field {field!r} is missing or not a string")
        if im["split"] not in KARPATHY_SPLITS:
            raise VlcpError(f"{where}: field 'split' is {im['split']!r}, not one of {', '.join(KARPATHY_SPLITS)}")
        if im["split"] not in splits:
            continue
        sents = im.get("sentences")
        if not (isinstance(sents, list) and sents and all(isinstance(s, dict) and isinstance(s.get("raw"), str)
                                                          for s in sents)):
            raise VlcpError(f"{where} ({im['filename']}): field 'sentences' must be a non-empty list "
                            f"of {{'raw': str}} objects")
        rel = f"{im['filepath']}/{im['filename']}" if isinstance(im.get("filepath"), str) else im["filename"]
        out.append(Record(image=image_dir / rel, captions=tuple(s["raw"] for s in sents), split=im["split"], key=rel))
    return out


def read_coco_karpathy(root: str | Path, splits: Sequence[str] = ("test",)) -> list[Record]:
    """COCO Karpathy split: `{root}/dataset_coco.json`, images `{root}/{train2014,val2014}/*.jpg`."""
    root = require(Path(root), "COCO dataset")
    return read_karpathy(root / "dataset_coco.json", root, splits)


def read_flickr30k_karpathy(root: str | Path, splits: Sequence[str] = ("test",)) -> list[Record]:
    """Flickr30K Karpathy split: `{root}/dataset_flickr30k.json`, images `{root}/flickr30k-images/*.jpg`."""
    root = require(Path(root), "Flickr30K dataset")
    return read_karpathy(root / "dataset_flickr30k.json", root / "flickr30k-images", splits)


def read_caption_rows(path: str | Path, image_dir: str | Path, split: str,
                      language: str | None = None) -> list[Record]:
    """CLFM caption rows `[{"image": rpath, "caption": str | [str], ...}]` grouped into one record per image.

    Rows of the same image (CLFM's train.json has one row per caption) are merged in row
    order; images keep their first-appearance order. `key` = the rpath, image =
    `{image_dir}/{rpath}`, `language` and `task` = `language` (a CLL-CLIP task is a language).
    """
    path, image_dir = Path(path), Path(image_dir)
    rows = read_json_file(path, "caption rows JSON")
    require(image_dir, "images of the caption rows")
    if not isinstance(rows, list):
        raise VlcpError(f"{path}: expected a JSON list of {{'image', 'caption'}} rows, got {type(rows).__name__}")
    caps: dict[str, list[str]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("image"), str):
            raise VlcpError(f"{path}: row {i}: field 'image' is missing or not a string")
        c = str_list(row.get("caption"))
        if c is None:
            raise VlcpError(f"{path}: row {i} ({row['image']}): field 'caption' must be a string "
                            f"or a non-empty list of strings")
        caps.setdefault(row["image"], []).extend(c)
    return [Record(image=image_dir / rel, captions=tuple(c), split=split, key=rel, task=language, language=language)
            for rel, c in caps.items()]
