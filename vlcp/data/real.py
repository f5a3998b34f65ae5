"""Benchmarks over the real datasets (`data.benchmark` other than `emoji`), for `vlcp run`.

`RecordBenchmark` turns the `Record`s of a `vlcp.data.formats` reader into the `Benchmark` the
runner trains and evaluates on, with images decoded on access (`ImageFiles`, in `data.workers`
DataLoader worker processes) instead of held in memory; an unreadable image is skipped and counted
(`BadImages`, up to `data.max_bad_images`), one tracker per loaded dataset unless the run passes its own. Real datasets have one image per item: `data.train_styles`
does not apply, and there is no held-out style (`data.unseen_styles` must be empty).

| `data.benchmark` | dataset        | tasks (`data.stream`)            | evaluation                                  |
|------------------|----------------|----------------------------------|---------------------------------------------|
| `p9d`            | P9D (CTP)      | industries (`group`), CTP order  | test (cross-modal), query vs gallery (mAP)  |
| `mscoco36`       | CLFM's MSCOCO36 corpus (CLL-CLIP) | languages (`language`), CLL-CLIP's order | MSCOCO36 test (in domain), XM3600 (`data.ood_root`, out of domain) |
| `fomo`           | FoMo-in-Flux info dicts + a webdataset pool | concepts (`concepts`) of `fomo.datasets` | each dataset's test split (A_KA), `fomo.retention` / `fomo.retrieval` (A_ZS) |
| `cc`             | IncCLIP's CC2M (webdataset shards) | pseudo-class chunks (`class`, `data.labels`) or random chunks (`instance`) | held-out pairs per task; `eval.downstream` classification and `eval.downstream_retrieval` (FoMo-format datasets) |
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm import tqdm

from vlcp.config import DataCfg, ExperimentCfg
from vlcp.data.augment import train_transform
from vlcp.data.concepts import Concept
from vlcp.data.formats import BadImages, ImageFiles, Record, read_json_file, require
from vlcp.data.formats.fomo_info import (fomo_handle, info_path, read_fomo_classnames, read_fomo_info,
                                         read_fomo_template)
from vlcp.data.formats.wds import read_wds
from vlcp.data.formats.p9d import P9D_INDUSTRIES, read_p9d_eval, read_p9d_train
from vlcp.data.formats.xm3600 import (CLL_CLIP_ORDER, cldr_code, clfm_code, iter_triplet_lines, read_mscoco36, read_xm3600,
                                      triplet_path)
from vlcp.data.languages import EvalSet, Examples, LanguageData, language_order
from vlcp.data.pairs import Benchmark, PairSet
from vlcp.errors import ConfigError, VlcpError

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
    token tensor is rectangular. `gallery_split`: the split multi-modal queries search.
    Classes are in order of first appearance, or (`id_classes`: class names that are ids, cc's
    pseudo classes) sorted, so the class stream's contiguous chunks follow the ids, and not named
    in prompts (`named_classes`)."""

    def __init__(self, records: Sequence[Record], groups: Sequence[str], cfg: DataCfg, gallery_split: str,
                 caption=lambda c: c, id_classes: bool = False, bad: BadImages | None = None):
        self.gallery_split, self.named_classes = gallery_split, not id_classes
        most = max((len(r.captions) for r in records), default=1)
        items = [{"split": r.split, "group": r.task, "subgroup": r.classname or "",
                  "captions": [caption(r.captions[k % len(r.captions)]) for k in range(most)], "key": r.key}
                 for r in records]
        subgroups = sorted(set(it["subgroup"] for it in items)) if id_classes else \
            list(dict.fromkeys(it["subgroup"] for it in items))
        transform = train_transform(cfg.transform)
        self.images = ImageFiles.of_records(records, cfg.image_size, cfg.workers,
                                            squash=transform is not None and transform.squash_eval,
                                            bad=BadImages(cfg.max_bad_images) if bad is None else bad)
        super().__init__(items, groups, subgroups, cfg)

    def _images(self, sel: list[int], styles: list[str]) -> ImageFiles:
        return self.images.subset(sel)


def p9d_benchmark(cfg: DataCfg, bad: BadImages | None = None) -> RecordBenchmark:
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
    return RecordBenchmark(records, groups, cfg, gallery_split="gallery", caption=pre_caption, bad=bad)


def read_cc_labels(path: str | Path, records: Sequence[Record]) -> list[int]:
    """Each record's pseudo class from `path`, a JSON object {sample key: ImageNet class id}
    (IncCLIP's BEiT predictions); a record without one is an error naming its key."""
    if not path:
        raise ConfigError("data.labels: the class stream of cc needs each pair's pseudo label (a JSON file "
                          "{sample key: ImageNet class id}; data/README.md, 'cc2m/'), or use data.stream: instance")
    labels = read_json_file(Path(path), "pseudo-label file of the class split")
    if not isinstance(labels, dict):
        raise VlcpError(f"{path}: expected an object {{sample key: class id}}, got {type(labels).__name__}")
    out = []
    for r in records:
        y = labels.get(r.key)
        if not isinstance(y, int) or isinstance(y, bool) or y < 0:
            missing = sum(1 for q in records if q.key not in labels)
            raise VlcpError(f"{path}: sample {r.key!r} has " + (f"no label ({missing} of {len(records)} samples lack one)"
                            if y is None else f"label {y!r}, not a class id (int >= 0)"))
        out.append(y)
    return out


def cc_benchmark(cfg: DataCfg, bad: BadImages | None = None) -> RecordBenchmark:
    """IncCLIP's CC2M: the first `data.max_pairs` pairs (0 = all) of the webdataset shards under
    `cfg.root`, images read from the shards on access, cut into `data.num_tasks` chunks by the
    stream: `instance` = seeded random equal chunks; `class` = contiguous ranges of the pairs'
    pseudo classes (`data.labels`), about equal in pairs, or in classes with `data.class_chunks:
    classes` (IncCLIP's 4 x 250 ImageNet classes; the paper profile's). A
    seeded `data.split.test` share of the pairs is held out for the per-task retrieval matrix;
    IncCLIP's own evaluation is the downstream suite (`eval.downstream`, `load_downstream`)."""
    records = read_wds(cfg.root, limit=cfg.max_pairs or None, lazy=True)
    labels = read_cc_labels(cfg.labels, records) if cfg.stream == "class" else [0] * len(records)
    test = np.random.default_rng(cfg.seed).random(len(records)) < cfg.split.test
    records = [replace(r, split="test" if t else "train", task="CC", classname=f"class {y:04d}")
               for r, y, t in zip(records, labels, test.tolist())]
    return RecordBenchmark(records, ["CC"], cfg, gallery_split="query", id_classes=True, bad=bad)


READERS = {"p9d": p9d_benchmark, "cc": cc_benchmark}


def eval_set(records: Sequence[Record], cfg: DataCfg, bad: BadImages | None = None) -> EvalSet:
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
    bad = BadImages(cfg.max_bad_images) if bad is None else bad
    return EvalSet(ImageFiles(sources, cfg.image_size, cfg.workers, bad=bad),
                   torch.arange(len(sources)),
                   {lang: (texts, torch.tensor(items, dtype=torch.long)) for lang, (texts, items) in captions.items()})


def mscoco36_language_data(cfg: DataCfg) -> LanguageData:
    """CLL-CLIP's stream on CLFM's data under `cfg.root` (data/README.md, "mscoco36/"): per language
    the triplet file `triplet/coco_vision-en-<lang>.tsv.gz` (every file line-aligned with the
    English one: same images, same English captions), images under `images/`; in-domain test =
    MSCOCO36's test split in each language, out-of-domain test = XM3600 under `cfg.ood_root` (if set).
    Languages are CLDR codes (`qu` for CLFM's `quz`); default order: CLL-CLIP's `order222`."""
    default = [cldr_code(c) for c in CLL_CLIP_ORDER]
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
            elif i >= len(english) or english[i] != source or image_of.get(rpath) != item[i]:
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
    bad = BadImages(cfg.max_bad_images)
    images = ImageFiles([root / "images" / p for p in image_of], cfg.image_size, cfg.workers, bad=bad)
    codes = [clfm_code(lang) for lang in languages]
    back = dict(zip(codes, languages))
    cldr = lambda recs: [replace(r, task=back[r.task]) for r in recs]  # noqa: E731
    sets = {"in_domain": eval_set(cldr(read_mscoco36(root, "test", codes)), cfg, bad)}
    if cfg.ood_root:
        sets["out_domain"] = eval_set(cldr(read_xm3600(cfg.ood_root, codes)), cfg, bad)
    test = sets["in_domain"]
    cover = {lang: float(len(test.captions[lang][1].unique()) / len(test.image_items)) for lang in languages}
    return LanguageData(list(languages), examples, [images], english, sets,
                        {"train": {lang: 1.0 for lang in languages}, "test": cover})


LANGUAGE_READERS = {"mscoco36": mscoco36_language_data}


def load_real_benchmark(cfg: DataCfg, bad: BadImages | None = None) -> RecordBenchmark:
    return READERS[cfg.benchmark](cfg, bad)


# ----------------------------------------------------------------------------- FoMo-in-Flux

FOMO_TEMPLATE = "A photo of a {}."   # a dataset whose info dict has no primer to recover one from ...
FOMO_PRIMERS = {"fscoco": "A sketch of a {}"}   # ... except FoMo's own PRIMER where its info dicts carry none (data_lib/fscoco.py)


def fomo_template(root: Path, name: str) -> str:
    """The dataset's class-prompt template: recovered from its info dict, else FoMo's PRIMER for it, else "A photo of a {}."."""
    return read_fomo_template(root, name) or FOMO_PRIMERS.get(name.lower(), FOMO_TEMPLATE)


def record_pairs(records: Sequence[Record], cfg: DataCfg, every_caption: bool = False,
                 bad: BadImages | None = None) -> PairSet:
    """Records as a PairSet with images decoded on access. Training (default): one text per
    record (its first caption) and up to `data.captions_per_item` caption variants (cycling its
    own); `every_caption`: every caption is a text of its record's item (retrieval sets)."""
    n = len(records)
    most = min(cfg.captions_per_item, max((len(r.captions) for r in records), default=1))
    caps = [[r.captions[k % len(r.captions)] for k in range(most)] for r in records]
    if every_caption:
        texts = [c for r in records for c in r.captions]
        items = torch.tensor([i for i, r in enumerate(records) for _ in r.captions], dtype=torch.long)
        first = torch.cumsum(torch.tensor([0] + [len(r.captions) for r in records[:-1]]), 0)
    else:
        texts, items, first = [c[0] for c in caps], torch.arange(n), torch.arange(n)
    none = torch.full((len(texts),), -1, dtype=torch.long)
    labels = torch.tensor([-1 if r.label is None else r.label for r in records], dtype=torch.long)
    bad = BadImages(cfg.max_bad_images) if bad is None else bad
    images = ImageFiles.of_records(records, cfg.image_size, cfg.workers, bad=bad)
    if every_caption:
        return PairSet(images, first, texts, [[t] for t in texts], none, none, items)
    return PairSet(images, first, texts, caps, labels, none, items)


def info_eval_sets(root: Path, classification: dict[str, str], retrieval: dict[str, str], d: DataCfg,
                   classes: dict[str, list[str]] | None = None, templates: dict[str, str] | None = None,
                   subsets: bool = True, bad: BadImages | None = None) -> list:
    """`vlcp.data.fomo.EvalSet`s from FoMo-format info dicts under `root`: each dataset of
    `classification` (name -> role) on its test split with its class names and zero-shot template
    (given, or read), then each of `retrieval` (name -> role) with every caption of an image a
    match. `subsets`: FoMo's per-task subset rule (max(300, 2 x classes, 10 %), class-stratified
    then a random fill for classification, the same at every evaluation); else whole test splits."""
    from vlcp.data.fomo import EvalSet, subset_mask

    classes = classes or {n: read_fomo_classnames(root, n) for n in classification}
    templates = templates or {n: fomo_template(root, n) for n in classification}

    def test_split(name: str, floor: int = 300, stratified: bool = False) -> list[Record]:
        recs = read_fomo_info(root, name, "test")
        if not subsets:
            return recs
        labels = torch.tensor([-1 if r.label is None else r.label for r in recs]) if stratified else None
        return [recs[i] for i in subset_mask(len(recs), d.seed, floor=floor, labels=labels).nonzero()[:, 0]]

    sets = []
    for name, role in classification.items():
        pairs = record_pairs(test_split(name, floor=max(300, 2 * len(classes[name])), stratified=True), d, bad=bad)
        sets.append(EvalSet(name, role, pairs.images, pairs.labels, classes[name], templates[name]))
    return sets + [EvalSet(n, role, pairs=record_pairs(test_split(n), d, every_caption=True, bad=bad))
                   for n, role in retrieval.items()]


def load_downstream(cfg: ExperimentCfg, bad: BadImages | None = None) -> list:
    """IncCLIP's downstream suite for a cc run (`eval.heldout`): zero-shot classification on each of
    `eval.downstream` and retrieval on each of `eval.downstream_retrieval`, FoMo-format datasets
    under `eval.downstream_root`, whole test splits, each dataset's own template."""
    e = cfg.eval
    if not (e.downstream or e.downstream_retrieval):
        raise ConfigError("eval.downstream: a cc run's held-out suite is the downstream datasets; name them "
                          "(eval.downstream, eval.downstream_retrieval under eval.downstream_root) or set eval.heldout: false")
    if not e.downstream_root:
        raise ConfigError("eval.downstream_root: the folder of the downstream datasets (FoMo-in-Flux format; "
                          "data/README.md, 'cc2m/')")
    root = require(Path(e.downstream_root), "downstream datasets (FoMo-in-Flux format)")
    names = [fomo_handle(root, n) for n in e.downstream]
    return info_eval_sets(root, {n: "downstream" for n in names},
                          {fomo_handle(root, n): "retention" for n in e.downstream_retrieval}, cfg.data, subsets=False,
                          bad=bad)


def fomo_data(cfg: ExperimentCfg, bad: BadImages | None = None):
    """FoMo-in-Flux on its own data (`data.benchmark: fomo`, data/README.md "fomo/"): the pool P =
    the first `fomo.pool_size` pairs of the webdataset shards in `fomo.pool_root`; the adaptation
    datasets `fomo.datasets` (their `train` info dicts), one concept per (dataset, class); every
    dataset's `test` split evaluated with its recovered primer (A_KA; those of
    `fomo.adaptation_retrieval`, FSCOCO, by R@5 over every caption instead), plus `fomo.retention`
    (classification) and `fomo.retrieval` (R@5 over every caption), A_ZS. Per-task evaluation uses
    FoMo's subset rule (max(300, 2 x classes, 10 %) of a test split, class-stratified then a random
    fill for classification, the same at every evaluation).
    Concept side information: frequency = P's caption word counts; time has none (use FoMo's
    time_incremental stream files, `fomo.stream_file`)."""
    from vlcp.data.fomo import FomoData, concept_frequency

    f, d = cfg.fomo, cfg.data
    if not f.datasets:
        raise ConfigError("fomo.datasets: name the adaptation datasets (FoMo handles, e.g. [DTD, CARS196]) "
                          "for data.benchmark: fomo")
    if not f.pool_root and f.mixture[0] > 0:
        raise ConfigError(f"fomo.pool_root: λP = {f.mixture[0]} replays the pool P; give its webdataset "
                          "directory (data/README.md, 'pools/') or set fomo.mixture's λP to 0")
    root = require(Path(d.root), "FoMo-in-Flux data folder")
    adapt, retention, retrieval = ([fomo_handle(root, n) for n in names] for names in (f.datasets, f.retention, f.retrieval))
    classes = {n: read_fomo_classnames(root, n) for n in adapt + retention}
    templates = {n: fomo_template(root, n) for n in adapt + retention}
    pool = read_wds(f.pool_root, limit=f.pool_size, lazy=True) if f.pool_root else []   # images read per batch
    records, concepts, concept_images = list(pool), [], []
    for name in adapt:
        recs = read_fomo_info(root, name, "train")
        by_class: dict[int, list[int]] = {}
        for i, r in enumerate(recs):
            if r.label is None or r.label >= len(classes[name]):
                raise VlcpError(f"{info_path(root, name, 'train')}: entry {r.key!r}: 'target' "
                                f"{r.label!r} is not a class of {name}_classnames.json ({len(classes[name])} classes)")
            by_class.setdefault(r.label, []).append(len(records) + i)
        for y in sorted(by_class):
            concepts.append(Concept(name, classes[name][y]))
            concept_images.append(torch.tensor(by_class[y], dtype=torch.long))
        records += recs
    bad = BadImages(d.max_bad_images) if bad is None else bad
    train = record_pairs(records, d, bad=bad)

    by_retrieval = {n.lower() for n in f.adaptation_retrieval}
    sets = info_eval_sets(root, {**{n: "adaptation" for n in adapt if n.lower() not in by_retrieval},
                                 **{n: "retention" for n in retention}},
                          {**{n: "adaptation" for n in adapt if n.lower() in by_retrieval}, **{n: "retention" for n in retrieval}},
                          d, classes, templates, subsets=True, bad=bad)
    return FomoData(train, torch.arange(len(pool)), concepts, concept_images, [float("nan")] * len(concepts),
                    concept_frequency(concepts, [c for r in pool for c in r.captions]),
                    {n: templates[n] for n in adapt}, sets)
