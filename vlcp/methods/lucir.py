"""LUCIR (Hou et al., CVPR 2019) as the CTP paper compares it (Zhu et al., ICCV 2023, Table 1,
supp. B.2): MoF's herding exemplar buffer + UCIR's less-forget distillation (1 − cosine between
the previous and current model's normalised image and text features) + soft MLM-logit
distillation (T = 1, masked positions) when the batch has MLM inputs, on the shared base loss.

Composed as `LUCIR(MoF, UCIR)`: MoF supplies the buffer, UCIR the losses; LUCIR adds the MLM term
(`mlm_distill_weight`) and the weighting (`lambda_base`, constant unless `adaptive_lf`:
λ_base·sqrt(n_old/n_new)); `mr_weight` > 0 adds IncCLIP's margin ranking (off by default).
`prepare_model` swaps an ALBEF's `vision_proj` / `text_proj` for `vlcp.models.albef.CosineLinear`
(the Linear's weight, no bias, σ = 1; σ cancels after the L2 normalisation); a model without
those layers is left as it is.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.fields import ranged
from vlcp.losses import soft_distill
from vlcp.methods import register
from vlcp.methods.mof import MoF
from vlcp.methods.ucir import UCIR
from vlcp.models.albef import CosineLinear


@register
class LUCIR(MoF, UCIR):
    name = "lucir"

    @dataclass
    class Config(MoF.Config, UCIR.Config):
        lambda_base: float = ranged(1.0, ge=0)   # CTP: the cosine distillation enters with weight 1
        adaptive_lf: bool = False         # True: UCIR's λ_base·sqrt(n_old/n_new)
        mr_weight: float = ranged(0.0, ge=0)     # CTP: no inter-class (margin ranking) term
        mlm_distill_weight: float = ranged(1.0, ge=0)   # CTP: MLM distillation with weight 1, T = 1

    def prepare_model(self, model):
        super().prepare_model(model)
        for name in ("vision_proj", "text_proj"):
            layer = getattr(model, name, None)
            if isinstance(layer, torch.nn.Linear):
                setattr(model, name, CosineLinear.from_linear(layer))

    def lf_weight(self, ctx) -> float:
        return super().lf_weight(ctx) if self.cfg.adaptive_lf else self.cfg.lambda_base

    def distill_terms(self, out, old, batch, ctx) -> dict:
        terms = super().distill_terms(out, old, batch, ctx)
        if batch.mlm_labels is not None and self.cfg.mlm_distill_weight:
            terms["mlm_kd"] = self.cfg.mlm_distill_weight * soft_distill(out.mlm_logits, old.mlm_logits)
        return terms
