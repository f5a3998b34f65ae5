"""CTP's claims ledger (`vlcp/report/studies/ctp/claims.yaml`): its measures and own claim kinds, the single-seed
tables' noise floor, the `ledger` hook, and the time check behind its time target and the study's cost check."""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from types import MappingProxyType

import numpy as np
from scipy.stats import kendalltau

from vlcp.report import project_root, stats as st, targets as tg
from vlcp.report.ctp.study import (PAPER_TIME_TARGET, by_seed, final_row, flop_ratios, mean_std, seconds_ratio,
                                   single_seed_experiments, table1_experiments, time_ratios, with_long)
from vlcp.report.ledger import Comparison, Context, Row, Scale, evaluate, greater, not_testable, unready
from vlcp.report.results import MEASURES as GENERIC_MEASURES
from vlcp.report.study import ClaimSpec, Runs, Study, load_runs, paper_number, stale_calibration, values
from vlcp.utils import read_json

MEASURES = MappingProxyType({m: (lambda r, m=m: final_row(r, [m])[m]) for m in ("Rm", "mAP@1")})


def floors(runs1: Runs, experiments, setting="auto", default: float = 1.0) -> dict[str, st.Noise]:
    """The claims file's floor `Rm`, the noise of one single-seed difference: `setting` as is; "auto": √2 ×
    the pooled seed std of Rm over the `experiments` with ≥ 2 seeds in `runs1`, on their dof; else `default`."""
    vs = [[MEASURES["Rm"](r) for r in runs1[e].values()] for e in experiments if len(runs1.get(e, {})) >= 2]
    if setting not in (None, "auto"):
        return {"Rm": st.Noise(float(setting), None, "set in params (report.ctp.noise_floor)")}
    if not vs:
        return {"Rm": st.Noise(float(default), None, "default (no experiment with 2 seeds to measure it)")}
    return {"Rm": st.Noise(math.sqrt(2 * np.mean([np.var(v, ddof=1) for v in vs])), sum(len(v) - 1 for v in vs),
                           f"measured: √2 × pooled seed std of Rm over {len(vs)} Table 1 runs")}


def _ready(kind):
    """A claim kind (below) that is not testable while an arm it compares has no runs or a floor it names is absent."""
    return functools.wraps(kind)(lambda spec, runs, ctx: unready(spec, runs, ctx.floors) or kind(spec, runs, ctx))


def group_means(spec: ClaimSpec, runs: Runs, ctx: Context) -> Row:
    """"One group beats the other": per common seed the mean over the `upper` group's methods minus
    the mean over the rest; the paper's effect the same means of the comparisons' effects."""
    upper, m = set(spec.options.get("upper") or ()), ctx.measures[spec.measure]
    hi, lo = [c for c in spec.comparisons if c.a in upper], [c for c in spec.comparisons if c.a not in upper]
    if not hi or not lo:
        raise ValueError(f"claim {spec.id}: `upper` must name some but not all of its comparisons' runs")
    seeds = sorted(set.intersection(*(set(runs[c.a]) for c in spec.comparisons)))
    if not seeds:
        return not_testable(spec.id, "no seed common to every run of both groups")
    a, b = ({s: float(np.mean([m(runs[c.a][s]) for c in cs])) for s in seeds} for cs in (hi, lo))
    paper = float(np.mean([c.effect for c in hi]) - np.mean([c.effect for c in lo]))
    c = Comparison(f"{len(hi)} methods' mean − {len(lo)} methods' mean", a, b, paper,
                   ctx.scales[spec.scale], ctx.floors.get(spec.options.get("floor")))
    return dataclasses.replace(greater(spec.id, [c], depth=ctx.depth), kind=spec.kind)


def gap_share(spec: ClaimSpec, runs: Runs, ctx: Context) -> Row:
    """A gap a − b large (`at_least: {label: f}`) or small (`at_most`) against f × the paper's share
    of a's score (effect ÷ `top`) of our a's mean; the effect: the paper's distance from it, as a share."""
    lo, hi, top = (spec.options.get(k) or {} for k in ("at_least", "at_most", "top"))
    floor, cs = ctx.floors.get(spec.options.get("floor")), []
    for c in spec.comparisons:
        m = ctx.measures[c.measure or spec.measure]
        a, b = values(runs, c.a, m), values(runs, c.b, m)
        gap = st.paired(a, b)
        if not gap:
            return not_testable(spec.id, f"no seed common to {c.a} and {c.b}")
        if c.label not in lo and c.label not in hi:
            raise ValueError(f"claim {spec.id}: comparison {c.label!r} is in neither `at_least` nor `at_most`")
        ours, theirs = float(np.mean(list(a.values()))), paper_number(f"claim {spec.id}: top.{c.label}", top[c.label])
        scale = Scale(theirs, ours, f"a share of {c.a}'s own score ({ours:.2f}; the paper's {theirs:.2f})")
        f = float(lo[c.label] if c.label in lo else hi[c.label])
        thr = {s: f * c.effect / theirs * ours for s in gap}
        cs.append(Comparison(f"{c.label} − threshold", gap, thr, (1 - f) * c.effect, scale, floor) if c.label in lo
                  else Comparison(f"threshold − {c.label}", thr, gap, (f - 1) * c.effect, scale, floor))
    return dataclasses.replace(greater(spec.id, cs, depth=ctx.depth), kind=spec.kind)


def time_overhead(spec: ClaimSpec, runs: Runs, ctx: Context) -> Row:
    """"a costs no more than b" on training time × the `reference`'s: b − a + `margin` > 0, the
    effect the paper's hours apart ÷ its reference's hours (`paper_reference`)."""
    ref, margin = spec.options["reference"], float(spec.options.get("margin", 0.0))
    if not runs.get(ref):
        return not_testable(spec.id, f"no runs of {ref} here")
    hours = paper_number(f"claim {spec.id}: paper_reference", spec.options["paper_reference"])
    scale = Scale(hours, 1.0, f"time × {ref}'s: the paper's hours ÷ its {hours:g} h")
    cs = [Comparison(c.label, {s: v + margin for s, v in seconds_ratio(runs[c.a], runs[ref]).items()},
                     seconds_ratio(runs[c.b], runs[ref]), c.effect + margin * hours, scale) for c in spec.comparisons]
    return dataclasses.replace(greater(spec.id, cs, depth=ctx.depth), kind=spec.kind)


def overhead(runs, ctp: str, reference: str, tolerance: float = 1.1, target: float = PAPER_TIME_TARGET) -> dict:
    """CTP's training-time ratio to SeqF (per seed), its FLOP ratio, and the two targets."""
    if not runs.get(ctp) or not runs.get(reference):
        return {}
    ratios, flops = time_ratios(runs[ctp], runs[reference]), flop_ratios(runs[ctp], runs[reference])
    (m, s), f = mean_std(ratios), float(np.mean(flops)) if flops else float("nan")
    return {"time ratios": ratios, "time ratio": m, "time ratio std": s, "FLOP ratio": f,
            "FLOP target": f * tolerance, "tolerance": tolerance, "paper target": target}


def paired_cost(bench: dict | None, ctp: str, tolerance: float = 1.1) -> dict:
    """CTP's paired step-time ratios to SeqF in `benchmarks/ctp_cost.py`'s result ({} without them)."""
    if not bench or ctp not in bench.get("paired_ratios", {}):
        return {}
    ratios = bench["paired_ratios"][ctp]
    return {"median": bench["ratio_to_reference"][ctp], "slowest": max(ratios), "fastest": min(ratios),
            "repeats": len(ratios), "FLOP ratio": bench["flop_ratio"][ctp],
            "FLOP target": bench["flop_ratio"][ctp] * tolerance, "steps": bench.get("overrides", []),
            "commit": bench.get("commit", "?"), "date": bench.get("date", "?")}


def time_check(claim_id: str, kind: str, runs: Runs, a: str, b: str, bench: dict | None = None,
               target: float | None = None, tolerance: float = 1.0) -> Row:
    """a's training time ÷ b's ≤ `target` (None: a's FLOP ratio × `tolerance`), on the paired benchmark's
    repeats where it has a, else per common seed; not testable when the FLOP ratio alone exceeds it."""
    if missing := [e for e in (a, b) if not runs.get(e)]:
        return not_testable(claim_id, f"no runs of {', '.join(missing)} here")
    p, flops = paired_cost(bench, a), flop_ratios(list(runs[a].values()), list(runs[b].values()))
    flop = p["FLOP ratio"] if p else (float(np.mean(flops)) if flops else math.nan)
    goal = flop * tolerance if target is None else target
    how = f"FLOP ratio {flop:.3f}" + (f" × {tolerance:g} = {goal:.3f}" if target is None else "")
    if math.isnan(goal):
        return not_testable(claim_id, f"no FLOP count common to {a}'s and {b}'s runs")
    if flop > goal:
        return not_testable(claim_id, f"{a}'s FLOP ratio alone is {flop:.2f} > {goal:.2f} on this model (its extra "
                                      "forwards of the momentum and previous-task models): the paper's figure, for "
                                      "ViT-B/16 + BERT-base, cannot be met by any implementation here")
    if p:
        m, hi, lo, n = p["median"], p["slowest"], p["fastest"], p["repeats"]
        return Row(claim_id, tg.repeats_verdict(m, hi, lo, goal), kind, goal - m, goal - hi, goal - lo, n,
                   notes=[f"paired benchmark ({n} repeats): median {m:.3f} ({lo:.3f}–{hi:.3f}) against {goal:.2f}; "
                          f"{how}; the effect shown: {goal:.2f} − the ratio"])
    r = seconds_ratio(runs[a], runs[b])
    if not r:
        return Row(claim_id, "inconclusive", kind, notes=[f"no seed common to {a} and {b}; {how}"])
    e = st.effect({s: goal for s in r}, r)
    return Row(claim_id, tg.sign_verdict(e), kind, e.diff, e.low if e.usable else None, e.high if e.usable else None,
               e.n, sigma_d=e.sd, notes=[f"time ratio over {len(r)} seed(s), {how}; the effect shown: {goal:.2f} − "
                                         f"the time ratio ({e.how})"])


def time_flops_target(runs, ctp: str, reference: str, tolerance: float = 1.1, bench: dict | None = None) -> Row:
    """This study's cost check, not a paper's claim: CTP's time ratio to SeqF ≤ its FLOP ratio × `tolerance`."""
    r = time_check("", "target", {e: by_seed(runs.get(e) or []) for e in (ctp, reference)}, ctp, reference, bench,
                   tolerance=tolerance)
    return tg.target(f"CTP's extra training time over SeqF is its extra arithmetic (time ratio ≤ FLOP ratio × "
                     f"{tolerance:g})", r.verdict, r.notes[0], "Table 1 hours, §5.2 (this study's cost check)",
                     effect=r.effect, low=r.low, high=r.high, seeds=r.seeds)


def time_target(spec: ClaimSpec, runs: Runs, ctx: Context) -> Row:
    """"a's time ≤ `target` × b's" (`time_check`), on the `benchmark` file's repeats where it has a."""
    (c,), path = spec.comparisons, spec.options.get("benchmark")
    bench = read_json(project_root() / path) if path and (project_root() / path).is_file() else None
    return time_check(spec.id, spec.kind, runs, c.a, c.b, bench, float(spec.options["target"]))


def kendall_tau(x, y) -> float:
    """Kendall's τ-b between two score lists over the same items (scipy; NaN if undefined)."""
    return float("nan") if len(x) < 2 else float(kendalltau(x, y).statistic)


def tau_null(default, reversed_, groups, max_perms: int = 20000, seed: int = 0) -> np.ndarray:
    """Kendall τ-b with `reversed_` shuffled within each group (one label per item): every such
    permutation up to `max_perms`, else that many random ones (generator `seed`)."""
    default, reversed_, groups = np.asarray(default, float), np.asarray(reversed_, float), np.asarray(groups)
    idx = [np.flatnonzero(groups == g) for g in dict.fromkeys(groups.tolist())]
    if math.prod(math.factorial(len(i)) for i in idx) <= max_perms:
        perms = itertools.product(*[itertools.permutations(i) for i in idx])
    else:
        rng = np.random.default_rng(seed)
        perms = ([rng.permutation(i) for i in idx] for _ in range(max_perms))
    order, shuffled, out = np.concatenate(idx), reversed_.copy(), []
    for perm in perms:
        shuffled[order] = reversed_[np.concatenate(perm)]
        out.append(kendall_tau(default, shuffled))
    return np.asarray(out)


def null_verdict(observed: float, null: np.ndarray, alpha: float = 0.05) -> tuple[str, float]:
    """(verdict, p = P(null ≥ observed)): confirmed when p ≤ `alpha`, refuted below the null's median."""
    if np.isnan(observed) or len(null) == 0:
        return "inconclusive", float("nan")
    p = float(np.mean(null >= observed - 1e-12))
    if p <= alpha:
        return "confirmed", p
    return ("refuted" if observed < float(np.median(null)) else "inconclusive"), p


def ranking(spec: ClaimSpec, runs: Runs, ctx: Context) -> Row:
    """"The ranking survives another order": Kendall τ-b between the methods' mean scores in the
    default order (a) and the other (b) against `tau_null` within `groups`; the paper's τ as evidence."""
    m, alpha, cs = ctx.measures[spec.measure], float(spec.options.get("alpha", 0.05)), spec.comparisons
    if len(cs) < 3:
        return not_testable(spec.id, f"only {len(cs)} method(s) (τ needs 3)")
    group = {lab: g for g, labs in (spec.options.get("groups") or {}).items() for lab in labs}
    labels = [group.get(c.label, "") for c in cs]
    default, other = ([float(np.mean(list(values(runs, getattr(c, k), m).values()))) for c in cs] for k in "ab")
    tau, null = kendall_tau(default, other), tau_null(default, other, labels)
    verdict, p = null_verdict(tau, null, alpha)
    rev, paper = spec.options.get("reversed_paper") or {}, [c.effect for c in cs]
    pr = [paper_number(f"claim {spec.id}: reversed_paper.{c.label}", rev[c.label]) for c in cs]
    ptau = kendall_tau(paper, pr)
    pv, pp = null_verdict(ptau, tau_null(paper, pr, labels), alpha)
    order = " > ".join(c.label for _, c in sorted(zip(other, cs), key=lambda x: -x[0]))
    notes = [f"τ = {tau:.2f} over {len(cs)} methods; null (random orders within groups, {len(null)} permutations): "
             f"median {np.median(null):.2f}, 95th percentile {np.quantile(null, 0.95):.2f}, P(τ_null ≥ τ) = {p:.3f} "
             f"(confirmed when ≤ {alpha:g}, refuted below the median)",
             f"paper, same methods: τ = {ptau:.2f}, P = {pp:.3f} ({pv})", f"other order: {order}"]
    return Row(spec.id, verdict, spec.kind, tau, seeds=min(len(runs[e]) for c in cs for e in (c.a, c.b)), notes=notes)


KINDS = MappingProxyType({"group means": _ready(group_means), "gap share": _ready(gap_share),
                          "time overhead": _ready(time_overhead), "time target": time_target,
                          "ranking": _ready(ranking)})


def ledger_runs(block: dict, runs_dir, long: bool = False) -> tuple[Runs, Runs]:
    """(the ledger's runs, Table 1's): Table 1's experiments at `seeds`, the single-seed tables' at
    `ablation_seeds` (one in both at every seed of either); `long`: with the long profile's too."""
    block = with_long(block) if long else block
    dirs = list(dict.fromkeys([runs_dir, *block.get("more_runs", [])]))
    t1 = load_runs(dirs, table1_experiments(block), block["seeds"])
    ab = load_runs(dirs, single_seed_experiments(block), block["ablation_seeds"])
    return {e: dict(sorted({**ab.get(e, {}), **t1.get(e, {})}.items())) for e in dict.fromkeys([*t1, *ab])}, t1


def ledger(study: Study, params: dict, runs_dir, long: bool = False) -> list[Row]:
    """CTP's ledger on `ledger_runs`, with the floor of its single-seed tables from Table 1's runs."""
    block = study.block(params)
    runs, t1 = ledger_runs(block, runs_dir, long)
    return evaluate(study, runs, GENERIC_MEASURES, calibrated=stale_calibration(study, runs) is None,
                    floors=floors(t1, table1_experiments(block), block.get("noise_floor", "auto"),
                                  float(block.get("noise_floor_default", 1.0))))
