"""Benchmarks over the real datasets (`data.benchmark` other than `emoji`), for `vlcp run`.

`RecordBenchmark` turns the `Record`s of a `vlcp.data.formats` reader into the `Benchmark` the
runner trains and evaluates on, with images decoded on access (`ImageFiles`, `data.workers`
threads) instead of held in memory. Real datasets have one image per item: `data.train_styles`
does not apply, and there is no held-out style (`data.unseen_styles` must be empty).

| `data.benchmark` | dataset        | tasks (`data.stream`)            | evaluation                                  |
|------------------|----------------|----------------------------------|---------------------------------------------|
| `p9d`            | P9D (CTP)      | industries (`group`), CTP order  | test (cross-modal), query vs gallery (mAP)  |

The language stream (XM3600 / MSCOCO36) and FoMo-in-Flux's concept stream still run on the
embedded benchmark only: their readers exist (`vlcp.data.formats`), their runners do not stream them.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Sequence

from vlcp.config import DataCfg
from vlcp.data.benchmark import Benchmark
from vlcp.data.formats import ImageFiles, Record
from vlcp.data.formats.p9d import P9D_INDUSTRIES, read_p9d_eval, read_p9d_train

_CTP_PUNCTUATION = re.compile(r'[.!"()*#:;~]')


def pre_caption(text: str, max_words: int = 30) -> str:
    """CTP's caption cleaning (`data/utils.py:pre_caption`): lowercase, `.!"()*#:;~` -> space,
    whitespace collapsed, at most `max_words` space-separated words."""
    words = _CTP_PUNCTUATION.sub(" ", text.lower()).split()
    return " ".join(words[:max_words])


class RecordBenchmark(Benchmark):
    """`Record`s as a `Benchmark`: `Record.task` is the item's group (its task in the group
    stream), `Record.classname` its subgroup (the class multi-modal retrieval's positives share).
    Every item gets as many captions as the item with the most (cycling its own), so the runner's
    token tensor is rectangular. `gallery_split`: the split multi-modal queries search."""

    def __init__(self, records: Sequence[Record], groups: Sequence[str], cfg: DataCfg, gallery_split: str,
                 caption=lambda c: c):
        self.gallery_split = gallery_split
        most = max((len(r.captions) for r in records), default=1)
        items = [{"split": r.split, "group": r.task, "subgroup": r.classname or "",
                  "captions": [caption(r.captions[k % len(r.captions)]) for k in range(most)], "key": r.key}
                 for r in records]
        subgroups = list(dict.fromkeys(it["subgroup"] for it in items))
        self.images = ImageFiles.of_records(records, cfg.image_size, cfg.workers)
        super().__init__(items, groups, subgroups, cfg)

    def _images(self, sel: list[int], styles: list[str]) -> ImageFiles:
        return self.images.subset(sel)


def p9d_benchmark(cfg: DataCfg) -> RecordBenchmark:
    """P9D under `cfg.root`: training pairs by industry, the test split for cross-modal retrieval,
    query vs gallery for multi-modal retrieval. Industries are named in English
    (`P9D_INDUSTRIES`; `data.tasks` picks and orders them, default CTP's order) and captions
    cleaned as CTP does (`pre_caption`)."""
    records = read_p9d_train(cfg.root)
    for split in ("test", "query", "gallery"):
        records += read_p9d_eval(cfg.root, split)
    records = [replace(r, task=P9D_INDUSTRIES.get(r.task, r.task)) for r in records]
    present = set(r.task for r in records if r.split == "train")
    groups = [g for g in P9D_INDUSTRIES.values() if g in present] + sorted(present - set(P9D_INDUSTRIES.values()))
    return RecordBenchmark(records, groups, cfg, gallery_split="gallery", caption=pre_caption)


READERS = {"p9d": p9d_benchmark}


def load_real_benchmark(cfg: DataCfg) -> RecordBenchmark:
    return READERS[cfg.benchmark](cfg)
