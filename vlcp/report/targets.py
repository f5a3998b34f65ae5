"""Engineering targets (speed, memory, time budgets) as ledger rows: a measurement against a goal,
confirmed when it meets the goal, refuted only when it excludes it, else inconclusive."""
from __future__ import annotations

import re

from vlcp.report.ledger import Row


def target(text: str, verdict: str, evidence: str, source: str = "our check", *,
           effect: float | None = None, low: float | None = None, high: float | None = None,
           seeds: int | None = None) -> Row:
    """A target's ledger row: `text` the target, `evidence` the numbers behind its verdict."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return Row(slug, verdict, "target", effect, low, high, seeds, notes=[evidence], claim=text, source=source)


def interval_verdict(estimate: float, low: float, high: float, goal: float, margin: float,
                     control: tuple[float, float] | None = None) -> str:
    """"A ratio ≥ `goal`" from an estimate and its 95 % interval: confirmed when the estimate meets it
    and the low end stays above `margin`, refuted when the interval is below it. `control`: the A/A
    interval of two identical loops; one that excludes 1.0 turns a confirmation inconclusive."""
    if estimate >= goal and low >= margin:
        return "confirmed" if control is None or control[0] <= 1.0 <= control[1] else "inconclusive"
    return "refuted" if high < goal else "inconclusive"


def repeats_verdict(median: float, worst: float, best: float | None, goal: float, *, at_least: bool = False) -> str:
    """A ratio ≤ `goal` (with `at_least`, ≥) from paired repeats: confirmed when the `worst` meets it,
    refuted when neither the `best` (None: never refuted) nor the median does."""
    meets = (lambda x: x >= goal) if at_least else (lambda x: x <= goal)  # noqa: E731
    if meets(worst):
        return "confirmed"
    return "refuted" if best is not None and not meets(best) and not meets(median) else "inconclusive"


def sign_verdict(e) -> str:
    """The sign of a paired interval (`stats.Effect` of goal − measurement) as a target's verdict."""
    if not e.usable:
        return "inconclusive"
    return "confirmed" if e.low > 0 else "refuted" if e.high < 0 else "inconclusive"


def exact_verdict(holds: bool) -> str:
    """A target on an exact measurement (memory, counts)."""
    return "confirmed" if holds else "refuted"


def single_verdict(holds: bool) -> str:
    """A target on single timings: confirmed when met, else inconclusive (one timing cannot refute)."""
    return "confirmed" if holds else "inconclusive"


def budget_verdict(measured: float, budget: float, slowdown: float = 1.0) -> str:
    """A time budget from one measurement on a machine `slowdown` × slower than its reference pace:
    inconclusive when only the time at the reference pace is within it."""
    if measured <= budget:
        return "confirmed"
    return "inconclusive" if measured / slowdown <= budget else "refuted"


def all_of(verdicts: list[str]) -> str:
    """One target made of parts: refuted when a part is, confirmed when every part is, else inconclusive."""
    if "refuted" in verdicts:
        return "refuted"
    return "confirmed" if verdicts and all(v == "confirmed" for v in verdicts) else "inconclusive"


def engineering_targets(rows: list[dict]):
    """A study's engineering targets beside its ledger, from rows {target, ratio (the median of
    paired measurements), slowest, goal, source, note}."""
    import pandas as pd

    def result(r: dict) -> str:
        return "met" if r["slowest"] <= r["goal"] else "met by the median only" if r["ratio"] <= r["goal"] else "not met"

    return pd.DataFrame([{"target": r["target"], "× reference (median)": r["ratio"], "slowest": r["slowest"],
                          "goal": r["goal"], "result": result(r), "measured by": r["source"], "note": r.get("note", "")}
                         for r in rows]).set_index("target")
