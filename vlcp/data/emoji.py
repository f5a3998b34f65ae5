"""The embedded emoji benchmark: 9 Unicode groups = 9 tasks, subgroups = classes.

`prepare_emoji(cfg, out)` renders every base emoji (<= data.max_version) in every style,
writes English captions from CLDR names and keywords, and splits each subgroup's items into
train / val / test / query (gallery = train items). Output directory (written atomically):

- `meta.json`: groups, subgroups, styles, per-item key, name, keywords, split, captions, and the
  data settings the preparation fixed (`RECORDED`: seed, image_size, max_version, split,
  captions_per_item, the required styles), which `EmojiBenchmark` checks against a run's `data`
- `images.npz`: one uint8 array (items, S, S, 3) per style, rows aligned with meta["items"]
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from vlcp.config import DataCfg
from vlcp.data.cldr import cldr_version, load_cldr
from vlcp.data.emoji_test import read_emoji_test
from vlcp.data.render import get_style, style_available, to_square
from vlcp.utils import atomic_dir, derive_seed, write_json

OPTIONAL_STYLES = ("noto-color",)  # rendered as an extra domain when Debian's font is installed
META_FORMAT = 2   # 2: meta.json records every data setting the preparation fixed (RECORDED)
RECORDED = {      # data.<field> -> its meta.json key: the settings that fix what is prepared
    "seed": "seed", "image_size": "image_size", "max_version": "max_version", "split": "split",
    "captions_per_item": "captions_per_item", "styles": "required_styles"}


def data_record(cfg: DataCfg) -> dict:
    """The meta.json record of what preparing with `cfg` fixes (keys: `RECORDED`'s values): the
    seed (split and captions), the image size, the newest Emoji version, the split fractions, the
    captions per item and the required styles (an emoji missing in one of them is dropped)."""
    values = {"seed": cfg.seed, "image_size": cfg.image_size, "max_version": cfg.max_version,
              "split": {s: getattr(cfg.split, s) for s in ("test", "val", "query")},
              "captions_per_item": cfg.captions_per_item, "styles": list(cfg.styles)}
    return {key: values[f] for f, key in RECORDED.items()}


def readable(label: str) -> str:
    """'animal-mammal' -> 'animal mammal'; 'Food & Drink' -> 'food and drink'."""
    return label.replace("-", " ").replace("&", "and").lower()


def make_captions(name: str, keywords: list[str], subgroup: str, group: str, n: int,
                  rng: np.random.Generator) -> list[str]:
    """Caption 0 is the fixed evaluation caption; the rest are training variants."""
    sub, grp = readable(subgroup), readable(group)
    kws = [k for k in keywords if k.lower() != name.lower()]
    captions = [f"an emoji of {name} ({sub})" + (f": {', '.join(kws[:3])}" if kws else "")]
    templates = [
        lambda k: f"an emoji of {name}.",
        lambda k: f"{name}, a {sub} emoji",
        lambda k: f"a {sub} icon: {name}",
        lambda k: f"{name}: {k}" if k else f"{name} emoji",
        lambda k: f"emoji of {name} ({grp})",
        lambda k: f"{k}, {name}" if k else f"{name}, {sub}",
        lambda k: f"a picture of {name}, {sub}",
    ]
    for i in range(n - 1):
        picked = list(rng.permutation(kws)[: rng.integers(1, 4)]) if kws else []
        captions.append(templates[i % len(templates)](", ".join(picked)))
    return captions


def split_items(subgroup_items: dict[str, list[int]], cfg: DataCfg) -> dict[int, str]:
    """Seeded per-subgroup split; each split gets round(fraction * n) items, train keeps >= 1."""
    split = {}
    for sub, idx in subgroup_items.items():
        rng = np.random.default_rng(derive_seed(cfg.seed, "split", sub))
        order = [idx[i] for i in rng.permutation(len(idx))]
        n = len(order)
        counts = {s: int(round(getattr(cfg.split, s) * n)) for s in ("test", "val", "query")}
        while n - sum(counts.values()) < 1 and sum(counts.values()) > 0:
            biggest = max(counts, key=counts.get)
            counts[biggest] -= 1
        pos = 0
        for s in ("test", "val", "query"):
            for i in order[pos:pos + counts[s]]:
                split[i] = s
            pos += counts[s]
        for i in order[pos:]:
            split[i] = "train"
    return split


def prepare_emoji(cfg: DataCfg, out: str | Path, progress: bool = True) -> dict:
    t0 = time.time()
    entries = [e for e in read_emoji_test() if e.version <= cfg.max_version]
    styles = list(cfg.styles) + [s for s in OPTIONAL_STYLES if s not in cfg.styles and style_available(s)]
    renderers = {s: get_style(s) for s in styles}

    images = {s: [] for s in styles}
    kept = []
    bar = tqdm(entries, desc="render emoji", unit="emoji", disable=not progress, mininterval=2.0)
    for e in bar:
        rendered = {s: renderers[s](e.char) for s in styles}
        if any(rendered[s] is None for s in cfg.styles):  # required styles must all have it
            continue
        kept.append(e)
        for s in styles:
            im = rendered[s]
            images[s].append(np.asarray(to_square(im, cfg.image_size)) if im is not None
                             else np.full((cfg.image_size, cfg.image_size, 3), 255, np.uint8))

    en = load_cldr().get("en", {})
    groups = list(dict.fromkeys(e.group for e in kept))
    subgroups = list(dict.fromkeys(e.subgroup for e in kept))
    by_sub: dict[str, list[int]] = {}
    for i, e in enumerate(kept):
        by_sub.setdefault(e.subgroup, []).append(i)
    splits = split_items(by_sub, cfg)

    items = []
    for i, e in enumerate(kept):
        ann = en.get(e.key)
        name = ann.name if ann else e.name
        keywords = list(ann.keywords) if ann else []
        rng = np.random.default_rng(derive_seed(cfg.seed, "captions", e.key))
        items.append({
            "key": e.key, "char": e.char, "group": e.group, "subgroup": e.subgroup,
            "version": e.version, "name": name, "keywords": keywords, "split": splits[i],
            "captions": make_captions(name, keywords, e.subgroup, e.group, cfg.captions_per_item, rng),
        })
    meta = {
        "benchmark": "emoji", "format": META_FORMAT, **data_record(cfg),
        "styles": styles,   # every style rendered: the required ones and the optional ones found
        "optional_styles": [s for s in styles if s not in cfg.styles],
        "groups": groups, "subgroups": subgroups,
        "dropped": len(entries) - len(kept), "cldr_version": cldr_version(), "items": items,
    }
    with atomic_dir(out, last=("meta.json",)) as tmp:   # only vlcp's own files in `out` are replaced
        np.savez(tmp / "images.npz", **{s: np.stack(v) for s, v in images.items()})
        meta["build_seconds"] = round(time.time() - t0, 2)
        write_json(tmp / "meta.json", meta)
    return meta
