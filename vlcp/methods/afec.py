"""AFEC, Active Forgetting with synaptic Expansion-Convergence (Wang et al. 2021), as the CTP
code's baseline.

At the start of every task t ≥ 1 a copy θ_e of the model is trained on the current task alone,
without penalty, and its empirical Fisher F_e taken; the main model then trains with

    λ/2 · Σ F (θ − θ*)²  +  λ_e/2 · Σ F_e (θ − θ_e)²      (terms "ewc" and "afec")

F being EWC's Fisher at each task end, merged by the running average α = t/(t+1), reduced across
DDP ranks. θ_e trains for `expand_steps` if > 0, else round(`expand_fraction` × the task's step
budget), on the loop's schedule and the batches the main model then sees (the task's generator
is rewound). `extra_cost()` reports (expansion steps + F_e batches) per main step. θ_e and F_e
are rebuilt when a task starts, never saved.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import torch

from vlcp.fields import ranged
from vlcp.losses.regularizers import ewc_penalty
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.methods.ewc import EWC, empirical_fisher, trainable
from vlcp.train.distributed import all_reduce_mean, rank_and_size, unwrap


class _Unpenalised(Method):
    """The expanded model's trainer: a given objective, gradients averaged across DDP ranks
    (the copy is not wrapped in DDP)."""

    def __init__(self, objective):
        super().__init__()
        self.objective = objective

    def loss(self, model, batch, ctx):
        return self.objective(model, batch, ctx)

    def after_backward(self, model, ctx):
        if rank_and_size()[1] > 1:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.copy_(all_reduce_mean(p.grad))


@register
class AFEC(EWC):
    name = "afec"
    penalty_factor = 0.5   # the CTP code's Σ F (θ − θ*)²/2

    @dataclass
    class Config(EWC.Config):
        ewc_lambda: float = ranged(5000.0, ge=0)   # CTP code: λ = 5000
        fisher_merge: str = "average"   # CTP code: α = t/(t+1)
        afec_lambda: float = ranged(1.0, ge=0)     # λ_e; CTP code: 1
        expand_fraction: float = ranged(1.0, gt=0)   # expansion length as a fraction of the task's step budget
        expand_steps: int = ranged(0, ge=0)        # > 0: the expansion length in steps (overrides the fraction)

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.expanded: dict[str, torch.Tensor] | None = None         # θ_e
        self.expanded_fisher: dict[str, torch.Tensor] | None = None  # F_e
        self._ctx = None
        self._cost: float | None = None

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        self._ctx = ctx
        self.expanded = self.expanded_fisher = None

    def make_optimizer(self, model, cfg):
        """The expansion runs here, the first hook that sees the train config (lr, batch size,
        schedule, the step budget), before the main model's optimizer is built."""
        ctx = self._ctx
        if ctx is not None and ctx.task > 0 and self.cfg.afec_lambda > 0:
            steps = self.expansion_steps(ctx, cfg)
            self.expand(unwrap(model), ctx, cfg, steps)
            self._cost = (steps + self.cfg.fisher_batches) / max(1, self.task_steps(ctx, cfg))
        return super().make_optimizer(model, cfg)

    @staticmethod
    def task_steps(ctx, cfg) -> int:
        if ctx.steps is not None:   # the loop's budget for the task (every stream's, FoMo's MAFs budget included)
            return ctx.steps
        from vlcp.train import budget
        return budget.allocate_steps(cfg.steps, [len(i) for i in ctx.task_ids], cfg.steps_split)[ctx.task]

    def expansion_steps(self, ctx, cfg) -> int:
        if self.cfg.expand_steps:
            return self.cfg.expand_steps
        return max(1, round(self.cfg.expand_fraction * self.task_steps(ctx, cfg)))

    def expand(self, model: torch.nn.Module, ctx, cfg, steps: int) -> None:
        """Train a copy of `model` on the current task for `steps` steps without the penalty;
        keep its parameters θ_e and its empirical Fisher F_e. Leaves ctx's generator and step
        as they were."""
        from vlcp.train.loop import train_task

        base_loss = super(EWC, self).loss    # the objective without EWC's (or AFEC's) penalty
        state, step = ctx.generator.get_state(), ctx.step
        copy_ = copy.deepcopy(model)
        device = next(model.parameters()).device
        train_task(copy_, _Unpenalised(base_loss), ctx, steps, replace(cfg, progress=False), device,
                   desc="afec expansion")
        self.expanded_fisher = empirical_fisher(copy_, base_loss, ctx, self.cfg.fisher_batches,
                                                self.cfg.fisher_batch_size)
        self.expanded = {n: p.detach().clone() for n, p in trainable(copy_).items()}
        del copy_
        ctx.generator.set_state(state)
        ctx.step = step

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx)   # base + "ewc"
        if self.expanded and self.cfg.afec_lambda:
            terms["afec"] = self.penalty_factor * self.cfg.afec_lambda * ewc_penalty(
                trainable(model), self.expanded, self.expanded_fisher)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        self.expanded = self.expanded_fisher = self._ctx = None

    def extra_cost(self) -> float:
        """Expansion steps + F_e batches per main step (the last task's; before any expansion,
        the configured fraction)."""
        own = self._cost if self._cost is not None else self.cfg.expand_fraction
        return super().extra_cost() + own
