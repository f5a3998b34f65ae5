"""Optimizers: the loop's default AdamW and TEIR's per-row scaled optimizers.

TEIR (CLL-CLIP, eq. 5–6) rescales, for each row j of the token embedding, both the gradient and
the L2 weight decay by λ_j:  θ_j ← (1 − α·β·λ_j)·θ_j − α·λ_j·∇L(θ_j); with a momentum
optimizer "the scaling operation is still applied on β and ∇L directly". `RowScaled` does this
as a thin mixin over an unmodified torch optimizer (no forked torch code): before the wrapped
`step`, the row parameter's gradient is multiplied by `grad_scale` and its decoupled decay
θ ← θ·(1 − lr·wd·decay_scale) is applied; the row parameter's own group has weight_decay 0.
With `RowScaledSGD` (no moment normalisation) the gradient scale changes the step size, which
separates the gradient effect from the decay effect (Adam divides most of a constant gradient
scale out again).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from vlcp.errors import ConfigError

if TYPE_CHECKING:
    from vlcp.config import TrainCfg


def clip_gradients(parameters, max_norm: float, read: bool) -> torch.Tensor:
    """`torch.nn.utils.clip_grad_norm_` (the same total norm, coefficient and multiply) that skips the
    multiply by a coefficient of exactly 1 (the norm within `max_norm`) when `read`: x·1 = x, so the
    gradients are the same floats, one pass over them fewer. torch multiplies unconditionally because
    reading the coefficient waits for an accelerator's queue; pass `read` where that costs nothing (the
    CPU). Returns the total norm."""
    params = [p for p in parameters if p.grad is not None]
    total = torch.nn.utils.get_total_norm([p.grad for p in params])
    if not (read and torch.clamp(max_norm / (total + 1e-6), max=1.0).item() == 1.0):
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total


def decays(name: str, p: torch.Tensor) -> bool:
    """Decay matrices; not gains, biases, positional terms, logit scale, class tokens. (open_clip_train's
    rule decays the positional embeddings: it exempts only 1-D parameters, biases and the logit scale.)"""
    return not (p.ndim < 2 or "logit_scale" in name or "positional" in name or name.endswith("_token"))


def param_groups(model: torch.nn.Module, weight_decay: float, exclude=(), decay_all: bool = False) -> list[dict]:
    """A decay group and a no-decay group (`decays`); `decay_all`: every parameter decays
    (FoMo-in-Flux's code: torch's AdamW over all parameters, one weight decay)."""
    skip = {id(p) for p in exclude}
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad or id(p) in skip:
            continue
        (decay if decay_all or decays(n, p) else no_decay).append(p)
    return [g for g in ({"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0})
            if g["params"]]


def make_optimizer(model: torch.nn.Module, cfg: TrainCfg) -> torch.optim.Optimizer:
    """The loop's optimizer (`train.optimizer`): AdamW (β2, ε, decay and its scope `decay_all`
    from the config), or timm's LAMB (IncCLIP's: Adam's step rescaled per parameter tensor by the
    trust ratio ‖θ‖ / ‖step‖; same betas, eps and decay; the loop's `grad_clip` replaces LAMB's own
    clipping)."""
    groups = param_groups(model, cfg.weight_decay, decay_all=cfg.decay_all)
    if cfg.optimizer == "lamb":
        from timm.optim import Lamb
        return Lamb(groups, lr=cfg.lr, betas=(0.9, cfg.beta2), eps=cfg.adam_eps, max_grad_norm=None)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, cfg.beta2), eps=cfg.adam_eps, fused=True)


def require_adamw(cfg: TrainCfg, method: str, own: str) -> None:
    """For methods that build their own optimizer: train.optimizer must be left at adamw."""
    if cfg.optimizer != "adamw":
        raise ConfigError(f"train.optimizer: {method} builds its own optimizer ({own}); "
                          f"train.optimizer {cfg.optimizer!r} does not apply (leave it at adamw)")


class RowScaled:
    """Mixin: per-row gradient and decoupled weight-decay scales for one 2-D parameter.

    `row_param` must sit in its own param group with weight_decay 0; `row_decay` is its
    weight decay β; `grad_scale`/`decay_scale` are float [rows] (None = 1 for every row).

    A row whose gradient scale is 0 and that does not decay (decay scale 0, or no decay) never
    moves: its scaled gradient is 0 at every step, so from the fresh state of a task's optimizer
    its moments and update stay exactly 0. With TEIR that is every token the task does not use,
    most of the table, so the wrapped optimizer steps a copy of the other rows only and writes
    them back (the same arithmetic row by row: the same result as stepping the whole table)."""

    def __init__(self, params, *args, row_param: torch.Tensor, row_decay: float = 0.0,
                 grad_scale: torch.Tensor | None = None, decay_scale: torch.Tensor | None = None, **kwargs):
        self.row_param, self.row_decay = row_param, row_decay
        # (not `grad_scale`: torch's optimizers read that attribute for AMP's GradScaler)
        self.row_grad_scale, self.row_decay_scale = grad_scale, decay_scale
        self.live, self.rows = None, row_param      # rows: the tensor the wrapped optimizer steps
        if grad_scale is not None and (decay_scale is not None or not row_decay):
            frozen = (grad_scale == 0) & ((decay_scale == 0) if row_decay else True)
            if frozen.any():
                self.live = (~frozen).nonzero().squeeze(1).to(row_param.device)
                self.rows = torch.nn.Parameter(row_param.detach()[self.live].clone())
                groups = list(params)
                groups = groups if groups and isinstance(groups[0], dict) else [{"params": groups}]
                params = [dict(g, params=[self.rows if q is row_param else q for q in g["params"]]) for g in groups]
                self.row_grad_scale = grad_scale[self.live.cpu()]
                self.row_decay_scale = decay_scale[self.live.cpu()] if decay_scale is not None else None
        super().__init__(params, *args, **kwargs)
        self._row_group = next(g for g in self.param_groups if any(p is self.rows for p in g["params"]))
        if self._row_group["weight_decay"]:
            raise ValueError("RowScaled: the row parameter's group must have weight_decay 0")

    @torch.no_grad()
    def step(self, closure=None):
        p = self.rows
        if self.live is not None:       # the live rows, as the table has them now
            p.copy_(self.row_param.index_select(0, self.live))
            g = self.row_param.grad
            p.grad = g.index_select(0, self.live) if g is not None else None
        if p.grad is not None and self.row_grad_scale is not None:
            p.grad.mul_(self.row_grad_scale.to(p.grad)[:, None])
        if self.row_decay:
            shrink = self._row_group["lr"] * self.row_decay
            p.mul_(1 - shrink * (self.row_decay_scale.to(p)[:, None] if self.row_decay_scale is not None else 1.0))
        out = super().step(closure)
        if self.live is not None:
            self.row_param.index_copy_(0, self.live, p)
        return out

    def zero_grad(self, set_to_none: bool = True):
        super().zero_grad(set_to_none)
        if self.live is not None and self.row_param.grad is not None:   # the table is not in a group
            if set_to_none:
                self.row_param.grad = None
            else:
                self.row_param.grad.zero_()


class RowScaledAdamW(RowScaled, torch.optim.AdamW):
    pass


class RowScaledSGD(RowScaled, torch.optim.SGD):
    pass


def teir_scales(used: torch.Tensor, counts: torch.Tensor, special: list[int] = ()) -> torch.Tensor:
    """TEIR's λ (eq. 6) per vocabulary row: 0 for tokens the current task does not use (old
    tokens), 1/(c+1) for tokens it uses that earlier tasks used c times (c = 0 for new tokens,
    so λ = 1), 0 for special tokens. `used`: bool [V]; `counts`: float [V]."""
    lam = used.float() / (counts.float() + 1)
    if len(special):
        lam[torch.as_tensor(list(special))] = 0.0
    return lam
