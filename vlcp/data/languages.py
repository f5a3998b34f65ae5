"""The language stream of the emoji benchmark (CLL-CLIP's continual language learning).

Each of the 36 XM3600 languages is one task. A training example is (an emoji's image, its
English caption, the same caption in the task's language): the captions are CLDR's name and
keywords for that emoji in each language (`vlcp.data.cldr`), so the English and foreign texts
are translations of each other, as MSCOCO36's machine-translated captions are in the paper.

Captions per item and language (variant 0 is the evaluation caption):
  0: "name: kw1, kw2, kw3"   1: "name"   2: "name: 2 random keywords"   3: "3 random keywords, name"
Keywords equal to the name are dropped; an item without keywords uses its name in every variant.
Items a language has no CLDR entry for are left out of that language (Māori, Quechua, Danish and
a few others are partial: see `coverage`).

XM3600 calls Cusco Quechua `quz`; CLDR's table has Quechua as `qu`. We use the CLDR codes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from vlcp.config import DataCfg
from vlcp.data.cldr import load_cldr
from vlcp.errors import ConfigError
from vlcp.utils import derive_seed

XM3600 = ("ar", "bn", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fil", "fr", "he", "hi", "hr", "hu",
          "id", "it", "ja", "ko", "mi", "nl", "no", "pl", "pt", "qu", "ro", "ru", "sv", "sw", "te", "th",
          "tr", "uk", "vi", "zh")
VARIANTS = 4


def language_order(languages: list[str] | tuple[str, ...] = (), seed: int = 0) -> list[str]:
    """The task order: `languages` as given, or English first and the other 35 XM3600 languages
    in a seeded random order (the paper's protocol; the seed is `data.seed`)."""
    if languages:
        bad = [lang for lang in languages if lang not in XM3600]
        if bad:
            raise ConfigError(f"data.languages: unknown language {bad[0]!r}; known (CLDR codes): {', '.join(XM3600)}")
        if len(set(languages)) != len(languages):
            raise ConfigError("data.languages: a language appears twice")
        return list(languages)
    rest = [lang for lang in XM3600 if lang != "en"]
    rng = np.random.default_rng(derive_seed(seed, "language-order"))
    return ["en"] + [rest[i] for i in rng.permutation(len(rest))]


def captions(name: str, keywords: tuple[str, ...] | list[str], rng: np.random.Generator) -> list[str]:
    """The VARIANTS captions of one item in one language (see the module docstring)."""
    kws = [k for k in keywords if k.strip() and k.lower() != name.lower()]
    if not kws:
        return [name] * VARIANTS
    pick = lambda n: list(rng.permutation(kws)[:n])  # noqa: E731
    return [f"{name}: {', '.join(kws[:3])}", name, f"{name}: {', '.join(pick(2))}", f"{', '.join(pick(3))}, {name}"]


@dataclass
class LanguageCorpus:
    """Captions of benchmark items in each language: `text[lang][item]` is a list of VARIANTS
    captions, or None where CLDR has no entry for that item in that language."""
    languages: list[str]
    text: dict[str, list[list[str] | None]]

    def has(self, lang: str) -> np.ndarray:
        """bool [items]: which items have captions in `lang`."""
        return np.array([c is not None for c in self.text[lang]])


def build_corpus(items: list[dict], languages: list[str], seed: int = 0) -> LanguageCorpus:
    """Captions for benchmark items (dicts with a CLDR `key`) in `languages` (+ English)."""
    table = load_cldr()
    text: dict[str, list[list[str] | None]] = {}
    for lang in dict.fromkeys(["en", *languages]):
        ann = table.get(lang, {})
        rows: list[list[str] | None] = []
        for it in items:
            a = ann.get(it["key"])
            if a is None and lang == "en":          # English always has a caption (the benchmark's name)
                rows.append(captions(it["name"], it.get("keywords", []), np.random.default_rng(0)))
                continue
            rng = np.random.default_rng(derive_seed(seed, "lang-captions", lang, it["key"]))
            rows.append(None if a is None else captions(a.name, a.keywords, rng))
        text[lang] = rows
    return LanguageCorpus(list(languages), text)


def coverage(corpus: LanguageCorpus, idx: list[int] | None = None) -> dict[str, float]:
    """Share of the items (all, or those in `idx`) each language has captions for."""
    out = {}
    for lang in corpus.languages:
        has = corpus.has(lang)
        out[lang] = float(has[idx].mean() if idx is not None else has.mean())
    return out


@dataclass
class Examples:
    """The training examples of a language stream: example e is (language `lang[e]`, image
    `item[e]`, row `row[e]`); its caption is `captions[languages[lang[e]]][row[e]]` and its English
    source caption row `row[e]` of `LanguageData.english` (the emoji benchmark: row = item x
    VARIANTS + caption variant; CLFM's corpus: the line of the triplet files). Ids index these arrays."""
    languages: list[str]
    lang: torch.Tensor      # long [E]: index into `languages`
    item: torch.Tensor      # long [E]: row of the training images
    row: torch.Tensor       # long [E]: row of the English captions and of the language's captions
    captions: dict[str, Sequence[str | None]]

    def __len__(self) -> int:
        return len(self.lang)

    def texts(self, ids: torch.Tensor) -> list[str]:
        return [self.captions[self.languages[lg]][r] for lg, r in zip(self.lang[ids].tolist(), self.row[ids].tolist())]

    def of_language(self, lang: str) -> torch.Tensor:
        return (self.lang == self.languages.index(lang)).nonzero().squeeze(1)


@dataclass
class EvalSet:
    """One retrieval test set of a language stream: images, the item each shows, and per language
    the captions of those items (several per item where the dataset has them)."""
    images: Any                   # uint8 [M, S, S, 3]: array, tensor or `ImageFiles`
    image_items: torch.Tensor     # long [M]
    captions: dict[str, tuple[list[str], torch.Tensor]]   # lang -> (captions, item of each caption)


@dataclass
class LanguageData:
    """What the language stream trains and evaluates on, from the emoji benchmark
    (`emoji_language_data`) or CLFM's MSCOCO36 corpus (`vlcp.data.real.mscoco36_language_data`)."""
    languages: list[str]               # the task order
    examples: Examples
    train_images: list[Any]            # one image array per training style (real data: one); Examples.item indexes each
    english: list[str]                 # English source captions; Examples.row indexes them
    eval_sets: dict[str, EvalSet]      # "in_domain", and "out_domain" where there is one
    coverage: dict[str, dict[str, float]]   # {"train" | "test": {lang: share of items with captions}}


def build_examples(corpus: LanguageCorpus, items: list[int]) -> Examples:
    """Every (language, item, variant) of the given (training) items the language covers."""
    lang, item, row = [], [], []
    for li, name in enumerate(corpus.languages):
        for i in items:
            if corpus.text[name][i] is not None:
                for v in range(VARIANTS):
                    lang.append(li)
                    item.append(i)
                    row.append(i * VARIANTS + v)
    flat = {name: [c for caps in corpus.text[name] for c in (caps or [None] * VARIANTS)] for name in corpus.text}
    t = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    return Examples(list(corpus.languages), t(lang), t(item), t(row), flat)


def emoji_language_data(bench, cfg: DataCfg, languages: list[str]) -> LanguageData:
    """The language stream on the emoji benchmark: CLDR captions of the training items in every
    training style; in-domain test = the test items in the training styles, out-of-domain = the
    test items in the held-out styles; evaluation caption = variant 0."""
    corpus = build_corpus(bench.items, languages, cfg.seed)
    split = lambda s: [i for i, it in enumerate(bench.items) if it["split"] == s]  # noqa: E731
    train_items, test_items = split("train"), split("test")
    pos = torch.arange(len(test_items))
    captions = {}
    for lang in languages:
        keep = [k for k, i in enumerate(test_items) if corpus.text[lang][i] is not None]
        captions[lang] = ([corpus.text[lang][test_items[k]][0] for k in keep], torch.tensor(keep, dtype=torch.long))
    sets = {"in_domain": cfg.train_styles, "out_domain": cfg.unseen_styles}
    eval_sets = {name: EvalSet(np.concatenate([bench.images(s)[test_items] for s in styles]),
                               pos.repeat(len(styles)), captions) for name, styles in sets.items() if styles}
    english = [c for caps in corpus.text["en"] for c in caps]
    return LanguageData(languages, build_examples(corpus, train_items), [bench.images(s) for s in cfg.train_styles],
                        english, eval_sets, {"train": coverage(corpus, train_items), "test": coverage(corpus, test_items)})
