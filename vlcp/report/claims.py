"""The claims ledger: each claim is a check over our runs, with its numbers and spread.

Verdicts: "confirmed" (holds for the seed means and beyond the seed spread), "inconclusive"
(holds for the means but within the spread), "not confirmed" (does not hold). Claims that our
runs do not confirm are shown as such; hiding them is a defect."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from vlcp.utils import write_json


@dataclass
class Claim:
    claim: str
    verdict: str
    evidence: str
    source: str = ""


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


def target_verdict(median: float, slowest: float, goal: float) -> str:
    """A cost target (a ratio ≤ `goal`) read from paired repeated measurements: confirmed when
    every one meets it (`slowest` ≤ goal), inconclusive when the median does but not all."""
    return "confirmed" if slowest <= goal else "inconclusive" if median <= goal else "not confirmed"


def combine(verdicts: list[str]) -> str:
    """All confirmed -> confirmed; any not confirmed -> not confirmed; else inconclusive."""
    return ("not confirmed" if "not confirmed" in verdicts
            else "inconclusive" if "inconclusive" in verdicts else "confirmed")


def write_claims(path: str | Path, report: str, claims: list[Claim]) -> None:
    write_json(path, {"report": report, "claims": [asdict(c) for c in claims]})


def claims_frame(claims: list[Claim]):
    import pandas as pd

    return pd.DataFrame([asdict(c) for c in claims])
