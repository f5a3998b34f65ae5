"""A study's seed spread: the noise of single-run comparisons, measured on the subset of its
experiments run at several seeds (pooled seed std, or with seeds as blocks), and how a report
names and shows it."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def runs_where(seeds_of: dict) -> str:
    """"fomo-ft, fomo-ema-merge at seeds 0, 1, 2" from {experiment: its seeds}, grouped by seeds."""
    groups: dict[tuple, list[str]] = {}
    for e, seeds in seeds_of.items():
        groups.setdefault(tuple(sorted(seeds)), []).append(e)
    return "; ".join(f"{', '.join(es)} at seed{'s' if len(ss) > 1 else ''} {', '.join(map(str, ss))}"
                     for ss, es in groups.items())


def seed_spread(values: dict[str, dict[str, list[float]]], where: str) -> dict:
    """{"metrics": {metric: ...}, "source": ...} from {metric: {experiment: [value per seed]}} (`where`
    names the runs): per metric each experiment's seed std (≥ 2 seeds), the pooled std on `dof` =
    Σ (seeds − 1), and `difference_spread` = √2 × pooled, the sd of a difference of two single runs."""
    metrics = {}
    for m, per_exp in values.items():
        per_exp = {e: np.asarray(v, float) for e, v in per_exp.items() if len(v) >= 2}
        if not per_exp:
            continue
        stds = {e: float(v.std(ddof=1)) for e, v in per_exp.items()}
        dof = int(sum(len(v) - 1 for v in per_exp.values()))
        pooled = float(math.sqrt(sum((len(per_exp[e]) - 1) * sd ** 2 for e, sd in stds.items()) / dof))
        metrics[m] = {"std_per_experiment": stds, "pooled_std": pooled, "dof": dof,
                      "difference_spread": math.sqrt(2) * pooled}
    return {"metrics": metrics, "source": f"seed spread of this study's subset ({where}): √2 × pooled seed std"}


def block_spread(values: dict[str, list[float]]) -> dict:
    """The seed noise with seeds as blocks, from {experiment: [value per seed]} at the same ≥ 2 seeds:
    value = experiment + seed + residual; `residual_std` on `dof` = (E − 1)(S − 1), and
    `difference_spread` = √2 σ, the sd of one difference of two experiments at the same seed."""
    lengths = {len(v) for v in values.values()}
    if len(values) < 2 or len(lengths) != 1 or min(lengths) < 2:
        raise ValueError("block_spread: ≥ 2 experiments, each at the same ≥ 2 seeds, expected; got "
                         + ", ".join(f"{e}: {len(v)}" for e, v in values.items()))
    y = np.asarray(list(values.values()), float)
    resid = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    dof = (y.shape[0] - 1) * (y.shape[1] - 1)
    sigma = float(math.sqrt((resid ** 2).sum() / dof))
    return {"residual_std": sigma, "dof": int(dof), "difference_spread": math.sqrt(2) * sigma,
            "experiments": len(y), "seeds": y.shape[1]}


def spread_frame(spread: dict):
    """A `seed_spread` for display: a row per metric; each experiment's seed std, the pooled std, its
    dof and the difference spread."""
    return pd.DataFrame.from_dict({m: {**{f"seed std {e}": v for e, v in d["std_per_experiment"].items()},
                                       "pooled std": d["pooled_std"], "dof": d["dof"],
                                       "difference spread": d["difference_spread"]}
                                   for m, d in spread["metrics"].items()}, orient="index")
