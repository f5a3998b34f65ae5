"""LwF, Learning without Forgetting (Li & Hoiem 2017), in the CTP code's form of the CTP paper's
baseline (supp. B.1): distillation from a frozen copy of the model as it entered the task.

From task 1 on the loss adds

- "lwf": per sample, the teacher's unnormalised projected image (and text) feature as a
  distribution over the feature dimensions, softmax(feature/τ) (`lwf_temperature`), distilled
  into the student's by KL, (KL_image + KL_text)/2 (`lwf_feature_kd`), weight `lwf_weight`;
- "lwf_mlm" (batches with MLM inputs, i.e. ALBEF): soft distillation of the teacher's MLM logits
  at the masked positions, T = 1 (`soft_distill`), weight `lwf_mlm_weight`.

The teacher is rebuilt at `before_task`, never saved; one extra forward per step.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from vlcp.fields import check_ranges, ranged
from vlcp.losses import lwf_feature_kd, soft_distill
from vlcp.methods import register
from vlcp.methods.base import Method, base_terms, frozen_copy, model_outputs
from vlcp.models import raw_features


@register
class LwF(Method):
    name = "lwf"

    @dataclass
    class Config:
        lwf_weight: float = ranged(1.0, ge=0)       # raw-feature distillation (over the feature dimensions)
        lwf_temperature: float = ranged(0.07, gt=0)  # τ of softmax(feature/τ); CTP code: its ITA temperature 0.07
        lwf_mlm_weight: float = ranged(1.0, ge=0)   # MLM logit distillation (models with an MLM head)
        lwf_mlm_temperature: float = ranged(1.0, gt=0)

        def __post_init__(self):
            check_ranges(self)

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.teacher: torch.nn.Module | None = None

    budget_probe_task = 1   # the teacher exists from the second task on

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        self.teacher = frozen_copy(model) if ctx.task > 0 else None

    def loss(self, model, batch, ctx):
        capture = raw_features(model, batch.tokens) if self.teacher is not None else contextlib.nullcontext({})
        with capture as raw:
            out = model_outputs(model, batch)
        if getattr(super().loss, "__func__", None) is Method.loss:
            terms = base_terms(model, batch, out)      # the plain base loss: reuse this forward
        else:
            terms = super().loss(model, batch, ctx)    # a composed objective (its own forward)
        if self.teacher is None:
            return terms
        with torch.no_grad(), raw_features(self.teacher, batch.tokens) as old_raw:
            old = model_outputs(self.teacher, batch)
        if self.cfg.lwf_weight:
            terms["lwf"] = self.cfg.lwf_weight * lwf_feature_kd(raw["image"], raw["text"], old_raw["image"],
                                                                old_raw["text"], self.cfg.lwf_temperature)
        if batch.mlm_input is not None and self.cfg.lwf_mlm_weight:
            terms["lwf_mlm"] = self.cfg.lwf_mlm_weight * soft_distill(out.mlm_logits, old.mlm_logits,
                                                                      self.cfg.lwf_mlm_temperature)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        self.teacher = None

    def extra_cost(self) -> float:
        return super().extra_cost() + 1 / 3
