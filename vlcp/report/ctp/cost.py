"""CTP's cost check, an engineering target of this study and not a claim of the paper: CTP's time
ratio to SeqF ≤ its FLOP ratio × a tolerance, on the paired benchmark or the study's own timings."""
from __future__ import annotations

import numpy as np

from vlcp.report import stats as st
from vlcp.report import targets as tg
from vlcp.report.ctp.study import (PAPER_CTP_HOURS, PAPER_SEQF_HOURS, PAPER_TIME_TARGET, by_seed, flop_ratios,
                                   mean_std, seconds_ratio, time_ratios)
from vlcp.report.ledger import Row


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
    """CTP's paired step-time ratio to SeqF from `benchmarks/results/ctp_cost.json`: median, range,
    FLOP ratio and its × `tolerance` target; {} when the file or the experiment is absent."""
    if not bench or ctp not in bench.get("paired_ratios", {}):
        return {}
    ratios = bench["paired_ratios"][ctp]
    return {"median": bench["ratio_to_reference"][ctp], "slowest": max(ratios), "fastest": min(ratios),
            "repeats": len(ratios), "FLOP ratio": bench["flop_ratio"][ctp],
            "FLOP target": bench["flop_ratio"][ctp] * tolerance, "steps": bench.get("overrides", []),
            "commit": bench.get("commit", "?"), "date": bench.get("date", "?")}


def time_flops_target(runs, ctp: str, reference: str, tolerance: float = 1.1, bench: dict | None = None) -> Row:
    """Time ratio ≤ FLOP ratio × `tolerance`: on the paired benchmark's repeats when there is one, else
    on the per-seed interval of the FLOP target − the time ratio (confirmed above 0, refuted below)."""
    text = f"CTP's extra training time over SeqF is its extra arithmetic (time ratio ≤ FLOP ratio × {tolerance:g})"
    src = "Table 1 hours, §5.2 (this study's cost check)"
    missing = [e for e in (ctp, reference) if not runs.get(e)]
    if missing:
        return tg.target(text, "not testable", f"missing runs: {', '.join(missing)}", src)
    o, p = overhead(runs, ctp, reference, tolerance), paired_cost(bench, ctp, tolerance)
    r = seconds_ratio(by_seed(runs[ctp]), by_seed(runs[reference]))
    m, sd = mean_std(list(r.values())) if r else (None, None)
    study_ev = (f"study: time ratio {m:.2f}" + (f" ± {sd:.2f}" if len(r) > 1 else "") + f" over {len(r)} seed(s)"
                if r else "study: no common seed")
    if p:
        ev = (f"paired benchmark ({p['repeats']} repeats): median {p['median']:.3f} ({p['fastest']:.3f}–"
              f"{p['slowest']:.3f}); FLOP ratio {p['FLOP ratio']:.3f} × {tolerance:g} = {p['FLOP target']:.3f}; {study_ev}")
        return tg.target(text, tg.repeats_verdict(p["median"], p["slowest"], p["fastest"], p["FLOP target"]), ev, src)
    if np.isnan(o["FLOP target"]):
        return tg.target(text, "not testable", "no FLOP count common to CTP's and SeqF's runs", src)
    if not r:
        return tg.target(text, "inconclusive", study_ev, src)
    e = st.effect({s: o["FLOP target"] for s in r}, r)
    ev = (f"{study_ev}; FLOP ratio {o['FLOP ratio']:.3f} × {tolerance:g} = {o['FLOP target']:.3f}; "
          "the effect shown: that target − the time ratio")
    return tg.target(text, tg.sign_verdict(e), ev, src, effect=e.diff, low=e.low, high=e.high, seeds=e.n)
