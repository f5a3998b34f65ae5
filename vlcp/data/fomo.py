"""A mini FoMo-in-Flux on the embedded benchmark: the pretraining pool, the adaptation and
retention datasets, and the concepts' side information.

- **Pretraining pool P**: the training items of `pool_groups` in the training styles; θ0 is
  pretrained on exactly these pairs (`vlcp pretrain fomo-base`) and λP replays them.
- **Adaptation datasets** (A_KA): every other group, one dataset per (group, training style),
  classes = the group's subgroups; `shapes` (classes: the 36 colour-shape pairs) and `scenes`
  (the 12 (object count, background colour) pairs). A concept is one (dataset, class).
- **Retention datasets** (A_ZS, never trained on after θ0): each pool group's held-out items
  (subgroup classification), every pool item in the unseen style (group classification), and
  image–text retrieval (R@5, both directions averaged) on the pool's test items.
- **Adaptation retrieval**: R@5 on the adaptation groups' test items.

Side information for the orderings (`vlcp.data.concepts`): a concept's **time** is the median
Unicode release year of its subgroup's emoji (procedural sets after the newest), its
**frequency** the mean count in P's captions of the words of its class name; **difficulty** and
**similarity** come from the base model (`concept_difficulty`, `class_embeddings`).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from vlcp.data.benchmark import EmojiBenchmark
from vlcp.data.concepts import Concept
from vlcp.data.emoji import readable
from vlcp.data.pairs import PairSet
from vlcp.data.procedural import COLOURS, SHAPES, render_scenes, render_shapes, scene_captions

# Unicode emoji version -> release year (emoji 0.6–2.0 are the 2015 baseline)
EMOJI_YEAR = {0.6: 2015, 0.7: 2015, 1.0: 2015, 2.0: 2015, 3.0: 2016, 4.0: 2016, 5.0: 2017, 11.0: 2018,
              12.0: 2019, 12.1: 2019, 13.0: 2020, 13.1: 2020, 14.0: 2021, 15.0: 2022, 15.1: 2023}
SHAPES_YEAR = 2024      # the procedural sets (shapes, scenes): dated after the newest emoji
SHAPE_TEMPLATES = ("a {} shape.", "a {}.", "a drawing of a {}.", "{}", "a simple {} on white.",
                   "a picture of a {}.", "an icon of a {}.", "a {} figure.")
SCENE_TEMPLATE = "a scene of {}."
EMOJI_TEMPLATE = "an emoji of {}."


@dataclass
class EvalSet:
    """One evaluation dataset: zero-shot classification (images, labels, class names, one
    template, as FoMo's per-dataset primer, or an explicit prompt ensemble `templates`) or
    retrieval (`pairs`, scored by R@5)."""
    name: str
    role: str                                   # "adaptation" (A_KA) or "retention" (A_ZS)
    images: torch.Tensor | None = None          # uint8 [M, S, S, 3]
    labels: torch.Tensor | None = None          # long [M]
    classes: list[str] = field(default_factory=list)
    template: str = EMOJI_TEMPLATE
    # an explicit prompt ensemble ("{}" -> class name), overriding `template`
    templates: list[str] | None = None
    pairs: PairSet | None = None                # retrieval sets

    @property
    def size(self) -> int:
        """What it is scored over: its images (classification) or its captions (retrieval)."""
        return len(self.images) if self.pairs is None else len(self.pairs.texts)


@dataclass
class FomoData:
    train: PairSet                              # pool P + adaptation training pairs
    pool: torch.Tensor                          # image indices of P in `train`
    concepts: list[Concept]                     # adaptation concepts
    concept_images: list[torch.Tensor]          # per concept: image indices in `train`
    year: list[float]                           # per concept
    frequency: list[float]                      # per concept
    templates: dict[str, str]                   # dataset -> zero-shot template
    eval_sets: list[EvalSet]

    def class_prompt(self, c: Concept) -> str:
        return self.templates[c.dataset].format(c.classname)


def slug(group: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-")


def concat_pairsets(a: PairSet, b: PairSet) -> PairSet:
    """`b`'s items after `a`'s (images, texts and per-item fields; groups as in `a`, -1 for b)."""
    n = len(a.texts)
    groups = None if a.groups is None else torch.cat([a.groups, b.groups if b.groups is not None
                                                      else torch.full((len(b.texts),), -1, dtype=torch.long)])
    return PairSet(torch.cat([a.images, b.images]), torch.cat([a.image_text, b.image_text + n]),
                   a.texts + b.texts, a.captions + b.captions, torch.cat([a.labels, b.labels]),
                   torch.cat([a.tasks, b.tasks]), torch.cat([a.items, b.items]), groups)


def _pairs(images: np.ndarray, label: np.ndarray, caps: list[list[str]]) -> PairSet:
    """A procedural set as image–text pairs: one item per image, its caption variants `caps`."""
    n = len(label)
    none = torch.full((n,), -1, dtype=torch.long)
    return PairSet(torch.from_numpy(images), torch.arange(n), [c[0] for c in caps], caps,
                   torch.from_numpy(label).long(), none, none.clone(), none.clone())


def shape_pairs(size: int, per_class: int, seed: int, captions: int) -> tuple[PairSet, list[str]]:
    """The procedural shapes as image–text pairs: class = "colour shape", `captions`
    procedural caption variants from SHAPE_TEMPLATES."""
    s = render_shapes(size, per_class, seed)
    classes = [f"{c} {sh}" for sh in SHAPES for c in COLOURS]
    label = s.labels["shape"] * len(COLOURS) + s.labels["colour"]
    caps = [[SHAPE_TEMPLATES[k % len(SHAPE_TEMPLATES)].format(classes[y]) for k in range(captions)]
            for y in label.tolist()]
    return _pairs(s.images, label, caps), classes


def scene_pairs(size: int, per_class: int, seed: int, captions: int) -> tuple[PairSet, list[str]]:
    """The procedural coloured scenes as image–text pairs: class = "count objects on
    background", captions naming count, background, colour and shape (`scene_captions`)."""
    s = render_scenes(size, per_class, seed)
    return _pairs(s.images, s.labels["scene"], scene_captions(s, captions)), s.classes["scene"]


# The procedural adaptation datasets: name -> (pair builder, zero-shot template, seed offset:
# training images from seed + offset, evaluation images from seed + offset + 1).
PROCEDURAL = {"shapes": (shape_pairs, SHAPE_TEMPLATES[0], 1), "scenes": (scene_pairs, SCENE_TEMPLATE, 3)}


def word_frequency(captions: list[str]) -> Counter:
    return Counter(w for c in captions for w in re.findall(r"[a-z0-9]+", c.lower()))


def concept_frequency(concepts: list[Concept], pool_captions: list[str]) -> list[float]:
    """Per concept, the mean count over the words of its class name of that word in the pool's captions."""
    counts = word_frequency(pool_captions)
    return [float(np.mean([counts[w] for w in re.findall(r"[a-z0-9]+", c.classname.lower())] or [0]))
            for c in concepts]


def build_fomo(bench: EmojiBenchmark, pool_groups: list[str], train_styles: list[str], unseen_styles: list[str],
               shapes_per_class: int = 6, seed: int = 0, adapt_unseen: bool = False) -> FomoData:
    """Assemble the mini FoMo-in-Flux from a prepared emoji benchmark (every group loaded);
    `adapt_unseen`: also score each adaptation group in the unseen styles (`_eval_sets`)."""
    groups = bench.group_names
    unknown = [g for g in pool_groups if g not in groups]
    if unknown:
        raise ValueError(f"fomo.pool_groups: unknown group {unknown[0]!r}; known: {', '.join(groups)}")
    pool_ids = [groups.index(g) for g in pool_groups]
    adapt_groups = [g for g in groups if g not in pool_groups]
    emoji_train = bench.pairs("train", train_styles)
    captions = len(emoji_train.captions[0])
    procedural = {name: make(bench.cfg.image_size, shapes_per_class, seed + off, captions)
                  for name, (make, _, off) in PROCEDURAL.items()}
    train = emoji_train
    for pairs, _ in procedural.values():
        train = concat_pairsets(train, pairs)

    n_items = len(emoji_train.texts)
    img_group = emoji_train.image_groups
    img_style = torch.arange(len(emoji_train.images)) // max(n_items, 1)  # images are style-major
    in_pool = torch.isin(img_group, torch.tensor(pool_ids))
    pool = in_pool.nonzero().squeeze(1)

    concepts, concept_images, year, templates = [], [], [], {}
    versions: dict[str, list[float]] = {}
    for it in bench.items:
        versions.setdefault(it["subgroup"], []).append(EMOJI_YEAR.get(it["version"], SHAPES_YEAR - 1))
    labels = emoji_train.image_labels
    for g in adapt_groups:
        gi = groups.index(g)
        subgroups = sorted({int(c) for c in labels[img_group == gi].tolist()})
        for si, style in enumerate(train_styles):
            name = f"{slug(g)}/{style}"
            templates[name] = EMOJI_TEMPLATE
            for c in subgroups:
                sel = ((img_group == gi) & (img_style == si) & (labels == c)).nonzero().squeeze(1)
                concepts.append(Concept(name, readable(bench.class_names[c])))
                concept_images.append(sel)
                year.append(float(np.median(versions[bench.class_names[c]])))
    off = len(emoji_train.images)
    for name, (pairs, classes) in procedural.items():
        templates[name] = PROCEDURAL[name][1]
        for y, cname in enumerate(classes):
            concepts.append(Concept(name, cname))
            concept_images.append((pairs.labels == y).nonzero().squeeze(1) + off)
            year.append(float(SHAPES_YEAR))
        off += len(pairs.images)

    frequency = concept_frequency(concepts, [c for i in pool.tolist() for c in train.captions[int(train.image_text[i])]])
    return FomoData(train, pool, concepts, concept_images, year, frequency, templates,
                    _eval_sets(bench, pool_groups, adapt_groups, train_styles, unseen_styles,
                               shapes_per_class, seed, adapt_unseen))


def _classification(name, role, pairs: PairSet, by_group: bool, classes_all: list[str], used=None,
                    template=EMOJI_TEMPLATE):
    """Classification over `used` class ids (default: those present in `pairs`)."""
    raw = pairs.image_groups if by_group else pairs.image_labels
    used = sorted(set(raw.tolist())) if used is None else used
    remap = {c: i for i, c in enumerate(used)}
    return EvalSet(name, role, pairs.images, torch.tensor([remap[int(c)] for c in raw.tolist()]),
                   [readable(classes_all[c]) for c in used], template)


def _eval_sets(bench, pool_groups, adapt_groups, train_styles, unseen_styles, shapes_per_class, seed,
               adapt_unseen: bool = False):
    """The evaluation datasets. Adaptation (A_KA): each adaptation group's held-out items in each
    training style, and with `adapt_unseen` its every item in each unseen style (images the stream
    never trains on, of concepts it does), then the procedural sets and adaptation retrieval.
    Retention (A_ZS): each pool group's held-out items, the pool in the unseen style, pool retrieval."""
    groups = bench.group_names
    held_out = ("test", "val", "query")   # every item not trained on (the runner has no use for val/query)
    test = bench.pairs(held_out, train_styles)
    subgroups = {g: sorted({bench.class_names.index(it["subgroup"]) for it in bench.items if it["group"] == g})
                 for g in groups}
    scored = [(style, held_out) for style in train_styles]
    if adapt_unseen:
        scored += [(style, ("train", "val", "test", "query")) for style in unseen_styles]
    out = []
    for g in adapt_groups:   # every class of the dataset, streamed yet or not (as FoMo)
        gi = groups.index(g)
        for style, splits in scored:
            sub = bench.pairs(splits, [style])
            sub = sub.select_texts(sub.groups == gi)
            out.append(_classification(f"{slug(g)}/{style}", "adaptation", sub, False, bench.class_names,
                                       subgroups[g]))
    for name, (make, template, off) in PROCEDURAL.items():
        pairs, classes = make(bench.cfg.image_size, max(2, shapes_per_class // 2), seed + off + 1, 1)
        out.append(EvalSet(name, "adaptation", pairs.images, pairs.labels, classes, template))
    adapt_ids = torch.tensor([groups.index(g) for g in adapt_groups])
    out.append(EvalSet("adaptation-retrieval", "adaptation", pairs=test.select_texts(torch.isin(test.groups, adapt_ids))))
    pool_ids = torch.tensor([groups.index(g) for g in pool_groups])
    for g in pool_groups:
        gi = groups.index(g)
        sub = test.select_texts(test.groups == gi)
        if len(set(sub.labels.tolist())) > 1:
            out.append(_classification(slug(g), "retention", sub, False, bench.class_names, subgroups[g]))
    if unseen_styles:
        unseen = bench.pairs(("train", "val", "test", "query"), unseen_styles)
        unseen = unseen.select_texts(torch.isin(unseen.groups, pool_ids))
        out.append(_classification(f"pool/{'+'.join(unseen_styles)}", "retention",
                                   unseen.select_texts(subset_mask(len(unseen.texts), seed)), True, groups))
    out.append(EvalSet("pool-retrieval", "retention", pairs=test.select_texts(torch.isin(test.groups, pool_ids))))
    return out


def subset_mask(n: int, seed: int, floor: int = 300, frac: float = 0.1, labels: torch.Tensor | None = None) -> torch.Tensor:
    """FoMo-in-Flux's evaluation subset, max(floor, ⌈frac·N⌉) capped at N, as a seeded selection
    (bool [n]); the same subset at every evaluation. With `labels`, class-stratified first as
    FoMo's: ⌊size / classes⌋ seeded picks of each class (all of a smaller class), then a random
    fill from the rest; without, a random selection (the emoji study's one large set, the pool in
    the unseen style, 1,110 images)."""
    keep = int(min(n, max(floor, -(-n * frac // 1))))
    rng = np.random.default_rng(seed)
    mask = torch.zeros(n, dtype=torch.bool)
    if labels is None:
        mask[torch.from_numpy(rng.permutation(n)[:keep])] = True
        return mask
    classes = torch.unique(labels)
    per_class = keep // max(1, len(classes))
    for c in classes.tolist():
        members = (labels == c).nonzero()[:, 0].numpy()
        mask[torch.from_numpy(rng.permutation(members)[:per_class])] = True
    rest = (~mask).nonzero()[:, 0].numpy()
    mask[torch.from_numpy(rng.permutation(rest)[: keep - int(mask.sum())])] = True
    return mask


POOLS = ("full", "one-style", "half", "noisy")


def with_pool(data: FomoData, pool: str, seed: int = 0) -> FomoData:
    """The pretraining pool λP replays (the paper's Fig. 17 swaps LAION for CC3M, CC12M or
    DataComp: pools of other size, diversity and caption quality). Here, from θ0's own pool:
    `full` (every pair θ0 was pretrained on), `one-style` (only the first training style's
    images: less visual diversity), `half` (a seeded half of the items: smaller), `noisy` (a
    seeded half of the pool images paired with another pool item's captions: web-like caption
    noise). Returns a new FomoData; `data` is not changed."""
    if pool == "full":
        return data
    rng = np.random.default_rng(seed)
    p = data.pool
    train = data.train
    if pool == "one-style":   # images are style-major: an item's first image is its first style's
        first: dict[int, int] = {}
        for i, item in zip(sorted(p.tolist()), train.image_text[torch.sort(p).values].tolist()):
            first.setdefault(item, i)
        return _replace(data, pool=torch.tensor(sorted(first.values()), dtype=torch.long))
    if pool == "half":
        items = torch.unique(train.image_text[p])
        chosen = torch.from_numpy(rng.permutation(len(items))[: len(items) // 2])
        return _replace(data, pool=p[torch.isin(train.image_text[p], items[chosen])])
    if pool == "noisy":
        swap = p[torch.from_numpy(rng.permutation(len(p))[: len(p) // 2])]
        image_text = train.image_text.clone()
        image_text[swap] = train.image_text[p[torch.from_numpy(rng.integers(0, len(p), len(swap)))]]
        return _replace(data, train=PairSet(train.images, image_text, train.texts, train.captions, train.labels,
                                            train.tasks, train.items, train.groups))
    raise ValueError(f"fomo.pool: unknown pool {pool!r}; known: {', '.join(POOLS)}")


def _replace(data: FomoData, **kw) -> FomoData:
    from dataclasses import replace
    return replace(data, **kw)
