"""EWC (Kirkpatrick et al. 2017), online (Schwarz et al. 2018, oEWC): a quadratic penalty
λ Σ F (θ − θ*)² towards the parameters after the previous task, with F the diagonal empirical
Fisher (mean squared gradient of the method's base loss over `fisher_batches` training batches
at the end of each task), merged online F ← γ F_old + F_new. Over the trainable parameters
only; parameters that grew rows (token embeddings) are zero-padded. Reduced across DDP ranks.
Works for any model: the base loss is the next method's in the MRO (CLIP's contrastive loss,
or CLL-CLIP's objectives for `cll-oewc`)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.errors import ConfigError
from vlcp.losses.regularizers import ewc_penalty, merge_fisher
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.train.distributed import all_reduce_mean


@register
class EWC(Method):
    name = "ewc"

    @dataclass
    class Config:
        ewc_lambda: float = 1000.0   # CLFM's oEWC: 1000
        ewc_gamma: float = 1.0       # online decay of older importances
        fisher_batches: int = 8

        def __post_init__(self):
            if self.ewc_lambda < 0 or not 0 <= self.ewc_gamma <= 1 or self.fisher_batches < 1:
                raise ConfigError(f"ewc_lambda >= 0, ewc_gamma in [0, 1], fisher_batches >= 1; got "
                                  f"{self.ewc_lambda}, {self.ewc_gamma}, {self.fisher_batches}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.fisher: dict[str, torch.Tensor] | None = None
        self.anchors: dict[str, torch.Tensor] = {}

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx)
        if self.fisher and self.cfg.ewc_lambda:
            params = {n: p for n, p in model.named_parameters() if p.requires_grad}
            terms["ewc"] = self.cfg.ewc_lambda * ewc_penalty(params, self.anchors, self.fisher)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        fisher = {n: torch.zeros_like(p) for n, p in params.items()}
        base_loss = super(EWC, self).loss  # the base objective, without the penalty
        for _ in range(self.cfg.fisher_batches):
            ids = ctx.pool[torch.randint(0, len(ctx.pool), (128,), generator=ctx.generator)]
            loss = sum(base_loss(model, ctx.materialize(ids), ctx).values())
            grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
            for (n, _), g in zip(params.items(), grads):
                if g is not None:
                    fisher[n] += g.detach() ** 2 / self.cfg.fisher_batches
        fisher = {n: all_reduce_mean(f) for n, f in fisher.items()}
        self.fisher = merge_fisher(self.fisher, fisher, self.cfg.ewc_gamma)
        self.anchors = {n: p.detach().clone() for n, p in params.items()}

    def state_dict(self):
        return super().state_dict() | {"fisher": self.fisher, "anchors": self.anchors}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.fisher, self.anchors = state["fisher"], state["anchors"]
