"""Continual-learning summaries of an accuracy matrix a[i][j] (model after task i, eval set j).

All are pure functions of a square (T × T) list of lists or array.
"""
from __future__ import annotations

import numpy as np


def final_average(a) -> float:
    """Mean over tasks of the final model's score (AR in CLL-CLIP, final Rm per task)."""
    a = np.asarray(a, float)
    return float(a[-1].mean())


def average_incremental(a) -> float:
    """Mean over i of the mean of a[i][j] for j <= i (average accuracy along the stream)."""
    a = np.asarray(a, float)
    return float(np.mean([a[i, : i + 1].mean() for i in range(len(a))]))


def forgetting(a) -> float:
    """Max-based forgetting: mean over j < T-1 of max_{i < T-1} a[i][j] - a[T-1][j]."""
    a = np.asarray(a, float)
    t = len(a)
    if t < 2:
        return 0.0
    return float(np.mean([a[: t - 1, j].max() - a[t - 1, j] for j in range(t - 1)]))


def bwt(a) -> float:
    """Backward transfer: mean over j < T-1 of a[T-1][j] - a[j][j] (negative = forgetting)."""
    a = np.asarray(a, float)
    t = len(a)
    if t < 2:
        return 0.0
    return float(np.mean([a[t - 1, j] - a[j, j] for j in range(t - 1)]))


def ctp_bwt(so_far, final) -> float:
    """CTP's eval.py "BWT" on cumulative pools: sum_i (m(θ_i, D≤i) - m(θ_T, D≤i)) / (n-1),
    where so_far[i] = m(θ_i, D≤i) and final[i] = m(θ_T, D≤i). Positive = forgetting."""
    so_far, final = np.asarray(so_far, float), np.asarray(final, float)
    n = len(so_far)
    return float((so_far - final).sum() / (n - 1)) if n > 1 else 0.0


# --------------------------------------------------------------------------- FoMo-in-Flux

def dataset_macro(scores: dict[str, float]) -> float:
    """FoMo-in-Flux's A_KA / A_ZS: the mean over datasets of each dataset's score (top-1
    accuracy for a classification set, R@5 for a retrieval set), not over concepts or samples
    (its 40·acc + 1·R@5 over 41 adaptation sets is this mean)."""
    if not scores:
        raise ValueError("dataset_macro: no datasets")
    return float(np.mean(list(scores.values())))


def geometric_mean(ka: float, zs: float) -> float:
    """GM = √(A_KA · A_ZS), the trade-off summary of FoMo-in-Flux's trajectory plots."""
    return float(np.sqrt(max(ka, 0.0) * max(zs, 0.0)))


def trade_off(scores: dict[str, float], adaptation, retention) -> dict:
    """{"datasets", "A_KA", "A_ZS", "GM"}: the dataset-macro averages of `scores` over the `adaptation`
    and the `retention` names and their GM; an average over no dataset (and a GM missing one) is None."""
    ka = dataset_macro({n: scores[n] for n in adaptation}) if adaptation else None
    zs = dataset_macro({n: scores[n] for n in retention}) if retention else None
    gm = geometric_mean(ka, zs) if ka is not None and zs is not None else None
    return {"datasets": dict(scores), "A_KA": ka, "A_ZS": zs, "GM": gm}


def above_trade_off_line(point, zero_shot, joint) -> float:
    """Signed distance (in A_ZS units) of an (A_KA, A_ZS) point above the straight line from the
    zero-shot start (A_KA⁰, A_ZS⁰) to the joint-training point: > 0 retains more zero-shot
    accuracy than the linear trade-off at the same accumulation."""
    (x, y), (x0, y0), (x1, y1) = point, zero_shot, joint
    if x1 == x0:
        raise ValueError("above_trade_off_line: zero-shot and joint points have the same A_KA")
    return float(y - (y0 + (y1 - y0) * (x - x0) / (x1 - x0)))


# --------------------------------------------------------------------------- sampling intervals

Z95 = 1.959963984540054


def score_halfwidth(score: float | None, n: int | None) -> float | None:
    """The 95 % sampling half-width (points) of a % score over `n` queries: z·√(p(1−p)/n)·100, the
    normal approximation of the binomial, with p floored at 1/(n+1) from either end so that 0 % and
    100 % get an interval too. None without a score or a size."""
    if score is None or not n:
        return None
    p = min(max(score / 100, 1 / (n + 1)), n / (n + 1))
    return float(Z95 * np.sqrt(p * (1 - p) / n) * 100)


def trade_off_halfwidths(row: dict, sizes: dict[str, int], adaptation, retention) -> dict:
    """{"datasets": {name: half-width}, "A_KA", "A_ZS", "GM"}: the 95 % sampling half-widths of a
    `trade_off` row, the averages' from their sets' (independent sets: √Σh² / k), GM's by the delta
    method (½·GM·√((h_KA/A_KA)² + (h_ZS/A_ZS)²)); None where a part is missing."""
    per = {n: score_halfwidth(v, sizes.get(n)) for n, v in row["datasets"].items()}

    def avg(names):
        hs = [per.get(n) for n in names]
        return None if not hs or any(h is None for h in hs) else float(np.sqrt(sum(h * h for h in hs)) / len(hs))

    ka, zs = avg(list(adaptation)), avg(list(retention))
    gm = None
    if None not in (ka, zs, row.get("GM")) and row["A_KA"] and row["A_ZS"]:
        gm = float(0.5 * row["GM"] * np.hypot(ka / row["A_KA"], zs / row["A_ZS"]))
    return {"datasets": per, "A_KA": ka, "A_ZS": zs, "GM": gm}


def differs(a: float | None, ha: float | None, b: float | None, hb: float | None) -> bool:
    """Whether two scores differ beyond their sampling noise: |a − b| > √(ha² + hb²) (95 % each)."""
    if None in (a, ha, b, hb):
        return False
    return abs(a - b) > float(np.hypot(ha, hb))
