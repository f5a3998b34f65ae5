"""The shared base of the replay + distillation methods (IncCLIP, UCIR, GeoDL, Co2L): ER's
reservoir plus a frozen copy of the model as it entered the current task (the previous-step
model, the distillation teacher). Not a method itself; the teacher is derived state (rebuilt
from the checkpointed model at `before_task`), so it is not saved."""
from __future__ import annotations

import math

import torch

from vlcp.methods.base import frozen_copy, model_outputs
from vlcp.methods.er import ER


class TeacherER(ER):
    budget_probe_task = 1   # the previous model exists from the second task on
    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.old: torch.nn.Module | None = None

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        self.old = frozen_copy(model) if ctx.task > 0 else None

    @torch.no_grad()
    def teacher(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The previous-step model's (image features, text features, logit scale) on a batch."""
        return self.old(batch.images, batch.tokens)[:3]

    @torch.no_grad()
    def teacher_outputs(self, batch):
        """The previous-step model's full `model_outputs` on a batch (with `mlm_logits` at the
        batch's masked positions when it has MLM inputs)."""
        return model_outputs(self.old, batch)

    @staticmethod
    def replayed(batch, ctx) -> torch.Tensor:
        """bool [B]: which rows of the batch came from the buffer (ER puts them last)."""
        n_current = len(ctx.extras["current_ids"])
        mask = torch.zeros(len(batch.ids), dtype=torch.bool, device=batch.images.device)
        mask[n_current:] = True
        return mask

    @staticmethod
    def adaptive_weight(base: float, ctx) -> float:
        """UCIR's adaptive distillation weight, base · sqrt(n_old / n_new), with the numbers of
        training pairs of the previous tasks and of the current task standing in for classes."""
        n_old = sum(len(ctx.task_ids[t]) for t in range(ctx.task))
        return base * math.sqrt(n_old / max(1, len(ctx.task_ids[ctx.task])))
