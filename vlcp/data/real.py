"""Benchmarks over the real datasets (`data.benchmark` other than `emoji`), for `vlcp run`.

`RecordBenchmark` turns the `Record`s of a `vlcp.data.formats` reader into the `Benchmark` the
runner trains and evaluates on, with images decoded on access (`ImageFiles`, `data.workers`
threads) instead of held in memory. Real datasets have one image per item: `data.train_styles`
does not apply, and there is no held-out style (`data.unseen_styles` must be empty).

| `data.benchmark` | dataset        | tasks (`data.stream`)            | evaluation                                  |
|------------------|----------------|----------------------------------|---------------------------------------------|
| `p9d`            | P9D (CTP)      | industries (`group`), CTP order  | test (cross-modal), query vs gallery (mAP)  |
| `mscoco36`       | CLFM's MSCOCO36 corpus (CLL-CLIP) | languages (`language`), CLL-CLIP's order | MSCOCO36 test (in domain), XM3600 (`data.ood_root`, out of domain) |

FoMo-in-Flux's concept stream still runs on the embedded benchmark only: its readers exist
(`vlcp.data.formats`), its runner does not stream them.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import torch
from tqdm import tqdm

from vlcp.config import DataCfg
from vlcp.data.benchmark import Benchmark
from vlcp.data.formats import ImageFiles, Record, require
from vlcp.data.formats.p9d import P9D_INDUSTRIES, read_p9d_eval, read_p9d_train
from vlcp.data.formats.xm3600 import CLL_CLIP_ORDER, iter_triplet_lines, read_mscoco36, read_xm3600, triplet_path
from vlcp.data.languages import EvalSet, Examples, LanguageData, language_order
from vlcp.errors import VlcpError

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


def clfm_code(lang: str) -> str:
    """CLFM's file code of a CLDR language code (XM3600 calls Quechua `quz`)."""
    return "quz" if lang == "qu" else lang


def eval_set(records: Sequence[Record], cfg: DataCfg) -> EvalSet:
    """Per-(language, image) caption records as an EvalSet: each distinct image once, every
    caption of a language with the image it describes (multi-caption retrieval, as CLFM's)."""
    item_of: dict[str, int] = {}
    sources: list = []
    captions: dict[str, tuple[list[str], list[int]]] = {}
    for r in records:
        if r.key not in item_of:
            item_of[r.key] = len(sources)
            sources.append(r.image)
        texts, items = captions.setdefault(r.task, ([], []))
        texts += r.captions
        items += [item_of[r.key]] * len(r.captions)
    return EvalSet(ImageFiles(sources, cfg.image_size, cfg.workers), torch.arange(len(sources)),
                   {lang: (texts, torch.tensor(items, dtype=torch.long)) for lang, (texts, items) in captions.items()})


def mscoco36_language_data(cfg: DataCfg) -> LanguageData:
    """CLL-CLIP's stream on CLFM's data under `cfg.root` (data/README.md, "mscoco36/"): per language
    the triplet file `triplet/coco_vision-en-<lang>.tsv.gz` (every file line-aligned with the
    English one: same images, same English captions), images under `images/`; in-domain test =
    MSCOCO36's test split in each language, out-of-domain test = XM3600 under `cfg.ood_root` (if set).
    Languages are CLDR codes (`qu` for CLFM's `quz`); default order: CLL-CLIP's `order222`."""
    default = [("qu" if c == "quz" else c) for c in CLL_CLIP_ORDER]
    languages = (language_order(cfg.languages) if cfg.languages else default)[: cfg.num_languages or None]
    root = require(Path(cfg.root), "MSCOCO36 dataset")
    image_of: dict[str, int] = {}
    english: list[str] = []
    item: list[int] = []
    captions: dict[str, list[str]] = {}
    for lang in tqdm(languages, desc="triplet files", unit="language", disable=len(languages) < 8):
        path = triplet_path(root, clfm_code(lang))
        targets = captions[lang] = []
        first = not english
        for i, (rpath, source, target) in enumerate(iter_triplet_lines(path)):
            if source is None:
                raise VlcpError(f"{path}: line {i + 1}: a triplet file needs 3 fields (image, English, target)")
            if first:
                item.append(image_of.setdefault(rpath, len(image_of)))
                english.append(source)
            elif i >= len(english) or english[i] != source:
                raise VlcpError(f"{path}: line {i + 1}: not line-aligned with {triplet_path(root, clfm_code(languages[0]))}"
                                " (every language's file must have the same lines of images and English captions)")
            targets.append(target)
        if len(targets) != len(english) or not targets:
            raise VlcpError(f"{path}: {len(targets)} lines, but {triplet_path(root, clfm_code(languages[0]))} has "
                            f"{len(english)}; every language's file must have the same lines")
    n = len(english)
    examples = Examples(list(languages), torch.arange(len(languages)).repeat_interleave(n),
                        torch.tensor(item, dtype=torch.long).repeat(len(languages)),
                        torch.arange(n).repeat(len(languages)), captions)
    images = ImageFiles([root / "images" / p for p in image_of], cfg.image_size, cfg.workers)
    codes = [clfm_code(lang) for lang in languages]
    back = dict(zip(codes, languages))
    cldr = lambda recs: [replace(r, task=back[r.task]) for r in recs]  # noqa: E731
    sets = {"in_domain": eval_set(cldr(read_mscoco36(root, "test", codes)), cfg)}
    if cfg.ood_root:
        sets["out_domain"] = eval_set(cldr(read_xm3600(cfg.ood_root, codes)), cfg)
    test = sets["in_domain"]
    cover = {lang: float(len(test.captions[lang][1].unique()) / len(test.image_items)) for lang in languages}
    return LanguageData(list(languages), examples, [images], english, sets,
                        {"train": {lang: 1.0 for lang in languages}, "test": cover})


LANGUAGE_READERS = {"mscoco36": mscoco36_language_data}


def load_real_benchmark(cfg: DataCfg) -> RecordBenchmark:
    return READERS[cfg.benchmark](cfg)
