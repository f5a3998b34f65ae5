"""P9D (CTP, Zhu et al. ICCV 2023): e-commerce product image–title pairs in 9 industry tasks.

Layout under `root` (as CTP's `configs/base_seqF.yaml`):

    json/train.json     {industry: {item_id: {"title", "cate_name", "image_link", ...}}}   (nested)
    json/test.json      {item_id: {"title", "cate_name", "industry_name", "image_link", ...}}  (flat;
    json/query.json      query.json and gallery.json have the same shape)
    json/gallery.json
    train_images/{item_id}.jpg
    gallery_images/{item_id}.jpg    (test, query and gallery images)

Titles are returned raw (CTP lowercases and strips `.!"()*#:;~` at train time).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from vlcp.data.formats import Record, read_json_file, require
from vlcp.errors import VlcpError

# CTP's default task order (configs/base_seqF.yaml) -> the P9D README's English names.
P9D_INDUSTRIES: dict[str, str] = {
    "家居用品": "Household", "家装家饰": "Furnishings", "食品/保健": "Food", "美容护理": "Beauty",
    "服饰鞋包": "Clothing", "车品配件": "Auto", "母婴": "Parenting", "运动/户外": "Outdoor",
    "3C数码": "Electronics",
}


def _record(path: Path, item_id: str, info: Any, industry: str | None, image_dir: Path, split: str) -> Record:
    where = f"{path}: item {item_id!r}"
    if not isinstance(info, dict):
        raise VlcpError(f"{where}: expected an object with 'title' and 'cate_name', got {type(info).__name__}")
    for field in ("title", "cate_name") + (("industry_name",) if industry is None else ()):
        if not isinstance(info.get(field), str):
            raise VlcpError(f"{where}: field {field!r} is missing or not a string")
    return Record(image=image_dir / f"{item_id}.jpg", captions=(info["title"],), split=split, key=item_id,
                  classname=info["cate_name"], task=industry if industry is not None else info["industry_name"])


def read_p9d_train(root: str | Path, industries: Sequence[str] | None = None) -> list[Record]:
    """P9D training pairs from `{root}/json/train.json` (nested by industry), images in `train_images/`.

    `industries` keeps only those tasks, in that order (default: all, in file order).
    `Record.task` = industry, `classname` = `cate_name`, `key` = item id, `split` = "train".
    """
    root = require(Path(root), "P9D dataset")
    path = root / "json" / "train.json"
    data = read_json_file(path, "P9D train.json")
    image_dir = require(root / "train_images", "P9D training images ({item_id}.jpg)")
    if not isinstance(data, dict):
        raise VlcpError(f"{path}: expected an object {{industry: {{item_id: item}}}}, got {type(data).__name__}")
    for name in industries or ():
        if name not in data:
            raise VlcpError(f"{path}: no industry {name!r} (has {', '.join(map(repr, data))})")
    out = []
    for industry in (industries if industries is not None else list(data)):
        items = data[industry]
        if not isinstance(items, dict):
            raise VlcpError(f"{path}: industry {industry!r}: expected an object {{item_id: item}}, "
                            f"got {type(items).__name__}")
        out += [_record(path, k, v, industry, image_dir, "train") for k, v in items.items()]
    return out


def read_p9d_eval(root: str | Path, split: str = "test", industries: Sequence[str] | None = None) -> list[Record]:
    """P9D evaluation items from the flat `{root}/json/{split}.json` (test, query or gallery).

    Images are `gallery_images/{item_id}.jpg`. `industries` keeps only items whose
    `industry_name` is listed (CTP's "seen tasks" filter); file order is kept.
    """
    root = require(Path(root), "P9D dataset")
    path = root / "json" / f"{split}.json"
    data = read_json_file(path, f"P9D {split}.json")
    image_dir = require(root / "gallery_images", "P9D test/query/gallery images ({item_id}.jpg)")
    if not isinstance(data, dict):
        raise VlcpError(f"{path}: expected an object {{item_id: item}}, got {type(data).__name__}")
    out = [_record(path, k, v, None, image_dir, split) for k, v in data.items()]
    return out if industries is None else [r for r in out if r.task in set(industries)]
