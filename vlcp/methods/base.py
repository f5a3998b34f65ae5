"""The hook base every continual method builds on.

The loop (vlcp.run) calls `prepare_model` once, before a resume loads the checkpoint and before DDP
wraps the model (adapters, frozen towers: anything that changes the parameter set or which
parameters train). The loop (`vlcp.train.loop`) calls, per task: `before_task` → `make_optimizer` → for each step
(`make_batch` → `loss` → backward → `after_backward` → optimizer step → `after_step`) →
`after_task`. A method overrides only the hooks it needs; `state_dict`/`load_state_dict` carry
its state across a resume; `extra_cost` reports extra forward/backward passes per step (MAFs).
What the hooks receive (`TaskContext`, `Batch`, `model_outputs`) is the loop's, `vlcp.train.context`.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from vlcp.losses import clip_loss, mlm_loss
from vlcp.train.context import Batch, TaskContext, model_outputs
from vlcp.train.optim import make_optimizer


@dataclass
class NoArgs:
    """A method without fields of its own."""


def compose_configs(*bases: type) -> type:
    """One Config dataclass with the fields of every base (a method built from two: ER's
    buffer + CLL-CLIP's objectives), running each base's own validation."""
    def post_init(self):
        for b in bases:
            if hasattr(b, "__post_init__"):
                b.__post_init__(self)
    return dataclass(type("Config", bases, {"__post_init__": post_init}))


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A frozen, eval-mode copy of `model` (a distillation teacher, CTP's θc and θ(t-1))."""
    return copy.deepcopy(model).eval().requires_grad_(False)


def base_terms(model: torch.nn.Module, batch: Batch, out=None) -> dict[str, torch.Tensor]:
    """The base loss every method shares: the contrastive loss ("clip"; ALBEF's ITA) plus, for
    models with an MLM head, the masked-language-modelling loss ("mlm"). `out`: the batch's
    `model_outputs` when the caller already has them."""
    out = model_outputs(model, batch) if out is None else out
    terms = {"clip": clip_loss(out[0], out[1], out[2])}
    if batch.mlm_labels is not None:
        terms["mlm"] = mlm_loss(out.mlm_logits, batch.mlm_labels)
    return terms


class Method:
    name: ClassVar[str] = "base"
    Config: ClassVar[type] = NoArgs
    # what the method needs from the stream and the model (vlcp.run.requirements.CAPABILITIES); the loop
    # refuses a stream that does not supply it, naming both
    needs: ClassVar[frozenset[str]] = frozenset({"pixels"})
    # the task whose step a compute budget measures (vlcp.run.accounting.step_cost): 1 for a method whose
    # steps cost more from the second task on (a teacher's forward), else the first task's step is the cost
    budget_probe_task: ClassVar[int] = 0

    def __init__(self, cfg: Any = None, seed: int = 0):
        self.cfg = cfg if cfg is not None else self.Config()
        self.seed = seed

    # -- hooks ---------------------------------------------------------------------------
    def prepare_model(self, model: torch.nn.Module) -> None:
        """Once per run, in place, before the checkpoint loads and DDP wraps the model."""

    def before_task(self, model: torch.nn.Module, ctx: TaskContext) -> None:
        pass

    def make_batch(self, ids: torch.Tensor, ctx: TaskContext) -> Batch:
        return ctx.materialize(ids)

    def loss(self, model: torch.nn.Module, batch: Batch, ctx: TaskContext) -> dict[str, torch.Tensor]:
        return base_terms(model, batch)

    def make_optimizer(self, model: torch.nn.Module, cfg) -> torch.optim.Optimizer:
        """The task's optimizer (built after `before_task`); default AdamW."""
        return make_optimizer(model, cfg)

    def after_backward(self, model: torch.nn.Module, ctx: TaskContext) -> None:
        pass

    def after_step(self, model: torch.nn.Module, batch: Batch, ctx: TaskContext) -> None:
        pass

    def after_task(self, model: torch.nn.Module, ctx: TaskContext) -> None:
        pass

    # -- state and cost ------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    @classmethod
    def adds_loss_terms(cls) -> bool:
        """Whether the method's `loss` hook is its own, not the base's (`base_terms`): a step that
        accumulation over cached features (`train.accum_freq`) cannot serve."""
        return cls.loss is not Method.loss

    def extra_cost(self) -> float:
        """Extra forward+backward passes per step relative to plain fine-tuning."""
        return 0.0
