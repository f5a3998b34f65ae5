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
