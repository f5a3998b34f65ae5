"""Engineering targets (speed, memory, time budgets) as ledger rows: a measurement against a goal,
judged with the ledger's verdicts. Confirmed when the measurement meets the goal; refuted only
when it excludes it (an interval or every paired repeat on the wrong side, an exact measurement,
a budget missed even at the reference pace); inconclusive otherwise (one timing cannot refute)."""
from __future__ import annotations

import re

from vlcp.report.ledger import Row


def target(text: str, verdict: str, evidence: str, source: str = "performance issue targets", *,
           effect: float | None = None, low: float | None = None, high: float | None = None,
           seeds: int | None = None) -> Row:
    """A target's ledger row: `text` the target, `evidence` the numbers behind its verdict."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return Row(slug, verdict, "target", effect, low, high, seeds, notes=[evidence], claim=text, source=source)


def interval_verdict(estimate: float, low: float, high: float, goal: float, margin: float,
                     control: tuple[float, float] | None = None) -> str:
    """"A ratio ≥ `goal`" from paired repeats (an estimate and its 95 % interval): confirmed when the
    estimate meets the goal and the interval's low end stays above `margin` (≤ goal); refuted when
    the whole interval is below the goal; else inconclusive. `control`: the interval the protocol
    reads for two identical loops (A/A); when it excludes 1.0 the protocol is biased at its own
    resolution, and a confirmation becomes inconclusive."""
    if estimate >= goal and low >= margin:
        return "confirmed" if control is None or control[0] <= 1.0 <= control[1] else "inconclusive"
    return "refuted" if high < goal else "inconclusive"


def repeats_verdict(median: float, worst: float, best: float | None, goal: float, *, at_least: bool = False) -> str:
    """A ratio ≤ `goal` (a cost; with `at_least`, ≥: a speed-up) from paired repeats: confirmed when
    every repeat meets it (`worst`), refuted when none does (`best`; None: not recorded, never
    refuted), else inconclusive."""
    meets = (lambda x: x >= goal) if at_least else (lambda x: x <= goal)  # noqa: E731
    if meets(worst):
        return "confirmed"
    return "refuted" if best is not None and not meets(best) and not meets(median) else "inconclusive"


def sign_verdict(e) -> str:
    """A target read as the sign of a paired interval (`stats.Effect` of goal − measurement):
    confirmed above 0, refuted below it, else (or on a noise that decides nothing) inconclusive."""
    if not e.usable:
        return "inconclusive"
    return "confirmed" if e.low > 0 else "refuted" if e.high < 0 else "inconclusive"


def exact_verdict(holds: bool) -> str:
    """A target on an exact measurement (memory, counts: no sampling noise): confirmed or refuted."""
    return "confirmed" if holds else "refuted"


def single_verdict(holds: bool) -> str:
    """A target on single timings (no repeats to measure their noise): confirmed when met, else
    inconclusive: one timing cannot refute it."""
    return "confirmed" if holds else "inconclusive"


def budget_verdict(measured: float, budget: float, slowdown: float = 1.0) -> str:
    """A time budget from one measurement taken while the machine ran `slowdown` × slower than its
    reference pace (`vlcp.report.performance.pace_slowdown`): confirmed within the budget;
    inconclusive when only the time at the reference pace is; refuted when even that is over."""
    if measured <= budget:
        return "confirmed"
    return "inconclusive" if measured / slowdown <= budget else "refuted"


def all_of(verdicts: list[str]) -> str:
    """One target made of parts: refuted when a part is, confirmed when every part is, else inconclusive."""
    if "refuted" in verdicts:
        return "refuted"
    return "confirmed" if verdicts and all(v == "confirmed" for v in verdicts) else "inconclusive"


def engineering_targets(rows: list[dict]):
    """A study's engineering targets shown beside its ledger (not paper claims), one row each
    {target, ratio (the median of paired measurements), slowest, goal, source, note}: "met" when
    every measurement meets the goal, "met by the median only", else "not met"."""
    import pandas as pd

    def result(r: dict) -> str:
        return "met" if r["slowest"] <= r["goal"] else "met by the median only" if r["ratio"] <= r["goal"] else "not met"

    return pd.DataFrame([{"target": r["target"], "× reference (median)": r["ratio"], "slowest": r["slowest"],
                          "goal": r["goal"], "result": result(r), "measured by": r["source"], "note": r.get("note", "")}
                         for r in rows]).set_index("target")
