"""EWC (Kirkpatrick et al. 2017) and online EWC (Schwarz et al. 2018): a quadratic penalty
towards the parameters after the previous task, weighted by the diagonal empirical Fisher F.

- F: the mean over batches of the squared gradient of the method's base loss (the next method's
  in the MRO, so it works for any model), at the end of each task, over the trainable parameters
  (a parameter that grew rows, a token embedding, is zero-padded); under DDP the global batch's.
  Samples: `fisher_batches` random batches of `fisher_batch_size`, or with `fisher_samples` > 0
  one pass over min(`fisher_samples`, the task's pairs) in full batches (the last wraps around).
- Merge across tasks (`fisher_merge`): "online" F ← γ F_old + F_new; "average"
  F ← α F_old + (1 − α) F_new, α = t/(t+1), the mean of the per-task Fishers.
- Penalty: λ Σ F (θ − θ*)², or (λ/2) Σ F (θ − θ*)² with `half` (Kirkpatrick et al.'s Eq. 3;
  a subclass may set `penalty_factor`).

`gradient_importance` / `empirical_fisher` are the importance loops EWC, MAS, RWalk and AFEC
share: the mean over batches of the current task of a statistic of the gradient.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import torch

from vlcp.fields import check_ranges, ranged
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


def task_pass(ctx: TaskContext, samples: int, batch_size: int) -> list[torch.Tensor]:
    """The batches of one pass over min(`samples`, |pool|) of the task's pairs (`ctx.pool`) in a
    random order (`ctx.generator`): ceil(n / batch_size) full batches, the last one completed
    from the order's start (FoMo's task data is looped, so its Fisher batches are all full)."""
    n = min(samples, len(ctx.pool))
    if n == 0:
        return []
    order = ctx.pool[torch.randperm(len(ctx.pool), generator=ctx.generator)[:n]]
    k = -(-n // batch_size)
    return list(order.repeat(-(-k * batch_size // n))[:k * batch_size].split(batch_size))


def gradient_importance(model: torch.nn.Module, objective: Callable[[torch.nn.Module, Batch], torch.Tensor],
                        ctx: TaskContext, batches: int, batch_size: int,
                        stat: Callable[[torch.Tensor], torch.Tensor], samples: int = 0) -> dict[str, torch.Tensor]:
    """Mean over `batches` random batches of the current task (`ctx.pool`, drawn with
    `ctx.generator`, materialised with augmentation) of stat(∂objective/∂θ), per trainable
    parameter; `samples` > 0: over the batches of `task_pass(ctx, samples, batch_size)` instead.
    Under DDP the gradient is the global batch's (the ranks' gradients of their
    slices, averaged in one all-reduce a batch) before `stat`, so N processes get one process's
    importance (a mean of per-rank squares would not be). Parameters the objective does not
    reach get 0."""
    model = unwrap(model)
    params = trainable(model)
    out = {n: torch.zeros_like(p) for n, p in params.items()}
    passes = task_pass(ctx, samples, batch_size) if samples > 0 else None
    batches = len(passes) if passes is not None else batches
    for b in range(batches):
        if passes is not None:
            ids = passes[b]
        else:
            ids = ctx.pool[torch.randint(0, len(ctx.pool), (batch_size,), generator=ctx.generator)]
        loss = objective(model, ctx.materialize(ids))
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        for (n, _), g in zip(params.items(), mean_over_ranks(list(grads), list(params.values()))):
            out[n] += stat(g) / batches
    return out


def empirical_fisher(model: torch.nn.Module, base_loss: Callable, ctx: TaskContext, batches: int,
                     batch_size: int, samples: int = 0) -> dict[str, torch.Tensor]:
    """The diagonal empirical Fisher: mean over batches of (∂L/∂θ)², L the sum of the terms
    `base_loss(model, batch, ctx)` returns (a method's objective without its penalty); the
    batches as `gradient_importance` draws them."""
    return gradient_importance(model, lambda m, b: sum(base_loss(m, b, ctx).values()), ctx, batches,
                               batch_size, torch.square, samples)


@register
class EWC(Method):
    name = "ewc"
    penalty_factor: ClassVar[float] = 1.0   # the penalty is penalty_factor · λ Σ F (θ − θ*)²

    @dataclass
    class Config:
        ewc_lambda: float = ranged(1000.0, ge=0)   # CLFM's oEWC: 1000 (CTP's EWC: 5000 on Σ/2)
        ewc_gamma: float = ranged(1.0, ge=0, le=1)   # online decay of older importances ("online" merge)
        fisher_batches: int = ranged(8, ge=1)
        fisher_batch_size: int = ranged(128, ge=1)
        fisher_merge: str = "online"  # "online" (γ F_old + F_new) | "average" (CTP: α = t/(t+1))
        half: bool = False            # penalty (λ/2) Σ F (θ − θ*)² (FoMo's code, Kirkpatrick et al.); False: λ Σ (CLFM)
        fisher_samples: int = ranged(0, ge=0)   # > 0: F from one pass over up to this many of the task's
        #   pairs (FoMo: 50,000) in full batches of fisher_batch_size; 0: fisher_batches random batches

        def __post_init__(self):
            check_ranges(self)
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
            factor = self.penalty_factor * (0.5 if self.cfg.half else 1.0)
            terms["ewc"] = factor * self.cfg.ewc_lambda * ewc_penalty(trainable(model), *self.support)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        base_loss = super(EWC, self).loss  # the base objective, without the penalty
        fisher = empirical_fisher(model, base_loss, ctx, self.cfg.fisher_batches, self.cfg.fisher_batch_size,
                                  self.cfg.fisher_samples)
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
