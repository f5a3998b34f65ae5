"""The older claims ledger's verdict rules (vlcp/report/claims.py as it stood when the report engine,
`vlcp.report.ledger`, replaced it; the rules of 51cbcae and their later patches): test code, kept
only so that tests/test_verdict_rules.py can show each mended defect on them. Nothing in vlcp
imports it.

The original module docstring follows.

The claims ledger: each claim is a check over our runs, with its numbers and spread.

Verdicts (`VERDICTS`):

- "confirmed": the evidence shows it (the interval of the effect clears the claim);
- "refuted": the interval excludes the paper's effect scaled to our headroom: the effect here is
  clearly smaller, or of the other sign (`powered`, `vlcp.report.power`);
- "underpowered": the minimum detectable effect at our seeds is above that scaled effect: this study
  could not have seen it; the row says how many seeds would decide it;
- "inconclusive": otherwise (our runs cannot tell);
- "not confirmed": the older verdict of a claim that carries no paper effect to judge power
  against (it does not hold in our runs, by its point estimate); a ledger moves off it claim by
  claim as its claims get their paper effects;
- "not testable": this study cannot test it, and says why.

Claims that our runs do not confirm are shown as such; hiding them is a defect. Every claim's
verdict comes from the functions here:

- `effect(a, b, ...)`: the difference a − b with its confidence interval, paired by seed (same seed
  = same data order) when both have the same seeds, else Welch; with one run each, from `sd`, the
  standard deviation of one difference measured elsewhere (a seed subset, a test-set noise floor).
  The Effect keeps the sd of one single-run difference it used (`sd`, on `dof` degrees of freedom).
  With `block` (`blocked_noise`: the study's experiments at common seeds, seeds as blocks), a
  comparison paired by seed reads the pooled residual's degrees of freedom instead of its own n − 1,
  unless its own spread is larger than the pool's (`pooled_fits`).
- `powered(text, pairs, scaled, ...)`: "a > b" for one or several (a, b) pairs (all must hold),
  judged against the paper's effect scaled to our headroom: the four verdicts above, with the
  scaled effect, σ_d, the MDE and the seeds that would decide it on the row.
- `greater_verdict` ("a > b"), `equivalent_verdict` (|a − b| < margin, two one-sided tests: the
  90 % interval inside the margin), `ordered` (a chain of "greater"), `not_testable`.
- `greater(a, b, floor)`: the older single-number form, kept for the ledgers not yet moved:
  confirmed when the gap exceeds the spread (at least `floor`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NamedTuple
from pathlib import Path

import numpy as np
from scipy import stats

from vlcp.utils import write_json
# moved to the engine; imported here for the ledgers not yet on it
from vlcp.report.ledger import ledger_style  # noqa: E402,F401
from vlcp.report.stats import block_spread, runs_where, seed_spread, spread_frame  # noqa: F401  (moved; for the ledgers not yet on the engine)
from vlcp.report.study import (EXECUTION_FIELDS, calibration_fingerprint, calibration_mismatch,  # noqa: F401
                               pretraining_runs)

if TYPE_CHECKING:   # annotations only: pandas is imported where a frame is built
    import pandas as pd

    from vlcp.report.power import StudyPower

VERDICTS = ("confirmed", "refuted", "underpowered", "inconclusive", "not confirmed", "not testable")
DECIDED = ("confirmed", "refuted")


@dataclass
class Claim:
    claim: str
    verdict: str
    evidence: str
    source: str = ""
    effect: float | None = None      # the claim's effect (a − b, in the metric's units) ...
    low: float | None = None         # ... and its confidence interval
    high: float | None = None
    seeds: int | None = None         # runs per arm behind it
    paper_effect: str | None = None  # the paper's effect, as the paper gives it (numbers and where)
    scaled_effect: float | None = None   # that effect carried to our headroom (`scaled_effect`)
    sigma_d: float | None = None     # the sd of one single-run difference behind the interval
    mde: float | None = None         # the minimum detectable effect at these seeds (80 % power)
    seeds_to_decide: int | None = None   # seeds per arm at which the scaled effect is detectable
    comparisons: int | None = None   # comparisons that must all hold (an intersection-union claim)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.claim!r}: verdict {self.verdict!r} is not one of {VERDICTS}")


class Scale(NamedTuple):
    """The one rule that carries a paper's effects to our headroom (issue 48): an effect of the
    paper's, as a share of the paper's headroom (`paper_headroom`: its upper bound − lower bound on
    the claim's metric), times ours (`headroom`: the same bounds in our runs, fixed on calibration
    seeds before the ledger's runs; `how` says where it comes from). A headroom of ours that is not
    positive (the upper bound does not bound) carries every effect to 0: no share of it is visible,
    so a claim is confirmed only by an interval above 0, refuted only by one below it."""
    headroom: float
    paper_headroom: float
    how: str = ""
    unresolved: str | None = None   # why a measured headroom was carried to 0 (`measured_scale`): not 0, unknown


    def __call__(self, paper_effect: float) -> float:
        return scaled_effect(paper_effect, self.paper_headroom, max(self.headroom, 0.0))

    def cite(self) -> str:
        return f"× our H {self.headroom:.2f} / the paper's {self.paper_headroom:.2f}" + (f" ({self.how})" if self.how else "")


# A headroom measured on a ledger's own runs scales the paper's effects only where those runs resolve
# it: H > RESOLVED × σ_d on the study's power table (the rule a task that teaches meets: gain > 2 × noise).
RESOLVED = 2.0


def unresolved_headroom(power: "StudyPower | None") -> str | None:
    """Why a headroom measured on a ledger's own runs (a calibration that does not apply:
    `calibration_mismatch`) cannot scale the paper's effects, or None when it can: the study's power
    table (`power.study_power`) must resolve its headroom, H > `RESOLVED` × σ_d. Below that, H is
    within the noise of one comparison and a share of it is noise too (on a stream that teaches
    nothing, SeqF's max-based forgetting is its noise floor, and half of it refutes any method that
    forgets as much). Without a power table (one seed: no σ_d; a bound not run) it cannot be checked."""
    if power is None:
        return "no power table to check it against (σ_d needs ≥ 2 seeds of both bounds)"
    if not power.headroom_over_noise > RESOLVED:
        return (f"these runs do not resolve their headroom (H/σ_d {power.headroom_over_noise:.1f} ≤ {RESOLVED:g}: "
                f"H {power.headroom:.2f}, σ_d {power.sigma_d:.2f})")
    return None


def scales_how(scales: dict) -> str:
    """Where a ledger's scales ({key: `Scale`}) come from, said once: their shared `how`, or each
    distinct one after the keys it holds (a tuple key joined by spaces), e.g. where one metric's own
    pair resolves its headroom and another's does not."""
    groups: dict[str, list[str]] = {}
    for k, sc in scales.items():
        groups.setdefault(sc.how, []).append(" ".join(k) if isinstance(k, tuple) else str(k))
    if len(groups) <= 1:
        return next(iter(groups), "")
    base = min(groups, key=len)   # a scale carried to 0 (`measured_scale`) extends the others' how: said once
    if all(h == base or h.startswith(base + "; ") for h in groups):
        return base + "".join(f"; {', '.join(keys)}: {h[len(base) + 2:]}" for h, keys in groups.items() if h != base)
    return "; ".join(f"{', '.join(keys)}: {how}" for how, keys in groups.items())


def unresolved_pair(headroom: float, noise: "Noise | None", pair: str) -> str | None:
    """Why the scale's own pair (`pair`, e.g. "Joint − ER on the Average") does not resolve the
    headroom it measures, or None when it does: H > `RESOLVED` × its own σ_d (`noise`: the sd of ONE
    single-run comparison of that pair, `pair_noise` or a seed subset's spread). A scale whose pair
    differs from its power table's (IncCLIP's Joint − ER against Joint − naive fine-tuning; FoMo-in-Flux's
    full-FT change against joint − θ0; CLL-CLIP's 12-language cells against its 36-language pair) must
    resolve both: a table that passes says nothing of another pair's noise. `noise` None: no σ_d to
    check it against (< 2 seeds), so it cannot."""
    if noise is None:
        return f"no σ_d of {pair} to check it against (it needs ≥ 2 seeds)"
    if not headroom > RESOLVED * noise.sd:
        ratio = f"{headroom / noise.sd:.1f}" if noise.sd > 0 else "undefined"
        return (f"{pair} does not resolve its headroom (H/σ_d {ratio} ≤ {RESOLVED:g}: H {headroom:.2f}, "
                f"σ_d {noise.sd:.2f}, {noise.source})")
    return None


def pair_noise(upper: dict, lower: dict | None = None) -> "Noise | None":
    """The `Noise` of one single-run comparison of a scale's own pair, from per-seed values ({seed:
    value}): the sd of the per-seed differences upper − lower at their common seeds (paired by seed,
    as `power.study_power` reads its table), or with `lower` None the seed sd of `upper` alone (a
    quantity measured against a fixed reference: full FT's change from its θ0, ER's −BWT). None
    under 2 (common) seeds."""
    seeds = sorted(upper) if lower is None else sorted(set(upper) & set(lower))
    if len(seeds) < 2:
        return None
    d = np.asarray([upper[s] - (0.0 if lower is None else lower[s]) for s in seeds], float)
    how = "seed sd" if lower is None else "sd of the per-seed differences"
    return Noise(float(d.std(ddof=1)), f"{how}, {len(seeds)} seeds", len(seeds) - 1)


def measured_scale(headroom: float, paper_headroom: float, how: str, unresolved: str | None = None) -> Scale:
    """The `Scale` of a headroom measured on the ledger's own runs (`how` says which): as measured,
    or carried to 0 where `unresolved` (`unresolved_headroom` of the power table, else
    `unresolved_pair` of the scale's own pair) says why it cannot scale anything, so a claim then
    reads confirmed or refuted only by the sign of its interval. The scale keeps the reason
    (`Scale.unresolved`): such a headroom is unknown, not 0, so an equivalence margin drawn from it
    is unknown too (`powered_equivalence`'s `unknown_margin`), where a headroom that is not positive
    makes it 0."""
    if unresolved is None:
        return Scale(headroom, paper_headroom, how)
    return Scale(0.0, paper_headroom, f"{how}; it measures {headroom:.2f}, but {unresolved}: carried to 0", unresolved)


class Noise(NamedTuple):
    """The noise of ONE single-run comparison: its sd (of the difference), where it comes from,
    and the degrees of freedom it was estimated on (a seed subset's, `seed_spread`; None: known or
    a fixed floor). `effect` takes them as `sd`, `sd_source`, `sd_dof` (Student's t on `sd_dof`,
    the normal quantile without)."""
    sd: float
    source: str
    dof: int | None = None


@dataclass(frozen=True)
class Effect:
    diff: float
    low: float
    high: float
    n: int            # runs per arm
    how: str          # "paired by seed (n=3, t)", "Welch", "one run each, sd 0.8 (seed subset)"
    sd: float | None = None     # the sd of ONE single-run difference the interval rests on
    dof: float | None = None    # its degrees of freedom (None: known, the normal quantile)
    paired: bool = False

    def mde(self, comparisons: int = 1) -> float:
        """The minimum detectable effect of this comparison's design (its seeds, its sd): inf
        without a measured spread."""
        if self.sd is None or not math.isfinite(self.sd) or not self.sd > 0:
            return math.inf
        return mde(self.sd, self.n, comparisons=comparisons, dof=self.dof, paired=self.paired)

    def __str__(self) -> str:
        return f"{self.diff:+.2f} [{self.low:+.2f}, {self.high:+.2f}] ({self.how})"

    def shifted(self, by: float) -> "Effect":
        """The effect of a − b + `by` (its interval moved with it): "a ≥ b − margin" read as "> 0"."""
        return dataclasses.replace(self, diff=self.diff + by, low=self.low + by, high=self.high + by)


def effect(a, b, *, sd: float | None = None, level: float = 0.95, paired: bool | None = None,
           sd_source: str = "given sd", sd_dof: int | None = None, block: Noise | None = None) -> Effect:
    """a − b with its `level` confidence interval. `a`, `b`: per-seed values (lists; with
    `paired`, index i of both is seed i). Paired t when both have the same n ≥ 2 (default
    `paired=None`: when the lengths match), Welch's t for unequal lists, and with one value each
    an interval of width q·`sd` (`sd`: the standard deviation of one difference, e.g. √2 × a
    seed std measured on a subset, `seed_spread`; without it the interval is unbounded), q the
    normal quantile, or Student's t on `sd_dof` degrees of freedom when the sd was estimated
    from that few (a seed subset's). `block` (`blocked_noise`: the study's seeds as blocks), for
    a comparison paired by seed: the interval reads the larger of the pair's own spread and the
    block's, on the block's degrees of freedom, unless the pair's own spread is larger than the
    block's at the one-sided 5 % F test (its differences vary more than the pool says): then its own
    paired t, as without a block."""
    a, b = np.asarray(a, float).ravel(), np.asarray(b, float).ravel()
    if len(a) == 0 or len(b) == 0:
        raise ValueError("effect: no values")
    diff = float(a.mean() - b.mean())
    alpha = 1 - level
    paired = (len(a) == len(b)) if paired is None else paired
    if paired and len(a) == len(b) and len(a) >= 2:
        d = a - b
        own, n = float(d.std(ddof=1)), len(d)
        if block is not None and pooled_fits(own, n - 1, block):
            s = max(own, block.sd, sd or 0.0)
            t = stats.t.ppf(1 - alpha / 2, block.dof)
            return Effect(diff, float(diff - t * s / math.sqrt(n)), float(diff + t * s / math.sqrt(n)), n,
                          f"paired by seed, n={n}, seeds as blocks: sd {s:.2f} on {block.dof} dof", s, block.dof)
        se = own / math.sqrt(n)
        if sd is not None:   # a measured floor: never claim less spread than it
            se = max(se, sd / math.sqrt(n))
        t = stats.t.ppf(1 - alpha / 2, n - 1)
        how = f"paired by seed, n={n}" + (", its own spread (above the block's, F test)" if block is not None else "")
        return Effect(diff, float(diff - t * se), float(diff + t * se), n, how, float(se * math.sqrt(n)), n - 1, True)
    if len(a) >= 2 and len(b) >= 2:
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        se = math.sqrt(va + vb)
        if sd is not None:
            se = max(se, sd * math.sqrt(1 / len(a) + 1 / len(b)) / math.sqrt(2))
        dof = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0) or 1e-300)
        t = stats.t.ppf(1 - alpha / 2, max(dof, 1))
        # the sd of one single-run difference: se² = sd² (1/n_a + 1/n_b) / 2
        return Effect(diff, float(diff - t * se), float(diff + t * se), min(len(a), len(b)), "Welch",
                      float(se / math.sqrt((1 / len(a) + 1 / len(b)) / 2)), float(max(dof, 1)))
    if sd is None:
        return Effect(diff, -math.inf, math.inf, min(len(a), len(b)), "one run each, no spread measured")
    z = stats.norm.ppf(1 - alpha / 2) if not sd_dof else stats.t.ppf(1 - alpha / 2, sd_dof)
    # `sd` is of a difference of two single runs (√2 σ): a mean of n_a runs minus a mean of n_b has
    # variance σ² (1/n_a + 1/n_b) = sd² (1/n_a + 1/n_b) / 2
    se = sd * math.sqrt((1 / len(a) + 1 / len(b)) / 2)
    runs = "one run each" if len(a) == len(b) == 1 else " against ".join(
        "one run" if n == 1 else f"the mean of {n} runs" for n in (len(a), len(b)))
    return Effect(diff, float(diff - z * se), float(diff + z * se), min(len(a), len(b)),
                  f"{runs}, sd {sd:.2f} ({sd_source})", float(sd), sd_dof or None)


def largest_block(values: dict[str, dict]) -> tuple[tuple, list[str]] | None:
    """(seeds, experiments) of the largest block {experiment: {seed: value}} holds: one experiment's
    seed set (≥ 2 seeds) and every experiment run at all of them, with the most residual degrees of
    freedom (E − 1)(S − 1) (ties: the first seed set in sorted order); None without one of ≥ 3
    experiments."""
    best = None
    for seeds in sorted({tuple(sorted(v)) for v in values.values() if len(v) >= 2}):
        members = [e for e, v in values.items() if all(s in v for s in seeds)]
        dof = (len(members) - 1) * (len(seeds) - 1)
        if len(members) >= 3 and (best is None or dof > best[0]):
            best = (dof, seeds, members)
    return None if best is None else best[1:]


def blocked_noise(values: dict[str, dict], where: str = "") -> Noise | None:
    """The noise of a comparison paired by seed, with the study's seeds as blocks (`block_spread`):
    `values` = {experiment: {seed: value}}. The block is the largest one the values hold: the seed
    set of one experiment (≥ 2 seeds) and every experiment run at all of those seeds, the one with
    the most residual degrees of freedom (E − 1)(S − 1). None when no block has ≥ 3 experiments
    (with two, the block is the pair itself: nothing is pooled). `where` names the runs."""
    block = largest_block(values)
    if block is None:
        return None
    seeds, members = block
    sp = block_spread({e: [values[e][s] for s in seeds] for e in members})
    return Noise(sp["difference_spread"], f"seeds as blocks ({where + ': ' if where else ''}{len(members)} experiments "
                 f"× seeds {', '.join(map(str, seeds))}; √2 × the residual sd of experiment + seed)", sp["dof"])


def pooled_fits(own: float, own_dof: int, block: Noise, level: float = 0.95) -> bool:
    """Whether a pair's own sd of its per-seed differences (`own`, on `own_dof`) is compatible with
    the block's (`block.sd` on `block.dof`): not larger at the one-sided F test of `level`. A pair
    whose differences vary more than the pool says reads its own spread (`effect`)."""
    if not block.sd > 0 or not block.dof:
        return False
    return (own / block.sd) ** 2 <= stats.f.ppf(level, own_dof, block.dof)


def greater_verdict(e: Effect, min_gap: float = 0.0) -> str:
    """"a > b (by more than `min_gap`)": confirmed when the interval's low end clears it, not
    confirmed when the estimate does not, else inconclusive."""
    if e.low > min_gap:
        return "confirmed"
    return "not confirmed" if e.diff <= min_gap else "inconclusive"


def equivalent_verdict(a, b, margin: float, *, sd: float | None = None, sd_source: str = "given sd",
                       sd_dof: int | None = None) -> tuple[str, Effect]:
    """"a ≈ b within ±`margin`" by two one-sided tests at 5 % each: confirmed when the 90 %
    interval of a − b lies inside (−margin, margin); not confirmed when it lies wholly outside;
    else inconclusive (e.g. within the noise but not inside the margin)."""
    if not margin > 0:
        raise ValueError(f"equivalence margin must be > 0, got {margin}")
    e = effect(a, b, sd=sd, level=0.90, sd_source=sd_source, sd_dof=sd_dof)
    if -margin < e.low and e.high < margin:
        return "confirmed", e
    if e.low >= margin or e.high <= -margin:
        return "not confirmed", e
    return "inconclusive", e


def not_testable(claim: str, why: str, source: str = "") -> Claim:
    """A claim this study cannot test, with the reason shown in the ledger."""
    return Claim(claim, "not testable", why, source)


def claim_from(claim: str, verdict: str, e: Effect, evidence: str = "", source: str = "") -> Claim:
    """A Claim carrying its effect and interval (the index page's columns)."""
    return Claim(claim, verdict, (evidence + "; " if evidence else "") + f"effect {e}", source,
                 e.diff, e.low, e.high, e.n)


def powered(claim: str, pairs: list[tuple], scaled: float | list[float], *, paper: str, evidence: str = "",
            source: str = "", sd: float | None = None, sd_source: str = "given sd", sd_dof: int | None = None,
            labels: list[str] | None = None, exploratory: bool | list[bool] = False,
            block: Noise | None = None) -> Claim:
    """"a > b" for every (a, b) of `pairs` (per-seed values, as `effect` takes them), judged against
    `scaled`, the paper's effect carried to our headroom (one number, or one per pair; `paper`: the
    paper's numbers, cited on the row). One pair: its 95 % interval. Several: all must clear 0 (an
    intersection-union test, each at 95 %); a refutation needs one comparison's Bonferroni interval
    below its scaled effect; the MDE asks each comparison for power 0.8^(1/k), and the claim is
    underpowered when one comparison's MDE exceeds its scaled effect. The row carries the weakest
    comparison's effect (the lowest low end), the smallest scaled effect, σ_d, the MDE, and, unless
    decided, the seeds per arm that would decide it. `labels`: a name per pair for the evidence.
    `exploratory`: a row run below the study's depth (e.g. one seed per arm): it can read only
    "underpowered" or "inconclusive"; the decision its interval alone would give is said in the
    evidence. Per pair (a list), as `judge` takes it: a pair at depth can still refute the row.
    `block`: the study's seeds as blocks (`blocked_noise`), for the pairs paired by seed (`effect`)."""
    if not pairs:
        raise ValueError(f"claim {claim!r}: no comparisons")
    k = len(pairs)
    targets = [float(x) for x in scaled] if isinstance(scaled, (list, tuple)) else [float(scaled)] * k
    if len(targets) != k:
        raise ValueError(f"claim {claim!r}: {len(targets)} scaled effects for {k} comparisons")
    kw = dict(sd=sd, sd_source=sd_source, sd_dof=sd_dof, block=block)
    effects = [effect(a, b, **kw) for a, b in pairs]
    adjusted = effects if k == 1 else [effect(a, b, level=bonferroni_level(k), **kw) for a, b in pairs]
    return judge(claim, effects, adjusted, targets, paper=paper, evidence=evidence, source=source, labels=labels,
                 exploratory=exploratory)


def powered_at_depth(claim: str, pairs: list[tuple], paper_effects: list[float], scale: Scale, cite: str, *,
                     labels: list[str] | None = None, evidence: str = "", source: str = "", sd: float | None = None,
                     sd_source: str = "given sd", sd_dof: int | None = None, exploratory: bool | None = None,
                     block: Noise | None = None) -> Claim:
    """`powered` over (a, b) pairs of per-seed values against the paper's effects (`paper_effects`,
    cited by `cite`) carried to our headroom by `scale`. Pairs whose sides all have ≥ 2 seeds
    measure their own spread (no floor); when a side has one run the noise `sd` (on `sd_dof`)
    is used, and those pairs are exploratory (below the study's depth; `judge`: the row is never
    confirmed, but a pair at depth can refute it) unless `exploratory` says otherwise. `labels` name
    the comparisons when there are several; `block`: the study's seeds as blocks, for the pairs
    paired by seed (`effect`)."""
    below = [min(len(a), len(b)) < 2 for a, b in pairs]
    single = any(below)
    return powered(claim, pairs, [scale(p) for p in paper_effects], paper=f"{cite}; scaled {scale.cite()}",
                   evidence=evidence, source=source, sd=sd if single else None, sd_source=sd_source,
                   sd_dof=sd_dof if single else None, labels=labels if len(pairs) > 1 else None,
                   exploratory=below if exploratory is None else exploratory, block=block)


def calibration_source(power_cfg: dict, where: str) -> str:
    """Where a study's fixed headroom comes from: "calibrated <when>" from its `power` block's
    `calibrated` entry, else the params key `where` (e.g. "report.ctp.power")."""
    return f"calibrated {power_cfg['calibrated']}" if power_cfg.get("calibrated") else where


def _below_depth(verdict: str, exploratory: bool) -> tuple[str, str]:
    """An exploratory row (below its study's depth) is never decided: ("what its interval alone would
    read", "inconclusive") for a decided verdict, else ("", the verdict)."""
    if exploratory and verdict in DECIDED:
        return (f"exploratory (below the study's depth): its interval alone would read {verdict}; "
                "deciding it takes the seeds per arm given below"), "inconclusive"
    return "", verdict


def judge(claim: str, effects: list[Effect], adjusted: list[Effect], scaled: list[float], *, paper: str,
          evidence: str = "", source: str = "", labels: list[str] | None = None,
          exploratory: bool | list[bool] = False) -> Claim:
    """`powered`'s verdict from effects already computed, one per comparison: `effects` at 95 %,
    `adjusted` the same comparisons at the Bonferroni level (`power.bonferroni_level(k)`; the 95 %
    ones for k = 1), `scaled` the paper's effect carried to our headroom per comparison. For
    comparisons whose noise is not one shared sd (e.g. a test-set term per cell). `exploratory`:
    the whole row, or per comparison: a row whose comparisons are partly below the study's depth
    cannot be confirmed, but one comparison at depth whose Bonferroni interval lies below its
    scaled effect refutes it (every comparison must hold)."""
    k = len(effects)
    if not (k == len(adjusted) == len(scaled)) or not k:
        raise ValueError(f"claim {claim!r}: {k} effects, {len(adjusted)} adjusted, {len(scaled)} scaled effects")
    below = list(exploratory) if isinstance(exploratory, (list, tuple)) else [bool(exploratory)] * k
    if len(below) != k:
        raise ValueError(f"claim {claim!r}: {k} comparisons, {len(below)} exploratory flags")
    targets = [float(t) for t in scaled]
    mdes = [e.mde(k) for e in effects]
    weakest = min(effects, key=lambda e: e.low)
    # each comparison against its own scaled effect: the verdict of the margins (interval high end − effect,
    # MDE − effect), the closest comparison deciding each (the same rule as one comparison against 0)
    verdict = power_verdict(weakest.low, min(e.high - t for e, t in zip(adjusted, targets)), 0.0,
                               max(m - t for m, t in zip(mdes, targets)))
    sigma = max((e.sd for e in effects if e.sd is not None), default=None)
    target, mde = min(targets), max(mdes)
    at_depth = [i for i in range(k) if not below[i]]
    refuting = [i for i in at_depth if adjusted[i].high < targets[i]]
    if any(below) and at_depth and refuting:
        i = refuting[0]
        verdict, weakest = "refuted", effects[i]
        explored = (f"refuted by {(labels or ['its comparison'] * k)[i]}, at the study's depth (the others are "
                    "exploratory)")
    else:
        explored, verdict = _below_depth(verdict, any(below))
        if verdict == "refuted":   # show the comparison that refuted the row, not the one with the lowest low end
            weakest = effects[min(range(k), key=lambda i: adjusted[i].high - targets[i])]
    decide = None if verdict in DECIDED or sigma is None else seeds_to_decide(target, sigma, comparisons=k)
    parts = ([f"{(labels or [''] * k)[i]}{': ' if labels else ''}{e} (scaled paper effect {t:+.2f})"
              for i, (e, t) in enumerate(zip(effects, targets))] if k > 1 else [])
    what = (f"{k} comparisons, all must hold (each at 95 %; refuted by a Bonferroni interval at "
            f"{100 * bonferroni_level(k):.2f} %)" if k > 1 else "")
    power_note = (f"scaled paper effect {target:+.2f}; MDE {mde:.2f} at {weakest.n} seed{'s' if weakest.n > 1 else ''}"
                  + ("" if decide is None or verdict in DECIDED else f"; {decide} seeds per arm would decide it")
                  + ("" if verdict in DECIDED or decide is not None or sigma is None
                     else f"; more than {MAX_SEEDS} seeds per arm would be needed: a larger headroom decides it"))
    ev = "; ".join(x for x in (explored, evidence, what, "; ".join(parts), power_note, f"weakest effect {weakest}")
                   if x)
    return Claim(claim, verdict, ev, source, weakest.diff, weakest.low, weakest.high, weakest.n, paper,
                 target, sigma, mde, decide, k)


def powered_equivalence(claim: str, a, b, margin: float, *, paper: str, evidence: str = "", source: str = "",
                        sd: float | None = None, sd_source: str = "given sd", sd_dof: int | None = None,
                        exploratory: bool = False, comparisons: int = 1, unknown_margin: str | None = None) -> Claim:
    """"a ≈ b within ±`margin`" (per-seed values, as `effect` takes them; the margin the paper's own,
    carried to our scale, cited by `paper`), judged for power: **confirmed** when the 90 % interval
    lies inside (−margin, margin) (two one-sided tests at 5 %); **refuted** when it lies wholly
    outside (the difference exceeds the margin); **underpowered** when the margin is below the
    smallest one this design shows with 80 % power at a true difference of 0
    (`power.equivalence_mde`; the row then says the seeds that would); else **inconclusive**.
    `exploratory` as in `powered`. `comparisons`: how many equivalences the row's claim holds at
    once (`all_equivalent`): confirming each at 90 % confirms them all (an intersection-union
    test), but one refutes the row only when its Bonferroni interval (level 1 − 0.10/k) lies
    wholly outside the margin. A margin of 0 (a `Scale` whose headroom is not positive carries the
    paper's margin to 0) cannot be confirmed: refuted by an interval that excludes 0, else
    underpowered, which no number of seeds decides. `unknown_margin`: why the margin is unknown (a
    `Scale` carried to 0 because its runs do not resolve their headroom, `Scale.unresolved`): neither
    shown nor refuted, underpowered until a resolved headroom fixes it (a margin of 0 there would
    refute any difference the interval sees, on a headroom that is noise)."""
    if unknown_margin is not None:
        return _unknown_margin(claim, a, b, paper, evidence, source, sd, sd_source, sd_dof, unknown_margin)
    if not margin >= 0 or not math.isfinite(margin):
        raise ValueError(f"claim {claim!r}: equivalence margin must be >= 0, got {margin}")
    if margin == 0:
        return _zero_margin(claim, a, b, paper, evidence, source, sd, sd_source, sd_dof, exploratory, comparisons)
    shown, e = equivalent_verdict(a, b, margin, sd=sd, sd_source=sd_source, sd_dof=sd_dof)
    if shown == "not confirmed" and comparisons > 1:
        wide = effect(a, b, sd=sd, level=1 - 0.10 / comparisons, sd_source=sd_source, sd_dof=sd_dof)
        if not (wide.low >= margin or wide.high <= -margin):
            shown = "inconclusive"
    mde = _equivalence_mde(e)
    verdict = {"confirmed": "confirmed", "not confirmed": "refuted"}.get(
        shown, "underpowered" if mde > margin else "inconclusive")
    explored, verdict = _below_depth(verdict, exploratory)
    decide = (None if verdict in DECIDED or not e.sd or not math.isfinite(e.sd)
              else seeds_to_show_equivalence(margin, e.sd))
    note = (f"equivalence margin ±{margin:.2f} (90 % interval inside it); smallest margin this design shows "
            f"{mde:.2f} at {e.n} seed{'s' if e.n > 1 else ''}"
            + ("" if verdict in DECIDED else (f"; {decide} seeds per arm would decide it" if decide
                                              else f"; more than {MAX_SEEDS} seeds per arm would be needed")))
    ev = "; ".join(x for x in (explored, evidence, note, f"effect {e} (90 %)") if x)
    return Claim(claim, verdict, ev, source, e.diff, e.low, e.high, e.n, paper, margin, e.sd, mde, decide, 1)


def equivalence_level(margin: float, comparisons: int = 1, unknown_margin: str | None = None) -> float:
    """The level of the interval `powered_equivalence` reads each comparison at: 90 % (two one-sided
    tests; an unknown margin's too), but a margin of 0, which only a refutation can decide, at the
    Bonferroni level for its `comparisons`."""
    return 0.90 if margin > 0 or unknown_margin is not None else 1 - 0.10 / comparisons


def _equivalence_mde(e: Effect) -> float:
    """The smallest margin `e`'s design shows (`power.equivalence_mde`); inf without a finite sd."""
    return equivalence_mde(e.sd, e.n, dof=e.dof, paired=e.paired) if e.sd and math.isfinite(e.sd) else math.inf


def _zero_margin(claim, a, b, paper, evidence, source, sd, sd_source, sd_dof, exploratory, comparisons) -> Claim:
    e = effect(a, b, sd=sd, level=equivalence_level(0.0, comparisons), sd_source=sd_source, sd_dof=sd_dof)
    verdict = "refuted" if e.low > 0 or e.high < 0 else "underpowered"
    explored, verdict = _below_depth(verdict, exploratory)
    note = ("equivalence margin 0: our headroom carries the paper's margin to 0, so no equivalence can be shown "
            "and no number of seeds decides it; an interval that excludes 0 refutes it")
    mde = _equivalence_mde(e)
    note += f" (the smallest margin this design shows: {mde:.2f} at {e.n} seed{'s' if e.n > 1 else ''})"
    ev = "; ".join(x for x in (explored, evidence, note, f"effect {e} ({100 * (1 - 0.10 / comparisons):.1f} %)") if x)
    return Claim(claim, verdict, ev, source, e.diff, e.low, e.high, e.n, paper, 0.0, e.sd, mde, None, 1)


def _unknown_margin(claim, a, b, paper, evidence, source, sd, sd_source, sd_dof, why) -> Claim:
    e = effect(a, b, sd=sd, level=equivalence_level(0.0, unknown_margin=why), sd_source=sd_source, sd_dof=sd_dof)
    mde = _equivalence_mde(e)
    note = (f"equivalence margin unknown: {why}, so the paper's margin has no size here; neither shown nor refuted, "
            f"a headroom these runs resolve would decide it (the smallest margin this design shows: {mde:.2f} at "
            f"{e.n} seed{'s' if e.n > 1 else ''})")
    ev = "; ".join(x for x in (evidence, note, f"effect {e} (90 %)") if x)
    return Claim(claim, "underpowered", ev, source, e.diff, e.low, e.high, e.n, paper, None, e.sd, mde, None, 1)


def all_equivalent(claim: str, rows: list[Claim]) -> Claim:
    """Several equivalences that must all hold (each `powered_equivalence` with `comparisons` =
    their number): the one that decides the row (refuted, then underpowered, inconclusive,
    confirmed), its text replaced by `claim`."""
    order = {"refuted": 0, "underpowered": 1, "inconclusive": 2, "confirmed": 3}
    worst = min(rows, key=lambda c: order[c.verdict])
    return dataclasses.replace(worst, claim=claim)


def greater(a, b, floor: float = 0.0) -> str:
    """Verdict for "a > b" from per-seed values of a and b. `floor`: the smallest spread to
    assume (a noise floor; with one seed there is no spread to measure)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    gap = a.mean() - b.mean()
    spread = np.sqrt((a.std(ddof=1) ** 2 if len(a) > 1 else 0) + (b.std(ddof=1) ** 2 if len(b) > 1 else 0))
    spread = max(spread, floor)
    if gap <= 0:
        return "not confirmed"
    return "confirmed" if gap > spread else "inconclusive"


def ordered(values: dict[str, list[float]], order: list[str], floor: float = 0.0) -> Claim:
    """Claim that the seed means follow `order` (first is best)."""
    verdicts = [greater(values[order[i]], values[order[i + 1]], floor) for i in range(len(order) - 1)]
    verdict = ("not confirmed" if "not confirmed" in verdicts
               else "inconclusive" if "inconclusive" in verdicts else "confirmed")
    ev = ", ".join(f"{k} {np.mean(values[k]):.1f}" + (f" ± {np.std(values[k], ddof=1):.1f}" if len(values[k]) > 1 else "")
                   for k in order)
    return Claim(" > ".join(order), verdict, ev)


def target_verdict(median: float, worst: float, goal: float, *, at_least: bool = False) -> str:
    """A target read from paired repeated measurements: a cost ratio ≤ `goal`, or with `at_least` a
    speed ratio ≥ `goal`. Confirmed when every measurement meets it (`worst`: the slowest cost, or
    the lowest speed-up), inconclusive when the median does but not all, else not confirmed."""
    meets = (lambda x: x >= goal) if at_least else (lambda x: x <= goal)  # noqa: E731
    return "confirmed" if meets(worst) else "inconclusive" if meets(median) else "not confirmed"


def combine(verdicts: list[str]) -> str:
    """All confirmed -> confirmed; any not confirmed -> not confirmed; all not testable -> not
    testable; else inconclusive (a part we cannot test leaves the whole unconfirmed)."""
    if verdicts and all(v == "not testable" for v in verdicts):
        return "not testable"
    return ("not confirmed" if "not confirmed" in verdicts
            else "inconclusive" if any(v in ("inconclusive", "not testable") for v in verdicts) else "confirmed")


def write_claims(path: str | Path, report: str, claims: list[Claim], power: "StudyPower | None" = None) -> None:
    """`reports/<report>_claims.json`: every claim, and with `power` the study's power table
    ({"headroom", "sigma_d", "headroom_over_noise", "tasks_teaching", "tasks", "seeds", ...})."""
    write_json(path, {"report": report, "claims": [asdict(c) for c in claims],
                      **({"power": power.to_dict()} if power is not None else {})})


def claims_frame(claims: list[Claim]):
    import pandas as pd

    return pd.DataFrame([asdict(c) for c in claims])


# ---- vlcp/report/power.py's older statistics, as the rules above read them -------------------

LEVEL = 0.95
POWER = 0.8
MAX_SEEDS = 100


def scaled_effect(paper_effect: float, paper_headroom: float, headroom: float) -> float:
    """The paper's effect carried to our scale: its share of the paper's headroom times ours."""
    if not paper_headroom > 0:
        raise ValueError(f"scaled_effect: the paper's headroom must be > 0, got {paper_headroom}")
    return paper_effect / paper_headroom * headroom


def _critical(level: float, dof: float | None) -> float:
    q = 1 - (1 - level) / 2
    return stats.norm.ppf(q) if dof is None else stats.t.ppf(q, dof)


def detection_power(effect: float, sigma_d: float, n: int = 1, *, level: float = LEVEL, dof: float | None = None,
                    paired: bool = True) -> float:
    """P(the `level` interval's low end is above 0) at a true `effect`: paired by seed with n ≥ 2,
    noncentral t on n − 1 dof; otherwise a known σ_d (normal), or Student's t on `dof`."""
    if not sigma_d > 0:
        raise ValueError(f"detection_power: sigma_d must be > 0, got {sigma_d}")
    if paired and n >= 2:
        dof = n - 1
    se = sigma_d / math.sqrt(n)
    crit = _critical(level, dof)
    nc = effect / se
    return float(stats.norm.sf(crit - nc) if dof is None else stats.nct.sf(crit, dof, nc))


def mde(sigma_d: float, n: int = 1, *, level: float = LEVEL, power: float = POWER, comparisons: int = 1,
        dof: float | None = None, paired: bool = True) -> float:
    """The smallest true effect confirmed with probability `power` (power^(1/comparisons) each)."""
    from scipy import optimize

    if comparisons < 1:
        raise ValueError(f"mde: comparisons must be >= 1, got {comparisons}")
    target = power ** (1 / comparisons)
    f = lambda d: detection_power(d, sigma_d, n, level=level, dof=dof, paired=paired) - target  # noqa: E731
    hi = sigma_d
    while f(hi) < 0:
        hi *= 2
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-9 * sigma_d))


def seeds_to_decide(effect: float, sigma_d: float, *, level: float = LEVEL, power: float = POWER,
                    comparisons: int = 1, max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds per arm (paired, ≥ 2) at which `effect` is detectable; None past `max_seeds`."""
    if not effect > 0:
        return None
    for n in range(2, max_seeds + 1):
        if mde(sigma_d, n, level=level, power=power, comparisons=comparisons) <= effect:
            return n
    return None


def equivalence_mde(sigma_d: float, n: int = 1, *, dof: float | None = None, paired: bool = True,
                    power: float = POWER) -> float:
    """The smallest margin two one-sided tests at 5 % show with probability `power` at a true 0
    (an estimated sd: its chi-square law averaged over 400 quantiles)."""
    from scipy import optimize

    if not sigma_d > 0:
        raise ValueError(f"equivalence_mde: sigma_d must be > 0, got {sigma_d}")
    if paired and n >= 2:
        dof = n - 1
    se = sigma_d / math.sqrt(n)
    if dof is None:
        return float((stats.norm.ppf(0.95) + stats.norm.ppf((1 + power) / 2)) * se)
    t = stats.t.ppf(0.95, dof)
    root = np.sqrt(stats.chi2.ppf((np.arange(400) + 0.5) / 400, dof) / dof)

    def shown(m: float) -> float:
        return float(np.mean(np.clip(2 * stats.norm.cdf((m - t * se * root) / se) - 1, 0.0, None)))

    hi = 4 * se * t
    while shown(hi) < power:
        hi *= 2
    return float(optimize.brentq(lambda m: shown(m) - power, 0.0, hi, xtol=1e-9 * se))


def seeds_to_show_equivalence(margin: float, sigma_d: float, *, max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds per arm (paired, ≥ 2) at which `margin` is within `equivalence_mde`."""
    if not margin > 0 or equivalence_mde(sigma_d, max_seeds) > margin:
        return None
    lo, hi = 1, max_seeds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mid >= 2 and equivalence_mde(sigma_d, mid) <= margin else (mid, hi)
    return hi


def bonferroni_level(comparisons: int, level: float = LEVEL) -> float:
    return 1 - (1 - level) / comparisons


def power_verdict(low: float, high: float, scaled: float, mde_: float, *, refute_high: float | None = None) -> str:
    """"effect > 0" against the scaled effect: confirmed, refuted (`refute_high`, default `high`,
    below it), underpowered (the MDE above it) or inconclusive."""
    if low > 0:
        return "confirmed"
    if (high if refute_high is None else refute_high) < scaled:
        return "refuted"
    if mde_ > scaled:
        return "underpowered"
    return "inconclusive"
