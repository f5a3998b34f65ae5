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
                fisher: dict[str, torch.Tensor]) -> torch.Tensor:
    """Σ_θ F·(θ − θ*)² over the parameters that have an anchor (no ½, as the CLFM code)."""
    total = None
    for name, p in params.items():
        if name not in anchors:
            continue
        a, f = pad_rows(anchors[name], p), pad_rows(fisher[name], p)
        term = (f * (p - a) ** 2).sum()
        total = term if total is None else total + term
    return total if total is not None else torch.zeros(())


def merge_fisher(old: dict[str, torch.Tensor] | None, new: dict[str, torch.Tensor], gamma: float) -> dict[str, torch.Tensor]:
    """Online EWC's running importance F ← γ·F_old + F_new (shapes padded to the new ones)."""
    if not old:
        return dict(new)
    return {n: (gamma * pad_rows(old[n], f) if n in old else 0) + f for n, f in new.items()}
