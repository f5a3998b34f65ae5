"""CTP's cost check, an engineering target of this study and not a claim of the paper (the notebook
shows it outside the ledger; the ledger: `vlcp.report.ctp.rows`): CTP's time ratio to SeqF ≤ its
FLOP ratio × a tolerance, on the paired benchmark or the study's own timings."""
from __future__ import annotations

import numpy as np

from vlcp.report.claims import Claim, Effect, claim_from, effect, greater_verdict, not_testable, target_verdict
from vlcp.report.ctp.study import (PAPER_CTP_HOURS, PAPER_SEQF_HOURS, PAPER_TIME_TARGET, by_seed, flop_ratios,
                                   mean_std, time_ratios, train_seconds)


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


def _claim(text: str, verdict: str, e: Effect | None, evidence: str, source: str, missing=()) -> Claim:
    """A Claim with its effect (when there is one), downgraded to inconclusive by missing runs."""
    verdict, evidence = _with_missing(verdict, evidence, list(dict.fromkeys(missing)))
    return claim_from(text, verdict, e, evidence, source) if e is not None else Claim(text, verdict, evidence, source)


def paired_effect(a: dict, b: dict, sd: float | None = None, sd_source: str = "given sd", level: float = 0.95) -> Effect:
    """a − b from {seed: value} dicts: paired by seed over the seeds both have when there are >= 2;
    otherwise every value of each side, with `sd` (the std of one difference) where a side has a
    single value (`effect`'s one-run interval). `level`: the interval's."""
    va, vb, paired = _pair(a, b)
    if paired:
        return effect(va, vb, paired=True, level=level)
    single = min(len(va), len(vb)) < 2
    return effect(va, vb, sd=sd if single else None, paired=False, sd_source=sd_source, level=level)


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
