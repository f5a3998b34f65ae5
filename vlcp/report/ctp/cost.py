"""CTP's training time against SeqF's: the overhead the notebook shows, the paired benchmark's ratios,
and the one check behind both the ledger's time target and this study's cost check."""
from __future__ import annotations

import math

import numpy as np

from vlcp.report import stats as st
from vlcp.report import targets as tg
from vlcp.report.ctp.study import (PAPER_CTP_HOURS, PAPER_SEQF_HOURS, PAPER_TIME_TARGET, by_seed, flop_ratios,
                                   mean_std, seconds_ratio, time_ratios)
from vlcp.report.ledger import Row, not_testable
from vlcp.report.study import Runs


def overhead(runs, ctp: str, reference: str, tolerance: float = 1.1, target: float = PAPER_TIME_TARGET) -> dict:
    """CTP's training-time ratio to SeqF (per seed), its FLOP ratio, and the two targets."""
    if not runs.get(ctp) or not runs.get(reference):
        return {}
    ratios, flops = time_ratios(runs[ctp], runs[reference]), flop_ratios(runs[ctp], runs[reference])
    m, s = mean_std(ratios)
    f = float(np.mean(flops)) if flops else float("nan")
    return {"time ratios": ratios, "time ratio": m, "time ratio std": s, "FLOP ratio": f,
            "FLOP target": f * tolerance, "tolerance": tolerance, "paper target": target,
            "paper ratio": PAPER_CTP_HOURS / PAPER_SEQF_HOURS}


def paired_cost(bench: dict | None, ctp: str, tolerance: float = 1.1) -> dict:
    """CTP's paired step-time ratio to SeqF from `benchmarks/results/ctp_cost.json`: median, range,
    FLOP ratio and its × `tolerance` target; {} when the file or the experiment is absent."""
    if not bench or ctp not in bench.get("paired_ratios", {}):
        return {}
    ratios = bench["paired_ratios"][ctp]
    return {"median": bench["ratio_to_reference"][ctp], "slowest": max(ratios), "fastest": min(ratios),
            "repeats": len(ratios), "FLOP ratio": bench["flop_ratio"][ctp],
            "FLOP target": bench["flop_ratio"][ctp] * tolerance, "steps": bench.get("overrides", []),
            "commit": bench.get("commit", "?"), "date": bench.get("date", "?")}


def time_check(claim_id: str, kind: str, runs: Runs, a: str, b: str, bench: dict | None = None,
               target: float | None = None, tolerance: float = 1.0) -> Row:
    """a's training time ÷ b's ≤ `target` (None: a's FLOP ratio × `tolerance`): on the paired benchmark's
    repeats where it has a, else per common seed (the effect: the target − the ratio); not testable
    when the FLOP ratio alone exceeds the target."""
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
        median, slowest, fastest, n = p["median"], p["slowest"], p["fastest"], p["repeats"]
        return Row(claim_id, tg.repeats_verdict(median, slowest, fastest, goal), kind, goal - median, goal - slowest,
                   goal - fastest, n, notes=[f"paired benchmark ({n} repeats): median {median:.3f} ({fastest:.3f}–"
                                             f"{slowest:.3f}) against {goal:.2f}; {how}; the effect shown: "
                                             f"{goal:.2f} − the ratio"])
    r = seconds_ratio(runs[a], runs[b])
    if not r:
        return Row(claim_id, "inconclusive", kind, notes=[f"no seed common to {a} and {b}; {how}"])
    e = st.effect({s: goal for s in r}, r)
    return Row(claim_id, tg.sign_verdict(e), kind, e.diff, e.low if e.usable else None, e.high if e.usable else None,
               e.n, sigma_d=e.sd, notes=[f"time ratio over {len(r)} seed(s), {how}; the effect shown: {goal:.2f} − "
                                         f"the time ratio ({e.how})"])


def time_flops_target(runs, ctp: str, reference: str, tolerance: float = 1.1, bench: dict | None = None) -> Row:
    """This study's cost check, not a claim of the paper: CTP's time ratio to SeqF ≤ its FLOP ratio ×
    `tolerance` (`time_check` on the paired benchmark or the study's own timings)."""
    r = time_check("", "target", {e: by_seed(runs.get(e) or []) for e in (ctp, reference)}, ctp, reference, bench,
                   tolerance=tolerance)
    return tg.target(f"CTP's extra training time over SeqF is its extra arithmetic (time ratio ≤ FLOP ratio × "
                     f"{tolerance:g})", r.verdict, r.notes[0], "Table 1 hours, §5.2 (this study's cost check)",
                     effect=r.effect, low=r.low, high=r.high, seeds=r.seeds)
