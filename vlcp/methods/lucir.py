"""LUCIR (Hou et al., CVPR 2019) as the CTP paper compares it (Zhu et al., ICCV 2023, Table 1
and supplementary B.2; CTP's train_LUCIR.py): MoF's herding exemplar buffer (`mof.py`) +
UCIR's less-forget feature distillation (`ucir.py`: 1 − cosine between the previous and the
current model's normalised image and text features of every batch sample) + soft MLM-logit
distillation to the previous model (`vlcp.losses.soft_distill`, T = 1, on the masked positions)
when the batch has MLM inputs (ALBEF), on top of the shared base loss (contrastive + MLM).

Composed, not copied: `LUCIR(MoF, UCIR)`; the MRO is LUCIR → MoF → ExemplarReplay → UCIR →
TeacherER → ER, so MoF supplies the buffer (its `TaskQuotaBuffer` replaces ER's reservoir) and
UCIR the losses; LUCIR only adds the MLM term (`distill_terms`) and its weighting.

LUCIR's cosine normalisation: LUCIR replaces the last linear layer by a CosineLinear
(normalised weight and input, learnable scale σ initialised to 1); CTP's code builds its LUCIR
model with ALBEF's image/text projections as CosineLinear (KevinLight831/CTP,
models/clip_pretrain.py, `mode == 'LUCIR'`), so it trains every task, task 0 included, with
them. Here `prepare_model` swaps a model's `vision_proj` / `text_proj` (ALBEF's) for
`vlcp.models.albef.CosineLinear` once per run; each takes the Linear's weight (our ALBEF starts
from a trained initialisation, CTP's projections start random for every method) and drops its
bias; σ = 1. The features are L2-normalised after the projection (as in the CTP code), so σ
cancels out of every loss: it is a parameter that trains nothing, as in the CTP code. A model
without those layers (open_clip's CLIP: its projections are matrices inside the towers) is
left as it is.

Paper constants (CTP code): buffer 10,000 pairs (≈1%; our default `buffer_size` 200); loss =
ITA + MLM + 1·(cosine distillation) + 1·(MLM distillation, T = 1): `lambda_base` = 1 with a
constant weight (`adaptive_lf` = False; True gives UCIR's λ_base·sqrt(n_old/n_new)),
`mlm_distill_weight` = 1. UCIR's margin ranking (inter-class separation) is off by default
(`mr_weight` = 0): CTP's supplementary says it "cannot be re-implemented because there is no
class label"; `mr_weight` > 0 adds IncCLIP's adaptation of it (each replayed image's own text
must beat its k hardest in-batch texts by `margin`).

What differs from the CTP code, and why:
- Distillation on the final normalised features (UCIR's less-forget constraint), not on the
  encoders' token hidden states; CTP's `torch.cosine_similarity` on [B, L, D] used the default
  dim = 1, i.e. compared along the token axis, which looks like a bug. We do not reproduce it.
- The buffer as MoF (see `mof.py`: best-ranked exemplars kept on reduce, compute-matched replay
  fraction instead of dataset concatenation).
- The CosineLinear projections start from the initialisation's Linear weights (see above).
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
