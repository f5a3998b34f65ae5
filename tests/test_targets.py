"""Engineering targets' verdicts (vlcp.report.targets) on hand-made measurements, and the
performance ledger (vlcp.report.performance.targets) on the committed benchmark results."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vlcp.config import load_params
from vlcp.report import performance as pf
from vlcp.report import targets as tg
from vlcp.report.ledger import VERDICTS, ledger_json

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("minutes,slowdown,verdict", [
    (80, 1.0, "confirmed"),
    (80, 3.0, "confirmed"),             # within the budget as measured, however slow the machine was
    (200, 3.0, "inconclusive"),         # over as measured, within at the reference pace
    (200, 1.0, "refuted"),              # no slowdown to read it at
    (300, 3.0, "refuted"),              # over even at the reference pace
])
def test_budget_returns_each_verdict(minutes, slowdown, verdict):
    assert tg.budget_verdict(minutes, 90, slowdown) == verdict


@pytest.mark.parametrize("estimate,low,high,control,verdict", [
    (1.05, 0.98, 1.12, None, "confirmed"),
    (0.97, 0.92, 1.03, None, "inconclusive"),           # the interval straddles the goal
    (1.02, 0.93, 1.10, None, "inconclusive"),           # the estimate meets it, the interval dips below the margin
    (0.90, 0.85, 0.96, None, "refuted"),                # the whole interval is below the goal
    (1.01, 0.99, 1.02, (0.98, 1.01), "confirmed"),      # the A/A control reads 1.0 within its interval
    (1.01, 0.99, 1.02, (1.01, 1.04), "inconclusive"),   # the protocol itself favours one side
    (0.96, 0.94, 0.98, (1.01, 1.04), "refuted"),        # below the goal whatever the control
])
def test_interval_target_returns_each_verdict(estimate, low, high, control, verdict):
    assert tg.interval_verdict(estimate, low, high, goal=1.0, margin=0.95, control=control) == verdict


@pytest.mark.parametrize("median,worst,best,at_least,verdict", [
    (1.02, 1.04, 1.00, False, "confirmed"),       # a cost ratio: every repeat within 1.05
    (1.02, 1.08, 1.00, False, "inconclusive"),    # the median is, the slowest repeat is not
    (1.07, 1.09, 1.04, False, "inconclusive"),    # one repeat meets it
    (1.07, 1.09, 1.06, False, "refuted"),         # none does
    (1.07, 1.09, None, False, "inconclusive"),    # the best repeat not recorded: never refuted
    (1.7, 1.65, 1.8, True, "confirmed"),          # a speed-up ratio ≥ 1.6 (DDP): every repeat reaches it
    (1.55, 1.48, 1.58, True, "refuted"),          # the DDP measurement of 2026-11 (1.55×, range 1.48–1.58)
])
def test_repeats_target_returns_each_verdict_in_both_directions(median, worst, best, at_least, verdict):
    assert tg.repeats_verdict(median, worst, best, 1.6 if at_least else 1.05, at_least=at_least) == verdict


def test_parts_of_a_target_and_single_timings():
    assert tg.all_of(["confirmed", "confirmed"]) == "confirmed"
    assert tg.all_of(["confirmed", "inconclusive"]) == "inconclusive"
    assert tg.all_of(["inconclusive", "refuted"]) == "refuted"
    assert tg.all_of([]) == "inconclusive"
    assert (tg.single_verdict(True), tg.single_verdict(False)) == ("confirmed", "inconclusive")
    assert (tg.exact_verdict(True), tg.exact_verdict(False)) == ("confirmed", "refuted")


def test_a_target_row_carries_its_evidence_into_the_claims_file():
    row = tg.target("a ≤ 2× b", "refuted", "a 3.0 vs b 1.0", effect=3.0)
    c = ledger_json("performance targets", [row])["claims"][0]
    assert (c["claim"], c["verdict"], c["kind"], c["effect"]) == ("a ≤ 2× b", "refuted", "target", 3.0)
    assert c["evidence"] == "a 3.0 vs b 1.0" and c["claim_id"] == "a-2-b"


def test_the_performance_ledger_on_the_committed_benchmarks(tmp_path, monkeypatch):
    """Without runs: the benchmark files' targets alone, each with a verdict and its numbers; the
    DDP measurement whose every repeat is below 1.6× is refuted."""
    monkeypatch.chdir(tmp_path)   # no runs-* folders here: the studies' tables are left out
    bench = {p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "benchmarks" / "results").glob("*.json"))}
    params = load_params(str(ROOT / "params.yaml"))
    rows = pf.targets(bench, params, tmp_path / "runs", yaml.safe_load((ROOT / "dvc.yaml").read_text()))
    assert rows and all(r.verdict in VERDICTS and r.verdict != "underpowered" and r.notes[0] for r in rows)
    assert not any(r.claim.startswith("every method's time ratio") for r in rows)   # no spine runs here
    ddp = next(r for r in rows if r.claim.startswith("2-process DDP"))
    dd = bench["ddp_scaling"]
    lo, hi = dd["ratio_range"]["2 processes"]
    assert ddp.verdict == ("refuted" if hi < dd["target_ratio"] else "confirmed" if lo >= dd["target_ratio"] else "inconclusive")
    assert len({r.claim_id for r in rows}) == len(rows)
