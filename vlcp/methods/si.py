"""SI, Synaptic Intelligence (Zenke et al. 2017): a path-integral importance Ω and the penalty
λ Σ Ω (θ − θ*)² (no ½) from task 1 on, θ* the parameters at the end of the previous task.

During every task each parameter accumulates ω, by `path`:
- `exact` (default): the path integral ω ← ω − g·δθ, g the gradient of the unregularised loss
  (one backward: `after_backward` subtracts the penalty's gradient 2λΩ(θ − θ*) before clipping),
  δθ the step's actual update;
- `lr_grad2`: ω ← ω + lr·g², g the total loss's clipped gradient (equals −g·δθ for plain SGD).
At the task's end Ω ← Ω + ω / (Δ² + ξ), Δ the task's change of the parameter, and ω is reset.
Constants: `si_lambda` (λ), `si_xi` (ξ).

`PathIntegral` is the running ω shared with RWalk. ω and the per-step snapshots live within a
task (checkpoints fall at task boundaries, where ω is zero); Ω and θ* are saved.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.fields import check_ranges, ranged
from vlcp.errors import ConfigError
from vlcp.losses.regularizers import add_importance, ewc_penalty, pad_rows, quadratic_penalty_grad, si_importance
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.methods.ewc import trainable

SI_PATHS = ("exact", "lr_grad2")


class PathIntegral:
    """SI's running path integral over one task: ω = −Σ_steps g_unreg · δθ per parameter.

    `begin` at the task start, `record_grad` after the backward (before the optimizer step:
    takes g_unreg = θ.grad − the given penalty gradient, and snapshots θ), `record_step` after
    the optimizer step (ω −= g_unreg · (θ − snapshot)), `end` at the task end (returns ω and the
    task's change Δ = θ − θ_start, and resets). `record_lr_grad2` (after the optimizer step,
    instead of the two `record_*`) accumulates FoMo's ω += lr·g² instead."""

    def __init__(self):
        self.start: dict[str, torch.Tensor] = {}
        self.w: dict[str, torch.Tensor] = {}
        self._grad: dict[str, torch.Tensor] = {}
        self._prev: dict[str, torch.Tensor] = {}
        self._live: list[str] = []   # the parameters recorded since the last step

    def begin(self, params: dict[str, torch.Tensor]) -> None:
        self.start = {n: p.detach().clone() for n, p in params.items()}
        self.w = {n: torch.zeros_like(p) for n, p in params.items()}
        self._grad, self._prev, self._live = {}, {}, []

    @torch.no_grad()
    def record_grad(self, params: dict[str, torch.Tensor], penalty_grad: dict[str, torch.Tensor] | None = None) -> None:
        penalty_grad = penalty_grad or {}
        self._live = []
        for n, p in params.items():
            if p.grad is None or n not in self.w:
                continue
            if n not in self._grad:   # buffers kept across steps (no per-step allocation)
                self._grad[n], self._prev[n] = torch.empty_like(p), torch.empty_like(p)
            self._grad[n].copy_(p.grad)
            if n in penalty_grad:
                self._grad[n].sub_(penalty_grad[n])
            self._prev[n].copy_(p)
            self._live.append(n)

    @torch.no_grad()
    def record_step(self, params: dict[str, torch.Tensor]) -> None:
        for n in self._live:
            self.w[n].addcmul_(self._grad[n], params[n] - self._prev[n], value=-1)
        self._live = []

    @torch.no_grad()
    def record_lr_grad2(self, params: dict[str, torch.Tensor], lr: float) -> None:
        """FoMo's (mammoth's) SI: ω += lr · θ.grad² (the gradient as the optimizer sees it)."""
        for n, p in params.items():
            if p.grad is not None and n in self.w:
                self.w[n].addcmul_(p.grad, p.grad, value=lr)

    @torch.no_grad()
    def end(self, params: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        w = {n: pad_rows(self.w[n], params[n]) for n in self.w if n in params}
        delta = {n: params[n].detach() - pad_rows(self.start[n], params[n]) for n in w}
        self.start, self.w, self._grad, self._prev, self._live = {}, {}, {}, {}, []
        return w, delta


@register
class SI(Method):
    name = "si"

    @dataclass
    class Config:
        si_lambda: float = ranged(1.0, ge=0)   # penalty weight; CTP code: λ = 1; FoMo code: c = 0.5
        si_xi: float = ranged(0.1, gt=0)       # damping ξ; CTP code: 0.1; FoMo code: 1
        path: str = "exact"                    # ω: "exact" (CTP: −Σ g_unreg·δθ) | "lr_grad2" (FoMo: Σ lr·g²)

        def __post_init__(self):
            check_ranges(self)
            if self.path not in SI_PATHS:
                raise ConfigError(f"path: must be one of {', '.join(SI_PATHS)}, got {self.path!r}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.omega: dict[str, torch.Tensor] | None = None
        self.anchors: dict[str, torch.Tensor] = {}
        self.si_path = PathIntegral()
        self._opt: torch.optim.Optimizer | None = None   # the task's optimizer (its LR, for "lr_grad2")

    def _active(self) -> bool:
        return bool(self.omega) and self.cfg.si_lambda > 0

    def make_optimizer(self, model, cfg):
        self._opt = super().make_optimizer(model, cfg)
        return self._opt

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        self.si_path.begin(trainable(model))

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx)
        if self._active():
            terms["si"] = self.cfg.si_lambda * ewc_penalty(trainable(model), self.anchors, self.omega)
        return terms

    def after_backward(self, model, ctx):
        super().after_backward(model, ctx)
        if self.cfg.path != "exact":
            return
        params = trainable(model)
        pen = None
        if self._active():
            grads = quadratic_penalty_grad(params, self.anchors, self.omega)
            pen = {n: self.cfg.si_lambda * g for n, g in grads.items()}
        self.si_path.record_grad(params, pen)

    def after_step(self, model, batch, ctx):
        super().after_step(model, batch, ctx)
        if self.cfg.path == "exact":
            self.si_path.record_step(trainable(model))
        else:   # the step's gradient after clipping (the loop clips before the optimizer step) and its LR
            self.si_path.record_lr_grad2(trainable(model), self._opt.param_groups[0]["lr"])

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        self._opt = None
        params = trainable(model)
        w, delta = self.si_path.end(params)
        new = {n: si_importance(w[n], delta[n], self.cfg.si_xi) for n in w}
        self.omega = add_importance(self.omega, new)
        self.anchors = {n: p.detach().clone() for n, p in params.items()}

    def state_dict(self):
        return super().state_dict() | {"omega": self.omega, "anchors": self.anchors}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.omega, self.anchors = state["omega"], state["anchors"]
