"""RWalk (Chaudhry et al. 2018), as the CTP code's baseline: EWC's Fisher plus an SI-style path
score.

- F: EWC's empirical Fisher at each task end, reduced across ranks, merged by
  F ← α F_old + (1 − α) F_new, α = t/(t+1).
- s: during each task the path integral ω = −Σ g_unreg·δθ (SI's `PathIntegral`); at the task end
  s_new = relu(ω / (F·Δ² + ξ)) and s ← (s_old + s_new)/2 (s_old = 0 before the first task).
- penalty: λ Σ (F + s)(θ − θ*)² (no ½), reported as the terms "ewc" (λ Σ F(θ−θ*)²) and "rwalk"
  (λ Σ s(θ−θ*)²). One backward per step, as `SI`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.fields import ranged
from vlcp.errors import ConfigError
from vlcp.losses.regularizers import ewc_penalty, pad_rows, quadratic_penalty_grad, rwalk_score
from vlcp.methods import register
from vlcp.methods.ewc import EWC, trainable
from vlcp.methods.si import PathIntegral


@register
class RWalk(EWC):
    name = "rwalk"

    @dataclass
    class Config(EWC.Config):
        ewc_lambda: float = ranged(1000.0, ge=0)   # CTP code: λ = 1000 on Σ (F + s)(θ − θ*)²
        fisher_merge: str = "average"   # CTP code: α = t/(t+1)
        rwalk_xi: float = ranged(0.1, gt=0)   # damping ξ; CTP code: 0.1

        def __post_init__(self):
            super().__post_init__()
            if self.half:   # after_backward's unregularised gradient assumes the penalty without ½
                raise ConfigError("half: RWalk's penalty λ Σ (F + s)(θ − θ*)² has no ½ (the CTP code)")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.scores: dict[str, torch.Tensor] | None = None
        self.rwalk_path = PathIntegral()

    def _active(self) -> bool:
        return bool(self.fisher) and self.cfg.ewc_lambda > 0

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        self.rwalk_path.begin(trainable(model))

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx)   # base + "ewc" = λ Σ F (θ − θ*)²
        if self._active() and self.scores:
            terms["rwalk"] = self.cfg.ewc_lambda * ewc_penalty(trainable(model), self.anchors, self.scores)
        return terms

    def after_backward(self, model, ctx):
        super().after_backward(model, ctx)
        params = trainable(model)
        pen = None
        if self._active():
            pen = quadratic_penalty_grad(params, self.anchors, self.fisher)
            if self.scores:
                for n, g in quadratic_penalty_grad(params, self.anchors, self.scores).items():
                    pen[n] = pen[n] + g if n in pen else g
            pen = {n: self.cfg.ewc_lambda * g for n, g in pen.items()}
        self.rwalk_path.record_grad(params, pen)

    def after_step(self, model, batch, ctx):
        super().after_step(model, batch, ctx)
        self.rwalk_path.record_step(trainable(model))

    def after_task(self, model, ctx):
        super().after_task(model, ctx)   # merged Fisher, anchors ← θ
        params = trainable(model)
        w, delta = self.rwalk_path.end(params)
        new = {n: rwalk_score(w[n], pad_rows(self.fisher[n], w[n]), delta[n], self.cfg.rwalk_xi) for n in w}
        old = self.scores or {}
        self.scores = {n: (s + (pad_rows(old[n], s) if n in old else 0)) / 2 for n, s in new.items()}

    def state_dict(self):
        return super().state_dict() | {"scores": self.scores}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.scores = state["scores"]
