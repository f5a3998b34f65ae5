"""MAS, Memory Aware Synapses (Aljundi et al. 2018), as the CTP code's baseline (train_MAS.py).

At the end of each task the importance of each parameter is the mean over `importance_batches`
training batches of |∂E/∂θ|, where E is the squared L2 norm of the model's unnormalised outputs,
averaged over the batch: ‖image feature‖² + ‖text feature‖² (+ ‖multi-modal feature‖² for models
with a fusion encoder, `encode_multimodal`: ALBEF's fused [CLS]). It is merged across tasks as
the CTP code's EWC, Ω ← α Ω_old + (1 − α) Ω_new with α = t/(t+1), and reduced across DDP
ranks. From task 1 on the loss adds the CTP code's penalty λ/2 · Σ Ω (θ − θ*)².

Paper constants (CTP code): λ = 1, on Σ Ω(θ−θ*)²/2 (the ½ is kept so that λ means what it
means there).

Differences from the CTP code: E uses the *squared* norms, as Aljundi et al. define the
sensitivity (the CTP code differentiates the plain norms ‖·‖₂); the importance is reduced across
ranks; `importance_batches` batches instead of a full pass over the loader (as our EWC).
The CTP code, like most MAS implementations, takes |gradient| of the batch-mean E, not the mean
of per-sample |gradients| of Aljundi et al.; so does this one.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.errors import ConfigError
from vlcp.losses.regularizers import ewc_penalty, merge_average
from vlcp.methods import register
from vlcp.methods.base import Batch, Method
from vlcp.methods.ewc import gradient_importance, trainable
from vlcp.train.distributed import unwrap


def output_energy(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """MAS's objective on a batch: mean over the batch of the summed squared L2 norms of the
    unnormalised image, text (and, with `encode_multimodal`, multi-modal) features."""
    model = unwrap(model)
    feats = [model.encode_image(batch.images, normalize=False), model.encode_text(batch.tokens, normalize=False)]
    if hasattr(model, "encode_multimodal"):
        feats.append(model.encode_multimodal(batch.images, batch.tokens, normalize=False))
    return sum(f.float().pow(2).sum(-1).mean() for f in feats)


@register
class MAS(Method):
    name = "mas"

    @dataclass
    class Config:
        mas_lambda: float = 1.0          # CTP code: 1 (on Σ Ω(θ−θ*)²/2)
        importance_batches: int = 8
        importance_batch_size: int = 128

        def __post_init__(self):
            if self.mas_lambda < 0:
                raise ConfigError(f"mas_lambda: must be >= 0, got {self.mas_lambda}")
            if self.importance_batches < 1:
                raise ConfigError(f"importance_batches: must be >= 1, got {self.importance_batches}")
            if self.importance_batch_size < 1:
                raise ConfigError(f"importance_batch_size: must be >= 1, got {self.importance_batch_size}")

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
