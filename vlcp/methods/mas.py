"""MAS, Memory Aware Synapses (Aljundi et al. 2018), as the CTP code's baseline.

At the end of each task a parameter's importance is the mean over `importance_batches` training
batches of |∂E/∂θ|, E the sum of the batch-mean L2 norms (not squared) of the model's
unnormalised image, text (and, with a fusion encoder, multi-modal) features. It is merged across
tasks as Ω ← α Ω_old + (1 − α) Ω_new, α = t/(t+1), reduced across DDP ranks; from task 1 on the
loss adds λ/2 · Σ Ω (θ − θ*)².
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.fields import check_ranges, ranged
from vlcp.losses.regularizers import ewc_penalty, merge_average
from vlcp.methods import register
from vlcp.methods.base import Batch, Method
from vlcp.methods.ewc import gradient_importance, trainable
from vlcp.train.distributed import unwrap


def output_energy(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """MAS's objective on a batch (the CTP code's): Σ over the unnormalised image, text (and,
    with `encode_multimodal`, multi-modal) features of the batch mean of their L2 norms."""
    model = unwrap(model)
    feats = [model.encode_image(batch.images, normalize=False), model.encode_text(batch.tokens, normalize=False)]
    if hasattr(model, "encode_multimodal"):
        feats.append(model.encode_multimodal(batch.images, batch.tokens, normalize=False))
    return sum(f.float().norm(p=2, dim=-1).mean() for f in feats)


@register
class MAS(Method):
    name = "mas"

    @dataclass
    class Config:
        mas_lambda: float = ranged(1.0, ge=0)   # CTP code: 1 (on Σ Ω(θ−θ*)²/2)
        importance_batches: int = ranged(8, ge=1)
        importance_batch_size: int = ranged(128, ge=1)

        def __post_init__(self):
            check_ranges(self)

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.importance: dict[str, torch.Tensor] | None = None
        self.anchors: dict[str, torch.Tensor] = {}

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx)
        if self.importance and self.cfg.mas_lambda:
            terms["mas"] = self.cfg.mas_lambda / 2 * ewc_penalty(trainable(model), self.anchors, self.importance)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        new = gradient_importance(model, output_energy, ctx, self.cfg.importance_batches,
                                  self.cfg.importance_batch_size, torch.abs)
        self.importance = merge_average(self.importance, new, ctx.task)
        self.anchors = {n: p.detach().clone() for n, p in trainable(model).items()}

    def state_dict(self):
        return super().state_dict() | {"importance": self.importance, "anchors": self.anchors}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.importance, self.anchors = state["importance"], state["anchors"]
