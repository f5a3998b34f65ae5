"""LwF, Learning without Forgetting (Li & Hoiem 2017), for contrastive vision-language models,
as the CTP code's baseline (train_LWF.py) with its distillation axis corrected.

A frozen copy of the model as it entered the task is the teacher. From task 1 on the loss adds
- "lwf": the teacher's in-batch similarity distributions distilled into the student's:
  (KL_i2t + KL_t2i)/2, each row an image's softmax over the batch's texts (and a text's over
  the images) at each model's own logit scale (`cross_modal_kd`), weight `lwf_weight`;
- "lwf_mlm" (only for batches with MLM inputs, i.e. ALBEF): soft distillation of the teacher's
  MLM logits at the masked positions, −Σ softmax(teacher/T)·log_softmax(student/T), T = 1
  (`soft_distill`), weight `lwf_mlm_weight`.

Paper constants: the CTP code has none (both weights 1, T = 1).

Differences from the CTP code: it applies the KL to softmax(feature/0.07) of each sample's own
256-d projected embedding, i.e. over the *feature* axis, treating embedding coordinates as class
logits; here the distributions are over the batch (which text matches this image), the
contrastive analogue of LwF's old-class outputs. The CTP code's LwF also writes no checkpoint
after task 0 (a logging guard); no such quirk here. The teacher is derived state, rebuilt at
`before_task` from the (checkpointed) model, so it is not saved. One extra forward per step
(`extra_cost` 1/3 of a forward+backward).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.errors import ConfigError
from vlcp.losses import cross_modal_kd, soft_distill
from vlcp.methods import register
from vlcp.methods.base import Method, base_terms, frozen_copy, model_outputs


@register
class LwF(Method):
    name = "lwf"

    @dataclass
    class Config:
        lwf_weight: float = 1.0        # in-batch similarity distillation
        lwf_mlm_weight: float = 1.0    # MLM logit distillation (models with an MLM head)
        lwf_mlm_temperature: float = 1.0

        def __post_init__(self):
            for f in ("lwf_weight", "lwf_mlm_weight"):
                if getattr(self, f) < 0:
                    raise ConfigError(f"{f}: must be >= 0, got {getattr(self, f)}")
            if not self.lwf_mlm_temperature > 0:
                raise ConfigError(f"lwf_mlm_temperature: must be > 0, got {self.lwf_mlm_temperature}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.teacher: torch.nn.Module | None = None

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        self.teacher = frozen_copy(model) if ctx.task > 0 else None

    def loss(self, model, batch, ctx):
        out = model_outputs(model, batch)
        if getattr(super().loss, "__func__", None) is Method.loss:
            terms = base_terms(model, batch, out)      # the plain base loss: reuse this forward
        else:
            terms = super().loss(model, batch, ctx)    # a composed objective (its own forward)
        if self.teacher is None:
            return terms
        with torch.no_grad():
            old = model_outputs(self.teacher, batch)
        if self.cfg.lwf_weight:
            terms["lwf"] = self.cfg.lwf_weight * cross_modal_kd(out[0], out[1], old[0], old[1], out[2], old[2])
        if batch.mlm_input is not None and self.cfg.lwf_mlm_weight:
            terms["lwf_mlm"] = self.cfg.lwf_mlm_weight * soft_distill(out.mlm_logits, old.mlm_logits,
                                                                      self.cfg.lwf_mlm_temperature)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        self.teacher = None

    def extra_cost(self) -> float:
        return super().extra_cost() + 1 / 3
