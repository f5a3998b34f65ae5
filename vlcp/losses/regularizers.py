"""Parameter-space regularisers as pure functions (EWC family)."""
from __future__ import annotations

import torch


def pad_rows(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`x` zero-padded along dim 0 to `like`'s shape (a parameter that grew rows, e.g. an
    expandable token embedding: the new rows have no importance and no anchor)."""
    if x.shape == like.shape:
        return x
    pad = like.new_zeros((like.shape[0] - x.shape[0], *like.shape[1:]))
    return torch.cat([x.to(like), pad])


def ewc_penalty(params: dict[str, torch.Tensor], anchors: dict[str, torch.Tensor],
                fisher: dict[str, torch.Tensor], rows: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """Σ_θ F·(θ − θ*)² over the parameters that have an anchor (no ½, as the CLFM code).
    `rows[name]`: the only rows of that parameter where F is not zero, with `anchors[name]` and
    `fisher[name]` holding just those rows (`support_rows`): the same sum without its zero terms."""
    total = None
    for name, p in params.items():
        if name not in anchors:
            continue
        r = rows.get(name) if rows else None
        if r is None:
            a, f = pad_rows(anchors[name], p), pad_rows(fisher[name], p)
        else:
            p, a, f = p[r], anchors[name], fisher[name]
        term = (f * (p - a) ** 2).sum()
        total = term if total is None else total + term
    return total if total is not None else torch.zeros(())


def support_rows(anchors: dict[str, torch.Tensor], importance: dict[str, torch.Tensor],
                 max_share: float = 0.5) -> tuple[dict, dict, dict]:
    """(anchors, importance, rows) for `ewc_penalty(..., rows)`: a matrix whose importance is not
    zero on at most `max_share` of its rows keeps only those rows. A token embedding's importance
    is zero outside the tokens its importance batches used (CLL-CLIP's growing table: most of its
    rows), so the penalty, computed every step, then reads and writes a fraction of the table."""
    a, imp, rows = dict(anchors), dict(importance), {}
    for name, f in importance.items():
        if f.dim() < 2 or name not in anchors:
            continue
        r = f.flatten(1).any(1).nonzero().squeeze(1)
        if len(r) <= max_share * len(f):
            a[name], imp[name], rows[name] = anchors[name][r], f[r], r
    return a, imp, rows


def merge_fisher(old: dict[str, torch.Tensor] | None, new: dict[str, torch.Tensor], gamma: float) -> dict[str, torch.Tensor]:
    """Online EWC's running importance F ← γ·F_old + F_new (shapes padded to the new ones)."""
    if not old:
        return dict(new)
    return {n: (gamma * pad_rows(old[n], f) if n in old else 0) + f for n, f in new.items()}


def quadratic_penalty_grad(params: dict[str, torch.Tensor], anchors: dict[str, torch.Tensor],
                           importance: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """∂/∂θ of `ewc_penalty(params, anchors, importance)`: 2·Ω·(θ − θ*) per anchored parameter
    (SI/RWalk subtract it from θ.grad to recover the unregularised gradient without a second
    backward)."""
    return {n: 2 * pad_rows(importance[n], p) * (p.detach() - pad_rows(anchors[n], p))
            for n, p in params.items() if n in anchors and n in importance}


def merge_average(old: dict[str, torch.Tensor] | None, new: dict[str, torch.Tensor],
                  task: int) -> dict[str, torch.Tensor]:
    """The CTP code's running average of importances, F ← α·F_old + (1 − α)·F_new with
    α = t/(t+1), t the index of the task just finished (0-based): after task t, F is the mean
    of the t+1 per-task importances. Shapes padded to the new ones."""
    if not old:
        return dict(new)
    alpha = task / (task + 1)
    return {n: (alpha * pad_rows(old[n], f) if n in old else 0) + (1 - alpha) * f for n, f in new.items()}


def add_importance(old: dict[str, torch.Tensor] | None, new: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """SI's accumulation Ω ← Ω_old + Ω_new (shapes padded to the new ones)."""
    return merge_fisher(old, new, 1.0)


def si_importance(w: torch.Tensor, delta: torch.Tensor, xi: float) -> torch.Tensor:
    """SI's per-task importance (Zenke et al. 2017, Eq. 5): ω / (Δ² + ξ), with ω the path
    integral −Σ g·δθ over the task and Δ the task's total parameter change."""
    return w / (delta ** 2 + xi)


def rwalk_score(w: torch.Tensor, fisher: torch.Tensor, delta: torch.Tensor, xi: float) -> torch.Tensor:
    """RWalk's per-task parameter score (Chaudhry et al. 2018), in the CTP code's form:
    relu(ω / (F·Δ² + ξ)) — negative scores are set to zero ("we care about positive influence")."""
    return torch.relu(w / (fisher * delta ** 2 + xi))
