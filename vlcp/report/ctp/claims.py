"""CTP's claims ledger: each claim of the paper checked on our runs, with verdicts from vlcp.report.claims."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from vlcp.report import power as pw
from vlcp.report.claims import (Claim, Effect, Noise, Scale, all_equivalent, blocked_noise, calibration_mismatch, calibration_source, measured_scale,
                                claim_from, combine, effect, equivalent_verdict, greater_verdict, judge, not_testable,
                                powered_at_depth, powered_equivalence, target_verdict)
from vlcp.report.ctp.study import (COMPONENTS, PAPER_CTP_HOURS, PAPER_GAP, PAPER_HOURS_RESOLUTION, PAPER_JOINTT,
                                   PAPER_SEQF_HOURS, PAPER_TIME_TARGET, PREFIX, REV_PREFIX, by_seed, component_pairs,
                                   final_row, flop_ratios, mean_std, method_label, paper_headroom, paper_rm,
                                   reversed_rows, seed_values, single_seed_experiments,
                                   table2_rows, table3_rows, time_ratios, train_seconds, values, with_table1_seeds)
from vlcp.report.ctp.tables import paper_table1, ranking
from vlcp.report.paper import paper_data, paper_table


# ----------------------------------------------------------------------------------------------
# noise, ranking

def noise_floor(runs: dict[str, list[dict]], experiments, metric: str = "Rm", setting="auto",
                default: float = 1.0) -> tuple[float, str]:
    """The floor for single-seed verdicts. A number in `setting` is used as is; "auto" measures it:
    √2 × the pooled seed std of `metric` over the `experiments` with >= 2 seeds (the spread of a
    difference of two single-seed values); `default` when no experiment has 2 seeds."""
    if setting not in (None, "auto"):
        return float(setting), "set in params (report.ctp.noise_floor)"
    var = [np.var(values(runs[e], metric), ddof=1) for e in experiments if len(runs.get(e, [])) >= 2]
    if not var:
        return float(default), "default (no experiment with 2 seeds to measure it)"
    return float(math.sqrt(2 * np.mean(var))), f"measured: √2 × pooled seed std of {metric} over {len(var)} Table 1 runs"


def kendall_tau(x, y) -> float:
    """Kendall's τ-b between two score lists over the same items (scipy; NaN if undefined)."""
    from scipy.stats import kendalltau
    if len(x) < 2:
        return float("nan")
    return float(kendalltau(x, y).statistic)


# ----------------------------------------------------------------------------------------------
# claims: each returns a Claim whose verdict comes from vlcp.report.claims (effect + greater_verdict /
# equivalent_verdict / target_verdict / not_testable), or, for the reversed-order ranking, from
# `null_verdict` below (a permutation test: claims.py has no such primitive). Missing runs ->
# "inconclusive" with "missing runs: ..." (unless the runs present already refute the claim).
# Effects pair runs by seed where both sides have >= 2 seeds in common (Table 1: the seed spread
# measures itself); otherwise they use `sd`, the std of ONE difference of single-seed values:
# √2 × the pooled Table 1 seed std of Rm (`noise_floor`, "auto"), named by `sd_source`.

def _ev(label: str, v: list[float]) -> str:
    m, s = mean_std(v)
    return f"{label} {m:.2f}" + (f" ± {s:.2f}" if len(v) > 1 else "")


def _with_missing(verdict: str, evidence: str, missing: list[str]) -> tuple[str, str]:
    """Missing runs leave a claim inconclusive, unless the runs present already decide against it
    (a counterexample: "not confirmed", or one comparison's interval excluding its paper effect:
    "refuted")."""
    if not missing:
        return verdict, evidence
    note = f"missing runs: {', '.join(missing)}"
    return ((verdict if verdict in ("not confirmed", "refuted") else "inconclusive"),
            note + ("; " + evidence if evidence else ""))


def _pair(a: dict, b: dict) -> tuple[list[float], list[float], bool]:
    """Two {seed: value} dicts as `effect` takes them, and whether they are paired: by seed over the
    seeds both have when there are >= 2, else every value of each side (unpaired)."""
    common = [s for s in a if s in b]
    if len(common) >= 2:
        return [a[s] for s in common], [b[s] for s in common], True
    return list(a.values()), list(b.values()), False


def powered_claim(text: str, comparisons: list[tuple[str, dict, dict, float]], scale: Scale, paper: str, *,
                  evidence: str = "", source: str = "", sd: float | None = None, sd_source: str = "",
                  missing=(), exploratory: bool | None = None, block: Noise | None = None) -> Claim:
    """`vlcp.report.claims.powered` over named comparisons (label, {seed: a}, {seed: b}, the paper's
    a − b): each paper effect scaled by `scale`; `sd` (the noise floor) only where a side has one
    run (Table 1's seeds measure their own spread); missing runs as `_with_missing`. `exploratory`
    (None: when a side has one run, below the depth of Table 1's seeds): the row can read only
    underpowered or inconclusive (`powered`). `block`: the runs' seeds as blocks (`blocks`), for the
    pairs paired by seed."""
    c = powered_at_depth(text, [_pair(a, b)[:2] for _, a, b, _ in comparisons], [p for *_, p in comparisons], scale,
                         paper, labels=[lab for lab, *_ in comparisons], evidence=evidence, source=source, sd=sd,
                         sd_source=sd_source, exploratory=exploratory, block=block)
    c.verdict, c.evidence = _with_missing(c.verdict, c.evidence, list(dict.fromkeys(missing)))
    return c


def _claim(text: str, verdict: str, e: Effect | None, evidence: str, source: str, missing=()) -> Claim:
    """A Claim with its effect (when there is one), downgraded to inconclusive by missing runs."""
    verdict, evidence = _with_missing(verdict, evidence, list(dict.fromkeys(missing)))
    return claim_from(text, verdict, e, evidence, source) if e is not None else Claim(text, verdict, evidence, source)


def paired_effect(a: dict, b: dict, sd: float | None = None, sd_source: str = "given sd", level: float = 0.95,
                  block: Noise | None = None) -> Effect:
    """a − b from {seed: value} dicts: paired by seed over the seeds both have when there are >= 2
    (no floor: the seed spread is measured; `block`, the runs' seeds as blocks, pools it, `effect`);
    otherwise every value of each side, with `sd` (the std of one difference) where a side has a
    single value (`effect`'s one-run interval). `level`: the interval's."""
    va, vb, paired = _pair(a, b)
    if paired:
        return effect(va, vb, paired=True, level=level, block=block)
    single = min(len(va), len(vb)) < 2
    return effect(va, vb, sd=sd if single else None, paired=False, sd_source=sd_source, level=level)


def judge_pairs(text: str, pairs: list[tuple[str, dict, dict, float, float]], paper: str, *, evidence: str,
                source: str, sd: float | None = None, sd_source: str = "given sd") -> Claim:
    """`claims.judge` over named {seed: value} pairs (label, a, b, shift, the paper's effect): each
    claim reads a − b + shift > 0 (a shift turns "a ≥ b − margin" into "> 0") against the paper's
    effect on the same footing; exploratory where a side has one run."""
    k = len(pairs)
    effects = [paired_effect(a, b, sd, sd_source).shifted(d) for _, a, b, d, _ in pairs]
    adjusted = effects if k == 1 else [paired_effect(a, b, sd, sd_source, pw.bonferroni_level(k)).shifted(d)
                                       for _, a, b, d, _ in pairs]
    return judge(text, effects, adjusted, [t for *_, t in pairs], paper=paper, evidence=evidence, source=source,
                 labels=[lab for lab, *_ in pairs] if k > 1 else None,
                 exploratory=any(not _pair(a, b)[2] for _, a, b, *_ in pairs))


def weakest(effects: list[Effect]) -> Effect | None:
    """The effect a "beats every one" claim hangs on: the smallest difference."""
    return min(effects, key=lambda e: e.diff) if effects else None


def claim_beats_all(runs, winner: str, others: list[str], metric: str = "Rm", sd: float | None = None,
                    text: str = "", source: str = "", names: dict[str, str] | None = None,
                    sd_source: str = "Table 1 seed spread", paper: dict[str, float] | None = None,
                    scale: Scale | None = None, exploratory: bool | None = None, block: Noise | None = None) -> Claim:
    """`winner` beats every one of `others` on `metric`: each pair's effect (winner − other, paired
    by seed, with `block` the runs' seeds as blocks when given, or one run each with `sd`). With the
    paper's values (`paper`: {experiment: the paper's `metric`}) and `scale`, judged against the
    paper's effects scaled to our headroom (`powered`: confirmed, refuted, underpowered,
    inconclusive); without them by `greater_verdict`, combined. The claim carries the effect over
    the closest one. `names`: display names (default: the paper's method names)."""
    def label(e):
        return (names or {}).get(e) or method_label(e)

    text = text or f"{label(winner)} beats every one of {', '.join(map(label, others))} on {metric}"
    missing = [e for e in [winner, *others] if not runs.get(e)]
    if not runs.get(winner):
        return _claim(text, "inconclusive", None, "", source, missing)
    w = seed_values(runs[winner], metric)
    present = [e for e in others if runs.get(e)]
    if paper is not None and scale is not None and present:
        comps = [(f"{label(winner)} − {label(e)}", w, seed_values(runs[e], metric), paper[winner] - paper[e])
                 for e in present]
        cite = (f"{source} {metric}: {label(winner)} {paper[winner]:.2f} vs "
                + ", ".join(f"{label(e)} {paper[e]:.2f}" for e in present)
                + f" (effects {min(p for *_, p in comps):+.2f} to {max(p for *_, p in comps):+.2f})")
        ev = ", ".join([_ev(label(winner), list(w.values()))] + [_ev(label(e), values(runs[e], metric)) for e in present])
        return powered_claim(text, comps, scale, cite, evidence=ev, source=source, sd=sd, sd_source=sd_source,
                             missing=missing, exploratory=exploratory, block=block)
    effects = [paired_effect(w, seed_values(runs[e], metric), sd, sd_source, block=block) for e in present]
    verdicts = [greater_verdict(e) for e in effects]
    lost = [label(e) for e, v in zip(present, verdicts) if v == "not confirmed"]
    within = [label(e) for e, v in zip(present, verdicts) if v == "inconclusive"]
    ev = ", ".join([_ev(label(winner), list(w.values()))] + [_ev(label(e), values(runs[e], metric)) for e in present])
    ev += (f"; not beaten by: {', '.join(lost)}" if lost else "") + (f"; within the noise: {', '.join(within)}" if within else "")
    if present:
        closest = present[effects.index(weakest(effects))]
        ev += f"; closest: {label(closest)}"
    return _claim(text, combine(verdicts) if verdicts else "inconclusive", weakest(effects), ev, source, missing)


def group_means(runs, experiments: list[str], metric: str = "Rm", seeds=None) -> list[float]:
    """Per seed (present in every experiment, or `seeds`): the mean of `metric` over the experiments."""
    by = [by_seed(runs[e]) for e in experiments]
    if seeds is None:
        seeds = [s for s in by[0] if all(s in b for b in by)] if by else []
    return [float(np.mean([final_row(b[s])[metric] for b in by])) for s in seeds]


def claim_groups(runs, buffer: list[str], free: list[str], metric: str = "Rm", sd: float | None = None,
                 sd_source: str = "Table 1 seed spread", paper: dict[str, float] | None = None,
                 scale: Scale | None = None) -> Claim:
    """Memory-buffer methods beat memory-free ones: per seed (common to every run of both groups)
    the memory-buffer group's mean `metric` minus the memory-free group's, paired by seed
    (`greater_verdict`; one seed: `sd`, conservative for a difference of group means); the evidence
    also counts the pairs of seed means with the memory-buffer method ahead. With `paper` and
    `scale`: judged against the paper's difference of the same group means, scaled (`powered`)."""
    text = f"memory-buffer methods beat memory-free ones on {metric} (group means)"
    src = "Table 1, §5.2"
    missing = [e for e in buffer + free if not runs.get(e)]
    b, f = [e for e in buffer if runs.get(e)], [e for e in free if runs.get(e)]
    if not b or not f:
        return _claim(text, "inconclusive", None, "", src, missing)
    by = [by_seed(runs[e]) for e in b + f]
    seeds = [s for s in by[0] if all(s in x for x in by)]
    if not seeds:
        return _claim(text, "inconclusive", None, "no seed common to every run of both groups", src, missing)
    gb, gf = group_means(runs, b, metric, seeds), group_means(runs, f, metric, seeds)
    e = paired_effect(dict(zip(seeds, gb)), dict(zip(seeds, gf)), sd, sd_source)
    mb = {x: np.mean(values(runs[x], metric)) for x in b}
    mf = {x: np.mean(values(runs[x], metric)) for x in f}
    wins = sum(mb[x] > mf[y] for x in b for y in f)
    ev = (f"{_ev('memory-buffer mean', gb)} ({len(b)} methods) vs {_ev('memory-free mean', gf)} ({len(f)} methods); "
          f"{wins}/{len(b) * len(f)} pairs of seed means have the memory-buffer method ahead")
    if paper is not None and scale is not None:
        pb, pf = np.mean([paper[x] for x in b]), np.mean([paper[x] for x in f])
        return powered_claim(text, [("memory-buffer − memory-free", dict(zip(seeds, gb)), dict(zip(seeds, gf)), pb - pf)],
                             scale, f"Table 1 {metric}: memory-buffer mean {pb:.2f} vs memory-free mean {pf:.2f} over "
                             f"the same methods ({pb - pf:+.2f})", evidence=ev, source=src, sd=sd, sd_source=sd_source,
                             missing=missing)
    return _claim(text, greater_verdict(e), e, ev, src, missing)


def claim_gap(runs, jointt: str, seqf: str, rm_min_frac: float = 0.5, map_max_frac: float = 2.0,
              sd: float | None = None, sd_source: str = "Table 1 seed spread") -> Claim:
    """JointT - SeqF is large on Rm and small on mAP@1, relative to JointT's own score and anchored to
    the paper's gaps (23.22 of 80.08 Rm = 29 %, 1.65 of 63.79 mAP@1 = 2.6 %): large = the Rm gap
    >= rm_min_frac × 29 % of our JointT Rm; small = the mAP@1 gap <= map_max_frac × 2.6 % of our
    JointT mAP@1. Per-seed gaps pair JointT and SeqF runs of the same seed; each side is an effect
    of the gaps against the threshold (`greater_verdict`; one seed: `sd`, Rm's, for both metrics)."""
    rel = {m: PAPER_GAP[m] / PAPER_JOINTT[m] for m in PAPER_GAP}
    text = (f"the JointT–SeqF gap is large on Rm (≥ {rm_min_frac:g} × the paper's {100 * rel['Rm']:.0f} % of JointT) and "
            f"small on mAP@1 (≤ {map_max_frac:g} × the paper's {100 * rel['mAP@1']:.1f} % of JointT)")
    missing = [e for e in (jointt, seqf) if not runs.get(e)]
    if missing:
        return _claim(text, "inconclusive", None, "", "§5.2, Fig. 4", missing)
    a, b = by_seed(runs[jointt]), by_seed(runs[seqf])
    seeds = [s for s in a if s in b]
    if not seeds:
        return _claim(text, "inconclusive", None, "no seed common to JointT and SeqF", "§5.2, Fig. 4")
    gaps = {m: {s: final_row(a[s])[m] - final_row(b[s])[m] for s in seeds} for m in PAPER_GAP}
    top = {m: float(np.mean(values(runs[jointt], m))) for m in PAPER_GAP}
    thr_rm = rm_min_frac * rel["Rm"] * top["Rm"]
    thr_map = map_max_frac * rel["mAP@1"] * top["mAP@1"]
    # each part against the paper's own margin over its threshold, on the same relative footing: the
    # paper's Rm gap (29 % of JointT) exceeds its threshold by (1 − rm_min_frac) × 29 % of JointT, its
    # mAP@1 gap sits (map_max_frac − 1) × 2.6 % of JointT below its threshold
    pairs = [("Rm gap − threshold", gaps["Rm"], {s: thr_rm for s in seeds}, 0.0, (1 - rm_min_frac) * rel["Rm"] * top["Rm"]),
             ("mAP@1 threshold − gap", {s: thr_map for s in seeds}, gaps["mAP@1"], 0.0,
              (map_max_frac - 1) * rel["mAP@1"] * top["mAP@1"])]
    ev = (f"Rm gap {_ev('', list(gaps['Rm'].values())).strip()} (threshold ≥ {thr_rm:.2f}), "
          f"mAP@1 gap {_ev('', list(gaps['mAP@1'].values())).strip()} (threshold ≤ {thr_map:.2f}); "
          f"JointT Rm {top['Rm']:.2f}, mAP@1 {top['mAP@1']:.2f}")
    paper = (f"§5.2, Fig. 4: JointT − SeqF {PAPER_GAP['Rm']:.2f} of {PAPER_JOINTT['Rm']:.2f} Rm, {PAPER_GAP['mAP@1']:.2f} "
             f"of {PAPER_JOINTT['mAP@1']:.2f} mAP@1; carried as shares of our JointT: Rm {pairs[0][4]:+.2f} above "
             f"its threshold, mAP@1 {pairs[1][4]:+.2f} below its own")
    return judge_pairs(text, pairs, paper, evidence=ev, source="§5.2, Fig. 4", sd=sd, sd_source=sd_source)


def claim_component(runs, experiments: list[str], component: str, metric: str = "Rm", sd: float | None = None,
                    sd_source: str = "Table 1 seed spread", paper_rm: dict[str, float] | None = None,
                    scale: Scale | None = None, exploratory: bool | None = None, block: Noise | None = None) -> Claim:
    """Adding `component` improves `metric` in every pair of Table 2 rows that differ only in it:
    each pair's effect (with − without) by `greater_verdict`, combined; the claim carries the
    smallest one. With `paper_rm` ({experiment: the paper's Rm}) and `scale`: every pair against its
    paper effect, scaled (`powered`). `block`: the runs' seeds as blocks, for pairs paired by seed."""
    text = f"adding {component} improves {metric} (every Table 2 row pair differing only in {component})"
    paper = paper_table("ctp_table2")[metric].tolist()
    effects, verdicts, ev, missing, comps = [], [], [], [], []
    for i, j in component_pairs(component):
        a, b = experiments[i], experiments[j]
        miss = [e for e in (a, b) if not runs.get(e)]
        if miss:
            missing += miss
            continue
        e = paired_effect(seed_values(runs[b], metric), seed_values(runs[a], metric), sd, sd_source, block=block)
        effects.append(e)
        verdicts.append(greater_verdict(e))
        p = "" if pd.isna(paper[i]) or pd.isna(paper[j]) else f"; paper {paper[i]:.2f} → {paper[j]:.2f}"
        ev.append((f"{a} {np.mean(values(runs[a], metric)):.2f} → {b} {np.mean(values(runs[b], metric)):.2f}",
                   f" ({verdicts[-1]}{p})"))
        if paper_rm is not None:
            comps.append((f"{a} → {b}", seed_values(runs[b], metric), seed_values(runs[a], metric),
                          paper_rm[b] - paper_rm[a]))
    if comps and scale is not None:
        cite = "Table 2 Rm: " + ", ".join(f"{lab.replace(' → ', ' ')} {p:+.2f}" for lab, *_, p in comps)
        return powered_claim(text, comps, scale, cite + (" (the (L_CMC, L_c) row's 64.38 from §5.3's prose)"
                                                         if any("ctp-abl-cmc-lc" in c[0] for c in comps) else ""),
                             evidence="; ".join(pair for pair, _ in ev), source="Table 2", sd=sd, sd_source=sd_source, missing=missing,
                             exploratory=exploratory, block=block)
    return _claim(text, combine(verdicts) if verdicts else "inconclusive", weakest(effects),
                  "; ".join(pair + verdict for pair, verdict in ev), "Table 2", missing)


# the paper's spread of Rm over the compatible momentum m (supp. Table 2's rows m = 0.7 ... 0.995: 64.74 to
# 65.04), as a fraction of CTP's own Rm there (m = 0.9: 64.87)
_M_RM = paper_table("ctp_supp_table2").dropna(subset=["m"])["Rm"]
PAPER_M_RANGE, PAPER_M_DEFAULT_RM = float(_M_RM.max() - _M_RM.min()), paper_data("ctp")["m_default_rm"]


def momentum_margin(runs, momentum: dict[float, str], setting="auto", metric: str = "Rm",
                    default_m: float = 0.9) -> tuple[float | None, str]:
    """The equivalence margin of "not sensitive to m", in `metric` points, and how it was set. A
    number in `setting` is used as is; "auto": the paper's own spread over m (0.30 Rm of CTP's
    64.87 = 0.46 %) as the same fraction of our CTP's Rm at m = `default_m` (differences between
    m values are read on the scale of the score they change). None when that run is missing."""
    if setting not in (None, "auto"):
        return float(setting), "set in params (report.ctp.momentum_margin)"
    e = momentum.get(default_m)
    if not runs.get(e):
        return None, f"no m = {default_m:g} run to scale the paper's spread to"
    rm = float(np.mean(values(runs[e], metric)))
    frac = PAPER_M_RANGE / PAPER_M_DEFAULT_RM
    return frac * rm, (f"the paper's range over m ({PAPER_M_RANGE:.2f} of CTP's {PAPER_M_DEFAULT_RM:.2f} {metric}, "
                       f"supp. Table 2) = {100 * frac:.2f} % of our m = {default_m:g} {metric} {rm:.2f}")


def claim_momentum_insensitive(runs, momentum: dict[float, str], metric: str = "Rm", margin: float | None = None,
                               margin_how: str = "given", sd: float | None = None,
                               sd_source: str = "Table 1 seed spread", default_m: float = 0.9,
                               scale: Scale | None = None) -> Claim:
    """Not sensitive to m: every m's `metric` is equivalent to the default m's within ±`margin`
    (two one-sided tests on a 90 % interval; one run each: `sd`). "Within the noise" alone is
    inconclusive; confirmation needs the interval inside the margin. With `scale` (and no margin
    set in params, `margin_how` "auto"): the margin is the paper's range over m (0.30 Rm) carried to
    our headroom, every m at once by `claims.powered_equivalence` (`all_equivalent`: confirmed,
    refuted, underpowered, inconclusive; exploratory at one run each). Else `equivalent_verdict`
    each, combined."""
    text = (f"CTP is not sensitive to the compatible momentum m (every m's {metric} within ± a stated margin of "
            f"m = {default_m:g}'s)")
    src = "supp. Table 2, supp. §E.1"
    missing = [e for e in momentum.values() if not runs.get(e)]
    ref = momentum.get(default_m)
    if ref is None:
        return not_testable(text, f"no m = {default_m:g} (CTP's default) in report.ctp.momentum", src)
    if not runs.get(ref) or margin is None:
        return _claim(text, "inconclusive", None, "" if margin is not None else f"no margin: {margin_how}", src, missing)
    r = seed_values(runs[ref], metric)
    if scale is not None:
        return _powered_momentum(text, src, runs, momentum, metric, r, scale, sd, sd_source, default_m, missing)
    verdicts, effects, ev = [], [], []
    for m, e in sorted(momentum.items()):
        if m == default_m or not runs.get(e):
            continue
        xa, xb, _ = _pair(seed_values(runs[e], metric), r)
        single = min(len(xa), len(xb)) < 2
        v, eff = equivalent_verdict(xa, xb, margin, sd=sd if single else None, sd_source=sd_source)
        verdicts.append(v)
        effects.append(eff)
        ev.append(f"m={m:g}: {np.mean(xa):.2f} ({v}, {eff.diff:+.2f} [{eff.low:+.2f}, {eff.high:+.2f}])")
    if not verdicts:
        return _claim(text, "inconclusive", None, "no other m than the default", src, missing)
    widest = max(effects, key=lambda x: max(abs(x.low), abs(x.high)))
    note = ""
    if sd is not None and margin <= stats.norm.ppf(0.95) * sd:
        note = f"; the margin is within 1.645 × sd ({stats.norm.ppf(0.95) * sd:.2f}): one seed cannot confirm it"
    ev_text = (f"m={default_m:g}: {np.mean(list(r.values())):.2f}; " + "; ".join(ev) +
               f"; margin ±{margin:.2f} ({margin_how}); 90 % intervals (TOST){note}; paper: range 0.30 over m, "
               "vs 1.30 / 2.55 for the single-way updates; the effect shown: the widest interval")
    return _claim(text, combine(verdicts), widest, ev_text, src, missing)


def _powered_momentum(text, src, runs, momentum, metric, r, scale, sd, sd_source, default_m, missing) -> Claim:
    margin = scale(PAPER_M_RANGE)
    others = [(m, e) for m, e in sorted(momentum.items()) if m != default_m and runs.get(e)]
    if not others:
        return _claim(text, "inconclusive", None, "no other m than the default", src, missing)
    rows, parts = [], []
    for m, e in others:
        xa, xb, paired = _pair(seed_values(runs[e], metric), r)
        kw = {} if paired else dict(sd=sd, sd_source=sd_source)
        c = powered_equivalence(text, xa, xb, margin, evidence=f"m={m:g} − m={default_m:g}", source=src,
                                paper=f"{src}: Rm {PAPER_M_RANGE:.2f} apart over m = 0.7 ... 0.995 (vs 1.30 / 2.55 for the "
                                      f"single-way updates); the margin ±{PAPER_M_RANGE:.2f} scaled {scale.cite()}",
                                exploratory=not paired, comparisons=len(others), **kw)
        rows.append(c)
        parts.append(f"m={m:g}: {np.mean(xa):.2f} ({c.effect:+.2f} [{c.low:+.2f}, {c.high:+.2f}] at 90 %)")
    row = all_equivalent(text, rows)
    evidence = (f"m={default_m:g}: {np.mean(list(r.values())):.2f}; " + "; ".join(parts)
                + f"; {len(rows)} equivalences, all must hold; the deciding one: {row.evidence}")
    row.verdict, row.evidence = _with_missing(row.verdict, evidence, list(dict.fromkeys(missing)))
    return row


def overhead(runs, ctp: str, reference: str, tolerance: float = 1.1, target: float = PAPER_TIME_TARGET) -> dict:
    """CTP's training-time ratio to SeqF (per seed), its FLOP ratio, and the two targets."""
    if not runs.get(ctp) or not runs.get(reference):
        return {}
    ratios = time_ratios(runs[ctp], runs[reference])
    flops = flop_ratios(runs[ctp], runs[reference])
    m, s = mean_std(ratios)
    f = float(np.mean(flops)) if flops else float("nan")
    return {"time ratios": ratios, "time ratio": m, "time ratio std": s, "FLOP ratio": f,
            "FLOP target": f * tolerance, "tolerance": tolerance, "paper target": target,
            "paper ratio": PAPER_CTP_HOURS / PAPER_SEQF_HOURS}


def paired_cost(bench: dict | None, ctp: str, tolerance: float = 1.1) -> dict:
    """CTP's paired step-time ratio to SeqF from `benchmarks/results/ctp_cost.json` (interleaved
    repeats at 3 × the study's steps): median, range, FLOP ratio and its × `tolerance` target;
    {} when the file or the experiment is absent."""
    if not bench or ctp not in bench.get("paired_ratios", {}):
        return {}
    ratios = bench["paired_ratios"][ctp]
    return {"median": bench["ratio_to_reference"][ctp], "slowest": max(ratios), "fastest": min(ratios),
            "repeats": len(ratios), "FLOP ratio": bench["flop_ratio"][ctp],
            "FLOP target": bench["flop_ratio"][ctp] * tolerance, "steps": bench.get("overrides", []),
            "commit": bench.get("commit", "?"), "date": bench.get("date", "?")}


def time_ratio_by_seed(rs: list[dict], ref: list[dict]) -> dict:
    """{seed: total training seconds / the reference's of the same seed} (seeds in both)."""
    a, b = by_seed(rs), by_seed(ref)
    return {s: train_seconds(a[s]) / train_seconds(b[s]) for s in a if s in b and train_seconds(b[s]) > 0}


def claim_time_overhead(runs, ctp: str, reference: str, baselines: list[str],
                        margin: float = PAPER_HOURS_RESOLUTION) -> Claim:
    """The paper's cost claim (§5.2, Table 1 hours: CTP 4.0 = LwF 4.0 < MAS 4.1 < EWC 4.6 < SI 4.9 <
    RWalk 6.2 < AFEC 8.7): CTP's training time is no more than every regularisation baseline's.
    From the study's time column: per seed, each method's time / SeqF's of the same seed; per
    baseline the effect baseline − CTP (paired by seed) must clear −`margin` (`greater_verdict`
    with min_gap −margin: "CTP ≤ baseline" up to the resolution of the paper's hours, as CTP and
    LwF tie there). One seed: no spread, so the interval is unbounded (inconclusive)."""
    text = f"CTP's training time is no more than every regularisation baseline's (time × SeqF, within {margin:g})"
    src = "Table 1 hours, §5.2"
    missing = [e for e in (ctp, reference, *baselines) if not runs.get(e)]
    if not runs.get(ctp) or not runs.get(reference):
        return _claim(text, "inconclusive", None, "", src, missing)
    c = time_ratio_by_seed(runs[ctp], runs[reference])
    hours = paper_table1()["hours"].droplevel(0)
    present = [e for e in baselines if runs.get(e)]
    if not present:
        return _claim(text, "inconclusive", None, "no baseline run", src, missing)
    # each baseline − CTP (time × SeqF) + the margin against the paper's own difference + the margin: a
    # time ratio needs no headroom to carry it (the paper's hours / its SeqF's are the same unit)
    paper_gap = {e: (hours.get(method_label(e), float("nan")) - PAPER_CTP_HOURS) / PAPER_SEQF_HOURS for e in present}
    pairs = [(f"{method_label(e)} − CTP", time_ratio_by_seed(runs[e], runs[reference]), c, margin, paper_gap[e] + margin)
             for e in present if np.isfinite(paper_gap[e])]
    ev = ", ".join([_ev("CTP", list(c.values()))] +
                   [_ev(method_label(e), list(time_ratio_by_seed(runs[e], runs[reference]).values())) for e in present])
    ev += (f"; margin {margin:g} = 0.1 h (the paper's resolution) / SeqF's 3.4 h; CTP's extra forwards (momentum and "
           "previous-task models) cost more of its step on this model than on the paper's ViT-B/16 + BERT-base "
           "(see the time-target row)")
    paper = ("Table 1 hours / SeqF's 3.4 h: " + ", ".join(f"{method_label(e)} {hours.get(method_label(e), float('nan')):.1f}"
                                                         for e in [ctp, *baselines]))
    row = judge_pairs(text, pairs, paper, evidence=ev, source=src)
    row.verdict, row.evidence = _with_missing(row.verdict, row.evidence, list(dict.fromkeys(missing)))
    return row


def claim_time_target(runs, ctp: str, reference: str, target: float = PAPER_TIME_TARGET,
                      bench: dict | None = None) -> Claim:
    """The paper's figure, CTP's time ≤ `target` × SeqF's (4.0 h / 3.4 h = 1.18). "Not testable" when
    CTP's FLOP ratio alone exceeds `target` (its extra forwards already cost more arithmetic than
    the paper's whole overhead: the paper's ViT-B/16 + BERT-base balance of costs is not ours).
    Otherwise judged on the paired benchmark's repeats (`target_verdict`) when there is one, else
    on the study's per-seed ratios (effect target − ratio, `greater_verdict`)."""
    text = f"CTP's training time over SeqF is ≤ {target:.2f}× (the paper's 4.0 h / 3.4 h)"
    src = "Table 1 hours, §5.2"
    missing = [e for e in (ctp, reference) if not runs.get(e)]
    if missing:
        return _claim(text, "inconclusive", None, "", src, missing)
    o, p = overhead(runs, ctp, reference, target=target), paired_cost(bench, ctp)
    flop_ratio = p["FLOP ratio"] if p else o["FLOP ratio"]
    if flop_ratio > target:
        return not_testable(text, f"CTP's FLOP ratio alone is {flop_ratio:.2f} > {target:.2f} on this model (its "
                                  "extra forwards of the momentum and previous-task models): the paper's figure, for "
                                  "ViT-B/16 + BERT-base, cannot be met by any implementation here", src)
    r = time_ratio_by_seed(runs[ctp], runs[reference])
    study_ev = f"study: time ratio {_ev('', list(r.values())).strip()} over {len(r)} seed(s)" if r else "study: no common seed"
    if p:
        v = target_verdict(p["median"], p["slowest"], target)
        ev = (f"paired benchmark ({p['repeats']} repeats): median {p['median']:.3f} ({p['fastest']:.3f}–"
              f"{p['slowest']:.3f}); {study_ev}; FLOP ratio {flop_ratio:.3f}")
        return _claim(text, v, None, ev, src)
    if not r:
        return _claim(text, "inconclusive", None, study_ev, src)
    e = paired_effect({s: target for s in r}, r)
    return _claim(text, greater_verdict(e), e, f"{study_ev}; FLOP ratio {flop_ratio:.3f}; the effect shown: "
                  f"{target:.2f} − the time ratio", src)


def claim_time_flops(runs, ctp: str, reference: str, tolerance: float = 1.1, bench: dict | None = None) -> Claim:
    """This study's cost check (not a sentence of the paper): CTP's extra time is its extra
    arithmetic, time ratio ≤ FLOP ratio × `tolerance`; on the paired benchmark's repeats
    (`target_verdict`) when there is one, else on the study's per-seed ratios (`greater_verdict`)."""
    text = f"CTP's extra training time over SeqF is its extra arithmetic (time ratio ≤ FLOP ratio × {tolerance:g})"
    src = "Table 1 hours, §5.2 (this study's cost check)"
    missing = [e for e in (ctp, reference) if not runs.get(e)]
    if missing:
        return _claim(text, "inconclusive", None, "", src, missing)
    o, p = overhead(runs, ctp, reference, tolerance), paired_cost(bench, ctp, tolerance)
    r = time_ratio_by_seed(runs[ctp], runs[reference])
    study_ev = f"study: time ratio {_ev('', list(r.values())).strip()} over {len(r)} seed(s)" if r else "study: no common seed"
    if p:
        ev = (f"paired benchmark ({p['repeats']} repeats): median {p['median']:.3f} ({p['fastest']:.3f}–"
              f"{p['slowest']:.3f}); FLOP ratio {p['FLOP ratio']:.3f} × {tolerance:g} = {p['FLOP target']:.3f}; {study_ev}")
        return _claim(text, target_verdict(p["median"], p["slowest"], p["FLOP target"]), None, ev, src)
    if np.isnan(o["FLOP target"]):
        return not_testable(text, "no FLOP count common to CTP's and SeqF's runs", src)
    if not r:
        return _claim(text, "inconclusive", None, study_ev, src)
    e = paired_effect({s: o["FLOP target"] for s in r}, r)
    ev = (f"{study_ev}; FLOP ratio {o['FLOP ratio']:.3f} × {tolerance:g} = {o['FLOP target']:.3f}; "
          "the effect shown: that target − the time ratio")
    return _claim(text, greater_verdict(e), e, ev, src)


def tau_null(default, reversed_, groups, max_perms: int = 20000, seed: int = 0) -> np.ndarray:
    """Kendall τ-b between `default` and `reversed_` with the reversed values shuffled within each
    group (`groups`: one label per item): every such permutation when there are at most `max_perms`,
    else `max_perms` random ones (generator `seed`). The null of "the reversed order keeps the
    default ranking only as far as the groups do" (memory-buffer methods above memory-free ones)."""
    import itertools

    default, reversed_, groups = np.asarray(default, float), np.asarray(reversed_, float), np.asarray(groups)
    idx = [np.flatnonzero(groups == g) for g in dict.fromkeys(groups.tolist())]
    n_perms = math.prod(math.factorial(len(i)) for i in idx)
    if n_perms <= max_perms:
        perms = itertools.product(*[itertools.permutations(i) for i in idx])
    else:
        rng = np.random.default_rng(seed)
        perms = ([rng.permutation(i) for i in idx] for _ in range(max_perms))
    out = []
    for perm in perms:
        shuffled = reversed_.copy()
        for i, p in zip(idx, perm):
            shuffled[i] = reversed_[list(p)]
        out.append(kendall_tau(default, shuffled))
    return np.asarray(out)


def null_verdict(observed: float, null: np.ndarray, alpha: float = 0.05) -> tuple[str, float]:
    """(verdict, p) of a one-sided permutation test of "observed is larger than chance": confirmed
    when p = P(null ≥ observed) ≤ `alpha` (observed in the null's top `alpha`); not confirmed when
    observed is below the null's median; else inconclusive. (A helper here: vlcp.report.claims has
    no permutation-test verdict.)"""
    if np.isnan(observed) or len(null) == 0:
        return "inconclusive", float("nan")
    p = float(np.mean(null >= observed - 1e-12))
    if p <= alpha:
        return "confirmed", p
    return ("not confirmed" if observed < float(np.median(null)) else "inconclusive"), p


def claim_ranking(runs_default, runs_reversed, study: dict, metric: str = "Rm", alpha: float = 0.05) -> Claim:
    """The ranking survives the reversed order: Kendall τ-b between the default-order (seed means)
    and the reversed-order rankings of the methods run in both, against τ under random orders
    within the memory-free and memory-buffer groups (`tau_null`, `null_verdict`): a τ that only
    reflects "memory-buffer methods beat memory-free ones" is not enough."""
    text = f"the ranking survives the reversed task order (Kendall τ on {metric} beyond random orders within each group)"
    src = "supp. Table 3, supp. §E.2"
    rows = reversed_rows(study)
    missing = [e for e in rows.values() if not runs_reversed.get(e)]
    missing += [PREFIX + e[len(REV_PREFIX):] for e in rows.values() if not runs_default.get(PREFIX + e[len(REV_PREFIX):])]
    df = ranking(runs_default, runs_reversed, study, metric)
    if len(df) < 3:
        return _claim(text, "inconclusive", None, f"only {len(df)} method(s) run in both orders (τ needs 3)", src, missing)
    tau = kendall_tau(df["default (ours)"], df["reversed (ours)"])
    null = tau_null(df["default (ours)"], df["reversed (ours)"], df["group"])
    verdict, p = null_verdict(tau, null, alpha)
    ev = (f"τ = {tau:.2f} over {len(df)} methods; null (random orders within groups, {len(null)} permutations): "
          f"median {np.median(null):.2f}, 95th percentile {np.quantile(null, 0.95):.2f}, P(τ_null ≥ τ) = {p:.3f} "
          f"(confirmed when ≤ {alpha:g}, not confirmed below the median)")
    paper = df.dropna(subset=["default (paper)", "reversed (paper)"])
    if len(paper) >= 3:
        ptau = kendall_tau(paper["default (paper)"], paper["reversed (paper)"])
        pv, pp = null_verdict(ptau, tau_null(paper["default (paper)"], paper["reversed (paper)"], paper["group"]), alpha)
        ev += f"; paper, same methods: τ = {ptau:.2f}, P = {pp:.3f} ({pv})"
    ev += f"; reversed order: {' > '.join(df.sort_values('reversed (ours)', ascending=False).index)}"
    return _claim(text, verdict, None, ev, src, missing)


def claim_first_in_groups(runs_reversed, study: dict, metric: str = "Rm", sd: float | None = None,
                          sd_source: str = "Table 1 seed spread", paper: dict[str, float] | None = None,
                          scale: Scale | None = None, exploratory: bool | None = None, block: Noise | None = None) -> Claim:
    """CTP / CTP+ER stay first among the memory-free / memory-buffer methods of the reversed runs:
    each pair's effect (`greater_verdict`; one run each: `sd`), combined. With `paper` (supp. Table
    3's Rm per `ctp-rev-` experiment) and `scale`: every pair against its paper effect, scaled
    (`powered`, all pairs of both groups as one claim). `block`: as in `claim_component`."""
    text = "CTP and CTP+ER stay first in their groups (memory-free, memory-buffer) in the reversed task order"
    src = "supp. Table 3, supp. §E.2"
    rows = reversed_rows(study)
    verdicts, effects, ev, missing, comps = [], [], [], [], []
    for winner, g in ((study["ctp"], "memory-free"), (study["ctp_er"], "memory-buffer")):
        w = REV_PREFIX + winner[len(PREFIX):]
        others = [e for (gg, _), e in rows.items() if gg == g and e != w]
        missing += [e for e in [w, *others] if not runs_reversed.get(e)]
        others = [e for e in others if runs_reversed.get(e)]
        if not runs_reversed.get(w) or not others:
            verdicts.append("inconclusive")
            continue
        wv = seed_values(runs_reversed[w], metric)
        if paper is not None:
            comps += [(f"{method_label(w)} − {method_label(e)}", wv, seed_values(runs_reversed[e], metric),
                       paper[w] - paper[e]) for e in others]
        es = [paired_effect(wv, seed_values(runs_reversed[e], metric), sd, sd_source, block=block) for e in others]
        verdicts.append(combine([greater_verdict(e) for e in es]))
        effects += es
        ev.append(f"{method_label(winner)} first among the reversed {g} runs (vs {len(others)} other(s), closest "
                  f"{method_label(others[es.index(weakest(es))])}): {verdicts[-1]}")
    if comps and scale is not None:
        cite = f"{src} {metric}: " + ", ".join(f"{lab} {p:+.2f}" for lab, *_, p in comps)
        return powered_claim(text, comps, scale, cite, source=src, sd=sd, sd_source=sd_source, missing=missing,
                             exploratory=exploratory, block=block)
    return _claim(text, combine(verdicts), weakest(effects), "; ".join(ev), src, missing)


def sd_source_of(floor_how: str) -> str:
    """The `sd_source` of the single-seed verdicts, from `noise_floor`'s description."""
    return "Table 1 seed spread" if floor_how.startswith("measured") else floor_how


def study_scale(study: dict, runs1: dict, table: str = "ctp_table1", unresolved: str | None = None) -> Scale | None:
    """The ledger's `Scale` for the paper's `table` (Table 1, or supp. Table 3 for the reversed
    order): our headroom from `report.ctp.power.headroom`, fixed from calibration seeds before the
    ledger's runs; without it, or when its `calibrated_on` does not match these runs
    (`claims.calibration_mismatch`), JointT − SeqF measured on Table 1's own runs (the evidence says so;
    none where `unresolved`, `claims.unresolved_headroom` of the power table, says these runs do not
    resolve it); None when neither is there or the headroom is not positive (the claims keep the older
    verdicts)."""
    cfg = study.get("power") or {}
    h, how = cfg.get("headroom"), calibration_source(cfg, "report.ctp.power")
    stale = calibration_mismatch(cfg, runs1, "report.ctp.power")
    if h is None or stale:
        upper, lower = (study["table1"].get("upper bound") or ["ctp-jointt"])[0], study["reference"]
        if not runs1.get(upper) or not runs1.get(lower):
            return None
        scale = measured_scale(float(np.mean(values(runs1[upper], "Rm")) - np.mean(values(runs1[lower], "Rm"))),
                               paper_headroom(table), "measured on this ledger's own Table 1 runs: "
                               f"{stale or 'report.ctp.power sets no calibrated headroom'}", unresolved)
        return scale if scale.headroom > 0 else None
    return Scale(float(h), paper_headroom(table), how) if h > 0 else None


def blocks(runs: dict, metric: str = "Rm", where: str = "") -> Noise | None:
    """The runs' seeds as blocks (`claims.blocked_noise` of `metric` over every experiment of `runs`
    run at common seeds): the noise of Table 1's comparisons paired by seed. None at one seed."""
    return blocked_noise({e: seed_values(rs, metric) for e, rs in runs.items() if rs}, where)


def ledger(study: dict, runs1: dict, runs_abl: dict, floor_single: float, bench: dict | None = None,
           floor_how: str = "measured", unresolved: str | None = None) -> list[Claim]:
    """Every claim of the CTP paper we check, in the paper's order. runs1: Table 1 runs (seeds);
    runs_abl: the single-seed tables' runs (ablation seeds); floor_single: the std of one difference
    of single-seed Rm values (`noise_floor`; `floor_how`: its description), the `sd` of every
    single-seed effect (and of Table 1's pairs with fewer than 2 seeds in common); bench: the paired
    time benchmark (`benchmarks/results/ctp_cost.json`), when there is one. Every comparison of two
    experiments' Rm paired by seed reads its table's runs with seeds as blocks (`blocks`: Table 1's,
    and the single-seed tables' where the long profile runs them at several seeds). `unresolved`: why
    a headroom measured on these runs cannot scale the paper's effects (`study_scale`). The single-seed
    tables read the experiments Table 1 also runs at every seed they have (`with_table1_seeds`), and
    their pairs paired by seed the largest block over every run read here."""
    runs_abl = with_table1_seeds(runs_abl, runs1, single_seed_experiments(study))
    t1 = study["table1"]
    sd, src = floor_single, sd_source_of(floor_how)
    scale, rm = study_scale(study, runs1, unresolved=unresolved), paper_rm(study)
    kw = {"sd": sd, "sd_source": src}
    pk = {**kw, "paper": rm, "scale": scale}
    block1, block_abl = blocks(runs1, "Rm", "Table 1"), blocks(runs1 | runs_abl, "Rm", "Tables 1-3")
    pk1, pk_abl = {**pk, "block": block1}, {**pk, "block": block_abl}
    free = [e for e in t1.get("memory-free", []) if e not in (study["ctp"], study["reference"])]
    buffer = [e for e in t1.get("memory-buffer", []) if e != study["ctp_er"]]
    claims = [
        claim_beats_all(runs1, study["ctp"], free + [study["reference"]], "Rm",
                        text="CTP beats every memory-free baseline on Rm", source="Table 1, §5.2", **pk1),
        claim_beats_all(runs1, study["ctp_er"], buffer, "Rm",
                        text="CTP+ER beats every memory-buffer baseline on Rm", source="Table 1, §5.2", **pk1),
        claim_groups(runs1, [e for e in t1.get("memory-buffer", [])],
                     [e for e in t1.get("memory-free", []) if e != study["reference"]], "Rm", **pk),
        claim_gap(runs1, (t1.get("upper bound") or ["ctp-jointt"])[0], study["reference"],
                  study["gap"]["rm_min_frac"], study["gap"]["map_max_frac"], **kw),
    ]
    claims += [claim_component(runs_abl, study["table2"], c, "Rm", paper_rm=rm, scale=scale, block=block_abl, **kw)
               for c in COMPONENTS]
    t2 = table2_rows(study["table2"])
    names2 = {e: f"{k} ({e})" for k, e in t2.items()}
    lc_alone, cmc_alone = study["table2"][2], study["table2"][1]
    claims.append(claim_beats_all(runs_abl, lc_alone, [cmc_alone], "Rm",
                                  text="cross-modal topology preservation L_c alone does more than compatible momentum "
                                       "contrast L_CMC alone (Rm)", source="Table 2, §5.3", names=names2, **pk_abl))
    t3 = study["table3"]
    names3 = {e: k for k, e in table3_rows(t3).items()}
    claims += [
        claim_beats_all(runs_abl, t3["ctp"], [t3["only_prev"], t3["only_cur"]], "Rm",
                        text="the compatible momentum update beats either single-way update on Rm",
                        source="Table 3, §5.3", names=names3, **pk_abl),
        claim_beats_all(runs_abl, t3["only_prev"], [t3["only_cur"]], "Rm",
                        text="the single-way update from the previous-task model beats the one from the current model "
                             "on Rm", source="Table 3, §5.3", names=names3, **pk_abl),
        claim_beats_all(runs_abl, t3["ctp"], [t3["no_queue"]], "Rm",
                        text="the momentum queue Q helps (CTP > w/o Q on Rm)", source="Table 3, §5.3", names=names3, **pk_abl),
        claim_beats_all(runs_abl, t3["ctp"], [t3["no_selfmask"]], "Rm",
                        text="suppressing the same-modal self-similarity helps (CTP > w/o P̂i2i & P̂t2t on Rm)",
                        source="Table 3, §5.3", names=names3, **pk_abl),
    ]
    margin, margin_how = momentum_margin(runs_abl, study["momentum"], study.get("momentum_margin", "auto"))
    claims += [
        claim_momentum_insensitive(runs_abl, study["momentum"], "Rm", margin, margin_how, **kw,
                                   scale=scale if study.get("momentum_margin", "auto") in (None, "auto") else None),
        claim_time_overhead(runs1, study["ctp"], study["reference"], free, study.get("time_margin", PAPER_HOURS_RESOLUTION)),
        claim_time_target(runs1, study["ctp"], study["reference"], study["time_target"], bench),
        claim_ranking(runs1, runs_abl, study, "Rm", study.get("rank_alpha", 0.05)),
        claim_first_in_groups(runs_abl, study, "Rm", paper=rm, scale=study_scale(study, runs1, "ctp_supp_table3", unresolved),
                              block=block_abl, **kw),
    ]
    return claims
