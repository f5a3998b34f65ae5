"""EWC (Kirkpatrick et al. 2017), online (Schwarz et al. 2018, oEWC): a quadratic penalty
λ Σ F (θ − θ*)² towards the parameters after the previous task, with F the diagonal empirical
Fisher (mean squared gradient of the method's base loss over `fisher_batches` training batches
of `fisher_batch_size` at the end of each task). Over the trainable parameters only; parameters
that grew rows (token embeddings) are zero-padded. Under DDP the squared gradient is the global
batch's, so N processes compute one process's Fisher (the CTP code computes it per rank and
never reduces it). Works for any model: the base loss is the next
method's in the MRO (CLIP's contrastive loss, ALBEF's ITA + MLM, or CLL-CLIP's objectives for
`cll-oewc`).

Fisher merge across tasks (`fisher_merge`):
- "online" (default, oEWC / CLFM): F ← γ F_old + F_new;
- "average" (the CTP code's EWC/MAS/RWalk/AFEC): F ← α F_old + (1 − α) F_new, α = t/(t+1) with
  t the index of the task just finished, i.e. the mean of the per-task Fishers.

The CTP code's EWC penalty is Σ F (θ−θ*)²/2 with λ = 5000 and its Fisher is a full pass over
the (augmented) training loader; here the penalty has no ½ (as CLFM) unless a subclass sets
`penalty_factor` (AFEC does, to keep CTP's constants), and F uses `fisher_batches` batches.

`gradient_importance` / `empirical_fisher` are the shared importance loops (EWC, MAS, RWalk,
AFEC): mean over random batches of the current task of a statistic of the gradient.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import torch

from vlcp.errors import ConfigError
from vlcp.losses.regularizers import ewc_penalty, merge_average, merge_fisher, support_rows
from vlcp.methods import register
from vlcp.methods.base import Batch, Method, TaskContext
from vlcp.train.distributed import mean_over_ranks, unwrap

FISHER_MERGES = ("online", "average")


def trainable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable parameters by name, named as in the unwrapped model (so importances and
    anchors taken in `after_task` match the names seen in `loss`, where the loop may pass a
    DDP wrapper)."""
    return {n: p for n, p in unwrap(model).named_parameters() if p.requires_grad}


def gradient_importance(model: torch.nn.Module, objective: Callable[[torch.nn.Module, Batch], torch.Tensor],
                        ctx: TaskContext, batches: int, batch_size: int,
                        stat: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, torch.Tensor]:
    """Mean over `batches` random batches of the current task (`ctx.pool`, drawn with
    `ctx.generator`, materialised with augmentation) of stat(∂objective/∂θ), per trainable
    parameter. Under DDP the gradient is the global batch's (the ranks' gradients of their
    slices, averaged in one all-reduce a batch) before `stat`, so N processes get one process's
    importance (a mean of per-rank squares would not be). Parameters the objective does not
    reach get 0."""
    model = unwrap(model)
    params = trainable(model)
    out = {n: torch.zeros_like(p) for n, p in params.items()}
    for _ in range(batches):
        ids = ctx.pool[torch.randint(0, len(ctx.pool), (batch_size,), generator=ctx.generator)]
        loss = objective(model, ctx.materialize(ids))
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        for (n, _), g in zip(params.items(), mean_over_ranks(list(grads), list(params.values()))):
            out[n] += stat(g) / batches
    return out


def empirical_fisher(model: torch.nn.Module, base_loss: Callable, ctx: TaskContext, batches: int,
                     batch_size: int) -> dict[str, torch.Tensor]:
    """The diagonal empirical Fisher: mean over batches of (∂L/∂θ)², L the sum of the terms
    `base_loss(model, batch, ctx)` returns (a method's objective without its penalty)."""
    return gradient_importance(model, lambda m, b: sum(base_loss(m, b, ctx).values()), ctx, batches,
                               batch_size, torch.square)


@register
class EWC(Method):
    name = "ewc"
    penalty_factor: ClassVar[float] = 1.0   # the penalty is penalty_factor · λ Σ F (θ − θ*)²

    @dataclass
    class Config:
        ewc_lambda: float = 1000.0   # CLFM's oEWC: 1000 (CTP's EWC: 5000 on Σ/2)
        ewc_gamma: float = 1.0       # online decay of older importances ("online" merge)
        fisher_batches: int = 8
        fisher_batch_size: int = 128
        fisher_merge: str = "online"  # "online" (γ F_old + F_new) | "average" (CTP: α = t/(t+1))

        def __post_init__(self):
            if self.ewc_lambda < 0 or not 0 <= self.ewc_gamma <= 1 or self.fisher_batches < 1:
                raise ConfigError(f"ewc_lambda >= 0, ewc_gamma in [0, 1], fisher_batches >= 1; got "
                                  f"{self.ewc_lambda}, {self.ewc_gamma}, {self.fisher_batches}")
            if self.fisher_batch_size < 1:
                raise ConfigError(f"fisher_batch_size: must be >= 1, got {self.fisher_batch_size}")
            if self.fisher_merge not in FISHER_MERGES:
                raise ConfigError(f"fisher_merge: must be one of {', '.join(FISHER_MERGES)}, got {self.fisher_merge!r}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.fisher: dict[str, torch.Tensor] | None = None
        self.anchors: dict[str, torch.Tensor] = {}
        self.support: tuple[dict, dict, dict] | None = None   # support_rows(anchors, fisher): the penalty's terms

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx)
        if self.fisher and self.cfg.ewc_lambda:
            if self.support is None:
                self.support = support_rows(self.anchors, self.fisher)
            terms["ewc"] = self.penalty_factor * self.cfg.ewc_lambda * ewc_penalty(trainable(model), *self.support)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        base_loss = super(EWC, self).loss  # the base objective, without the penalty
        fisher = empirical_fisher(model, base_loss, ctx, self.cfg.fisher_batches, self.cfg.fisher_batch_size)
        if self.cfg.fisher_merge == "average":
            self.fisher = merge_average(self.fisher, fisher, ctx.task)
        else:
            self.fisher = merge_fisher(self.fisher, fisher, self.cfg.ewc_gamma)
        self.anchors = {n: p.detach().clone() for n, p in trainable(model).items()}
        self.support = None

    def state_dict(self):
        return super().state_dict() | {"fisher": self.fisher, "anchors": self.anchors}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.fisher, self.anchors, self.support = state["fisher"], state["anchors"], None
