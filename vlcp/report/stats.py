"""The report engine's statistics: effects of per-seed values ({seed: value}), their noise, minimum
detectable effects and the seeds that would decide a claim. Pure functions and small values.

What the rules are: "a > b" is confirmed when the 95 % interval of a − b lies above 0, a one-sided
test at 2.5 %. A claim of k comparisons that must all hold confirms when each does (an
intersection-union test: its error stays at most 2.5 % one-sided, with no correction), and so needs
power 0.8^(1/k) in each for 80 % in all (`mde` with k). Equivalence: two one-sided tests at 5 % (the
90 % interval inside ±margin). A noise of sd 0, or estimated on fewer than 2 degrees of freedom,
decides nothing (`Noise.usable`).

A comparison paired by seed reads its own paired t, never a pool of other experiments
(`block_noise`): a pool guarded by the pair's own sd neither keeps the error of a pair noisier
than the rest nor lowers the MDE at 80 % power (tests/test_verdict_rules.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Hashable, Mapping

import numpy as np
from scipy import optimize, stats

LEVEL = 0.95
POWER = 0.8
MAX_SEEDS = 100
Values = Mapping[Hashable, float]


@dataclass(frozen=True)
class Noise:
    """The noise of ONE single-run comparison: the sd of a difference of two single runs, and the
    degrees of freedom it was estimated on (None: known, a fixed floor)."""
    sd: float
    dof: int | None = None
    source: str = ""

    @property
    def usable(self) -> bool:
        """Whether it can decide a row: sd > 0 (finite), on ≥ 2 degrees of freedom or known."""
        return math.isfinite(self.sd) and self.sd > 0 and (self.dof is None or self.dof >= 2)


@dataclass(frozen=True)
class Effect:
    """a − b with its interval: `n` runs per arm, `sd` the noise of one single-run difference on
    `dof`, `se` the standard error of `diff`."""
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


def _mean(values) -> float:
    x = list(values)
    return sum(x) / len(x)


@lru_cache(maxsize=None)
def quantile(level: float, dof: int | None) -> float:
    """The two-sided `level` critical value: Student's t on `dof`, the normal for None."""
    q = 1 - (1 - level) / 2
    return float(stats.norm.ppf(q) if dof is None else stats.t.ppf(q, dof))


def effect(a: Values, b: Values, *, level: float = LEVEL, floor: Noise | None = None) -> Effect:
    """a − b at `level`. At ≥ 2 common seeds: paired by seed, its own t on n − 1 dof. Otherwise a
    single-run design: the means' difference with the noise `floor` (its sd is of one single-run
    difference: se = sd √((1/n_a + 1/n_b) / 2)); without a floor the interval is unbounded."""
    if not a or not b:
        raise ValueError(f"effect: no values in {'a' if not a else 'b'}")
    d = paired(a, b)
    if len(d) >= 2:
        n, diff, sd = len(d), _mean(d.values()), seed_sd(d.values())
        se, half = sd / math.sqrt(n), quantile(level, n - 1) * sd / math.sqrt(n)
        return Effect(diff, diff - half, diff + half, n, sd, n - 1, se, f"paired by seed, n={n}")
    na, nb = len(a), len(b)
    diff = _mean(a.values()) - _mean(b.values())
    runs = "one run each" if na == nb == 1 else f"{na} against {nb} runs, unpaired"
    if floor is None:
        return Effect(diff, -math.inf, math.inf, min(na, nb), None, None, None, f"{runs}, no noise floor")
    se = floor.sd * math.sqrt((1 / na + 1 / nb) / 2)
    half = quantile(level, floor.dof) * se
    return Effect(diff, diff - half, diff + half, min(na, nb), floor.sd, floor.dof, se,
                  f"{runs}, floor sd {floor.sd:.2f}" + (f" ({floor.source})" if floor.source else ""))


@lru_cache(maxsize=None)
def unit_mde(dof: int | None, k: int = 1, level: float = LEVEL, power: float = POWER) -> float:
    """The MDE in units of the standard error: the true effect at which the `level` interval's low
    end clears 0 with probability power^(1/k) (noncentral t on `dof`; the normal for None)."""
    if k < 1:
        raise ValueError(f"mde: k must be >= 1, got {k}")
    target, q = power ** (1 / k), quantile(level, dof)
    if dof is None:
        return q + float(stats.norm.ppf(target))
    return float(optimize.brentq(lambda nc: stats.nct.sf(q, dof, nc) - target, 0.0, 50.0 + 10 * q, xtol=1e-10))


def mde(sd: float, n: int, dof: int | None, k: int = 1, level: float = LEVEL, power: float = POWER) -> float:
    """The minimum detectable effect of a comparison of `n` runs per arm whose single-run difference
    has noise `sd` on `dof` (paired: n − 1; a floor's own; None known), one of `k` that must hold."""
    return unit_mde(dof, k, level, power) * sd / math.sqrt(n)


@lru_cache(maxsize=None)
def unit_equivalence_mde(dof: int | None, k: int = 1, power: float = POWER) -> float:
    """The smallest equivalence margin, in standard errors, that the 90 % interval lies inside with
    probability power^(1/k) at a true difference of 0 (the sd's chi-square law averaged for `dof`)."""
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
    """The fewest seeds per arm at which `target` is detectable: `noise_at(n)` is the design's noise
    at n seeds (its dof grows with n: a pair's n − 1); `mde_of` is `mde` or `equivalence_mde`. None
    when the target is not positive or even `max_seeds` do not suffice."""
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
    """H/σ_d, or None when the noise cannot decide anything (`Noise.usable`): never infinite."""
    return headroom / noise.sd if noise is not None and noise.usable else None


def largest_block(values: Mapping[str, Values]) -> tuple[tuple, list[str]] | None:
    """(seeds, experiments) of the largest block {experiment: {seed: value}} holds: one experiment's
    seed set (≥ 2 seeds) and every experiment run at all of them, with the most residual degrees of
    freedom (E − 1)(S − 1) (ties: the first seed set in sorted order); None without one of ≥ 3
    experiments (with two, the block is the pair itself: nothing is pooled)."""
    best = None
    for seeds in sorted({tuple(sorted(v)) for v in values.values() if len(v) >= 2}):
        members = [e for e, v in values.items() if all(s in v for s in seeds)]
        dof = (len(members) - 1) * (len(seeds) - 1)
        if len(members) >= 3 and (best is None or dof > best[0]):
            best = (dof, seeds, members)
    return None if best is None else best[1:]


def pair_noise(d: Values) -> Noise | None:
    """The noise of one comparison from its per-seed differences `d`: their sd on n − 1 dof; None
    below 2 seeds."""
    return Noise(seed_sd(d.values()), len(d) - 1, f"{len(d)} seeds") if len(d) >= 2 else None


def block_noise(values: Mapping[str, Values], where: str = "") -> Noise | None:
    """A study's typical noise of one comparison, with seeds as blocks: {experiment: {seed: value}}
    fitted as experiment + seed + residual over the largest block (one experiment's seeds, ≥ 2, and
    every experiment run at all of them; ≥ 3 experiments); √2 × the residual sd on (E − 1)(S − 1)
    dof. For power tables and planning; `effect` never reads it (see the module's note)."""
    block = largest_block(values)
    if block is None:
        return None
    seeds, members = block
    dof = (len(members) - 1) * (len(seeds) - 1)
    y = np.asarray([[values[e][s] for s in seeds] for e in members], float)
    resid = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    sd = math.sqrt(2 * float((resid ** 2).sum()) / dof)
    return Noise(sd, dof, f"seeds as blocks ({where + ': ' if where else ''}{len(members)} experiments × seeds "
                          f"{', '.join(map(str, seeds))})")
