"""Load the data a run names: the top of the data layer (nothing in `vlcp.data` imports it).

- `load_benchmark`: the benchmark of the group, class and instance streams (the emoji
  benchmark, or a real dataset of `vlcp.data.real`);
- `load_language_data`: the language stream's data (emoji, or CLFM's MSCOCO36 corpus);
- `load_fomo_data`: the concept stream's data (the mini FoMo-in-Flux on the emoji benchmark, or
  FoMo-in-Flux's own datasets).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from vlcp.config import DataCfg, ExperimentCfg
from vlcp.data.benchmark import EmojiBenchmark
from vlcp.data.fomo import FomoData, build_fomo
from vlcp.data.formats import BadImages
from vlcp.data.languages import LanguageData, emoji_language_data, language_order
from vlcp.data.pairs import Benchmark
from vlcp.data.real import LANGUAGE_READERS, fomo_data, load_real_benchmark
from vlcp.errors import ConfigError


def load_benchmark(cfg: DataCfg, bad: BadImages | None = None) -> Benchmark:
    """The benchmark `cfg.benchmark` names, from `cfg.root`; `bad`: where a real dataset's unreadable
    images are counted (default: a tracker of its own)."""
    if cfg.benchmark == "emoji":
        return EmojiBenchmark(cfg.root, cfg)
    return load_real_benchmark(cfg, bad)


def load_language_data(cfg: DataCfg) -> LanguageData:
    """The language stream's data for `cfg.benchmark` (emoji, or CLFM's MSCOCO36 corpus), in the
    order `data.languages` gives (default: English first, then the others seeded, or CLL-CLIP's
    own order on MSCOCO36), cut to `data.num_languages`."""
    if cfg.benchmark == "emoji":
        languages = language_order(cfg.languages, cfg.seed)[: cfg.num_languages or None]
        return emoji_language_data(load_benchmark(cfg), cfg, languages)
    return LANGUAGE_READERS[cfg.benchmark](cfg)


def load_fomo_data(cfg: ExperimentCfg, bad: BadImages | None = None) -> FomoData:
    """The mini FoMo-in-Flux on the emoji benchmark, or FoMo-in-Flux's own datasets
    (`data.benchmark: fomo`, `vlcp.data.real.fomo_data`; `bad` counts their unreadable images)."""
    f = cfg.fomo
    if cfg.data.benchmark != "emoji":
        if f.ordering == "time" and not f.stream_file:
            raise ConfigError("fomo.ordering: 'time' needs release dates the info dicts do not have; give FoMo's "
                              "time_incremental_*.json as fomo.stream_file")
        return fomo_data(cfg, bad)
    return emoji_fomo(FomoKey.of(cfg))


@dataclass(frozen=True)
class FomoKey:
    """What the mini FoMo-in-Flux depends on, compared by value: the data config, the prepared
    benchmark's stamp, the pool's groups, the shapes per class and whether the adaptation groups are
    also scored in the unseen styles (the config rides along)."""
    data: str
    stamp: tuple | None
    pool_groups: tuple
    shapes_per_class: int
    adapt_unseen: bool
    cfg: Any = field(compare=False)

    @classmethod
    def of(cls, cfg: ExperimentCfg) -> "FomoKey":
        meta = Path(cfg.data.root) / "meta.json"
        stamp = (meta.stat().st_mtime_ns, meta.stat().st_size) if meta.is_file() else None
        return cls(json.dumps(asdict(cfg.data), sort_keys=True), stamp, tuple(cfg.fomo.pool_groups),
                   cfg.fomo.shapes_per_class, cfg.fomo.adapt_unseen, cfg)


@lru_cache(maxsize=1)
def emoji_fomo(key: FomoKey) -> FomoData:
    """The mini FoMo-in-Flux, memoised: the runs of a study in one process (`vlcp run --list`)
    build it once (~3 s of loading and rendering each). Read-only: `with_pool` and the concept
    stream make new objects from it."""
    cfg = key.cfg
    try:
        return build_fomo(load_benchmark(cfg.data), cfg.fomo.pool_groups, cfg.data.train_styles,
                          cfg.data.unseen_styles, cfg.fomo.shapes_per_class, cfg.data.seed, cfg.fomo.adapt_unseen)
    except ValueError as e:
        raise ConfigError(str(e)) from None
