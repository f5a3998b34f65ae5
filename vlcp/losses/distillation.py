"""Distillation and generation losses (pure functions).

`cross_modal_kd` is IncCLIP's multi-modal knowledge distillation (its Eqs. 7-9): the previous
model's image→text and text→image distributions over the batch are targets for the current
model's, by KL divergence. `score_band_loss` is IncCLIP's margin loss for pseudo negative texts
(Eq. 1): it is zero while each image–text cosine lies in [s_min, s_max]."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def kl_rows(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(softmax(teacher) || softmax(student))."""
    return F.kl_div(F.log_softmax(student_logits, 1), F.log_softmax(teacher_logits, 1),
                    reduction="batchmean", log_target=True)


def cross_modal_kd(img: torch.Tensor, txt: torch.Tensor, old_img: torch.Tensor, old_txt: torch.Tensor,
                   scale: torch.Tensor, old_scale: torch.Tensor | float,
                   extra_txt: torch.Tensor | None = None, old_extra_txt: torch.Tensor | None = None) -> torch.Tensor:
    """(KL_i2t + KL_t2i) / 2 between the previous (teacher) and current (student) models on
    one batch of unit features. `extra_txt` (pseudo texts) join the image→text columns of both."""
    cols = txt if extra_txt is None else torch.cat([txt, extra_txt])
    old_cols = old_txt if old_extra_txt is None else torch.cat([old_txt, old_extra_txt])
    i2t = kl_rows(scale * img @ cols.T, old_scale * old_img @ old_cols.T)
    t2i = kl_rows(scale * txt @ img.T, old_scale * old_txt @ old_img.T)
    return (i2t + t2i) / 2


def score_band_loss(scores: torch.Tensor, s_min: float, s_max: float) -> torch.Tensor:
    """Mean of relu(s - s_max) + relu(s_min - s): pushes each score into [s_min, s_max]."""
    return (F.relu(scores - s_max) + F.relu(s_min - scores)).mean()
