"""The report engine's statistics over per-seed values ({seed: value}): effects, their noise, minimum
detectable effects, the seeds that would decide a claim, and a study's seed spread. "a > b" is
confirmed when the 95 % interval of a − b lies above 0; k comparisons that must all hold need power
0.8^(1/k) each; equivalence is two one-sided tests at 5 %."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import fmean
from typing import Callable, Hashable, Mapping

import numpy as np
import pandas as pd
from scipy import optimize, stats

LEVEL = 0.95
POWER = 0.8
MAX_SEEDS = 100
Values = Mapping[Hashable, float]


@dataclass(frozen=True)
class Noise:
    """The sd of a difference of two single runs, on `dof` degrees of freedom (None: known)."""
    sd: float
    dof: int | None = None
    source: str = ""

    @property
    def usable(self) -> bool:
        """Whether it can decide a row: a finite sd > 0, on ≥ 2 degrees of freedom or known."""
        return math.isfinite(self.sd) and self.sd > 0 and (self.dof is None or self.dof >= 2)


@dataclass(frozen=True)
class Effect:
    """a − b with its interval over `n` runs per arm; `sd`: one single-run difference's noise on `dof`."""
    diff: float
    low: float
    high: float
    n: int
    sd: float | None
    dof: int | None
    se: float | None
    how: str

    @property
    def usable(self) -> bool:
        return self.sd is not None and self.se is not None and Noise(self.sd, self.dof).usable

    def mde(self, k: int = 1, level: float = LEVEL, power: float = POWER) -> float:
        """The MDE of this comparison's design (one of `k` that must all hold); inf if unusable."""
        return unit_mde(self.dof, k, level, power) * self.se if self.usable else math.inf


def paired(a: Values, b: Values) -> dict:
    """The per-seed differences a − b at the seeds both have, in seed order."""
    return {s: float(a[s]) - float(b[s]) for s in sorted(set(a) & set(b))}


def seed_sd(values) -> float:
    """The sample sd (ddof 1) of ≥ 2 values, exactly 0 when they differ only by rounding."""
    x = [float(v) for v in values]
    m = sum(x) / len(x)
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1))
    return 0.0 if sd <= 1e-9 * max(abs(v) for v in x) else sd


@lru_cache(maxsize=None)
def quantile(level: float, dof: int | None) -> float:
    """The two-sided `level` critical value: Student's t on `dof`, the normal for None."""
    q = 1 - (1 - level) / 2
    return float(stats.norm.ppf(q) if dof is None else stats.t.ppf(q, dof))


def effect(a: Values, b: Values, *, level: float = LEVEL, floor: Noise | None = None) -> Effect:
    """a − b at `level`: paired by seed on n − 1 dof at ≥ 2 common seeds; otherwise the means'
    difference with the noise `floor` (se = sd √((1/n_a + 1/n_b) / 2)), unbounded without one."""
    if not a or not b:
        raise ValueError(f"effect: no values in {'a' if not a else 'b'}")
    d = paired(a, b)
    if len(d) >= 2:
        n, diff, sd = len(d), fmean(d.values()), seed_sd(d.values())
        se, half = sd / math.sqrt(n), quantile(level, n - 1) * sd / math.sqrt(n)
        return Effect(diff, diff - half, diff + half, n, sd, n - 1, se, f"paired by seed, n={n}")
    na, nb = len(a), len(b)
    diff = fmean(a.values()) - fmean(b.values())
    runs = "one run each" if na == nb == 1 else f"{na} against {nb} runs, unpaired"
    if floor is None:
        return Effect(diff, -math.inf, math.inf, min(na, nb), None, None, None, f"{runs}, no noise floor")
    se = floor.sd * math.sqrt((1 / na + 1 / nb) / 2)
    half = quantile(level, floor.dof) * se
    return Effect(diff, diff - half, diff + half, min(na, nb), floor.sd, floor.dof, se,
                  f"{runs}, floor sd {floor.sd:.2f}" + (f" ({floor.source})" if floor.source else ""))


@lru_cache(maxsize=None)
def unit_mde(dof: int | None, k: int = 1, level: float = LEVEL, power: float = POWER) -> float:
    """The MDE in standard errors: the true effect whose `level` interval clears 0 with probability
    power^(1/k) (noncentral t on `dof`; the normal for None)."""
    if k < 1:
        raise ValueError(f"mde: k must be >= 1, got {k}")
    target, q = power ** (1 / k), quantile(level, dof)
    if dof is None:
        return q + float(stats.norm.ppf(target))
    return float(optimize.brentq(lambda nc: stats.nct.sf(q, dof, nc) - target, 0.0, 50.0 + 10 * q, xtol=1e-10))


def mde(sd: float, n: int, dof: int | None, k: int = 1, level: float = LEVEL, power: float = POWER) -> float:
    """The MDE of `n` runs per arm whose single-run difference has noise `sd` on `dof`."""
    return unit_mde(dof, k, level, power) * sd / math.sqrt(n)


@lru_cache(maxsize=None)
def unit_equivalence_mde(dof: int | None, k: int = 1, power: float = POWER) -> float:
    """The smallest margin, in standard errors, that the 90 % interval lies inside with probability
    power^(1/k) at a true 0 (for `dof`, averaged over the sd's chi-square law)."""
    target, q = power ** (1 / k), quantile(0.90, dof)
    if dof is None:
        return q + float(stats.norm.ppf((1 + target) / 2))
    root = np.sqrt(stats.chi2.ppf((np.arange(2000) + 0.5) / 2000, dof) / dof)   # s/σ at equal-mass points

    def shown(m: float) -> float:
        return float(np.mean(np.clip(2 * stats.norm.cdf(m - q * root) - 1, 0.0, None)))

    return float(optimize.brentq(lambda m: shown(m) - target, 0.0, 100.0 + 20 * q, xtol=1e-10))


def equivalence_mde(sd: float, n: int, dof: int | None, k: int = 1, power: float = POWER) -> float:
    """The smallest margin two one-sided tests show with 80 % power in each of `k` equivalences."""
    return unit_equivalence_mde(dof, k, power) * sd / math.sqrt(n)


def seeds_to_decide(target: float | None, noise_at: Callable[[int], Noise | None], k: int = 1, *,
                    mde_of: Callable = mde, max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds per arm at which `target` is detectable, `noise_at(n)` the design's noise at n
    seeds, `mde_of` `mde` or `equivalence_mde`; None for a target ≤ 0 or past `max_seeds`."""
    def enough(n: int) -> bool:
        nz = noise_at(n)
        return nz is not None and nz.usable and mde_of(nz.sd, n, nz.dof, k) <= target

    if target is None or not target > 0 or not enough(max_seeds):
        return None
    lo, hi = 0, max_seeds          # not enough at lo, enough at hi: the MDE shrinks as n grows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def bonferroni_level(k: int, level: float = LEVEL) -> float:
    """The per-comparison interval level that keeps a family of `k` at `level`."""
    return 1 - (1 - level) / k


def ratio(headroom: float, noise: Noise | None) -> float | None:
    """H/σ_d, or None when the noise cannot decide anything: never infinite."""
    return headroom / noise.sd if noise is not None and noise.usable else None


def pair_noise(d: Values) -> Noise | None:
    """The noise of one comparison from its per-seed differences: their sd on n − 1 dof; None below 2."""
    return Noise(seed_sd(d.values()), len(d) - 1, f"{len(d)} seeds") if len(d) >= 2 else None


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
