"""SI, Synaptic Intelligence (Zenke et al. 2017), in the two forms this project's papers run,
one method with documented settings (`path` and the constants):

- the CTP study (`path: exact`, the default; KevinLight831/CTP train/train_SI.py): during every
  task (task 0 included) each parameter accumulates the path integral ω ← ω − g·δθ, with g the
  gradient of the *unregularised* loss at the step and δθ the step's actual update (after
  clipping, weight decay and the optimizer). Constants: λ = 1, ξ = 0.1.
- the FoMo-in-Flux study (params.yaml `fomo-si`): its paper's text (App. A.2: ω "the running
  sum of the product between gradient g_k(s) and parameter update θ'_k(s)") is the path
  integral, `path: exact`; its code (`path: lr_grad2`; ExplainableML/fomo_in_flux
  continual_lib/si.py, mammoth-derived) accumulates ω ← ω + lr·g² each step, g the gradient of
  the *total* (regularised) loss after clipping, lr the step's learning rate. The text wins (a
  deviation entry lists the code's form, still `path: lr_grad2`). Constants, which the text does
  not give, from the code: c = 0.5 (`si_lambda`), ξ = 1 (`si_xi`).

Both: at the end of the task Ω ← Ω + ω / (Δ² + ξ), Δ the task's total change of the parameter,
and ω is reset; from task 1 on the loss adds λ Σ Ω (θ − θ*)² (no ½, as both codes), θ* the
parameters at the end of the previous task.

Differences from the CTP code (`exact`):
- the unregularised gradient comes from one backward: the loop's backward includes the
  penalty, and `after_backward` subtracts its analytic gradient 2λΩ(θ − θ*) before clipping
  (the CTP code runs a second forward and backward per step for t ≥ 1: 2× the cost; here
  `extra_cost()` is 0);
- Ω is not clamped at zero (neither is it in the CTP code nor in Zenke et al.'s code).
Differences from the FoMo code (`lr_grad2`): its penalty and Ω live on the CPU over one flat
parameter vector; here per parameter on the model's device. It skips a step's ω update when the
gradient has a NaN; the loop here stops on a non-finite loss instead. FoMo's paper text (its
App. A.2) describes ω as the running sum of gradient × parameter update (the `exact` path, which
the FoMo study runs); its code accumulates lr·g², which equals −g·δθ only for plain SGD.

`PathIntegral` is the running ω shared with RWalk. ω, the task's start parameters and the
per-step snapshots are transient within a task (checkpoints are taken at task boundaries, where
ω is zero); Ω and θ* are saved.
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
