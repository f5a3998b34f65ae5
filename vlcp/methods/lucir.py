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
(normalised weight and input, learnable scale σ); CTP swapped ALBEF's image/text projections
for CosineLinear. Our models' contrastive features are already L2-normalised and scored by a
learnable logit scale, which is that change, so the model is used as is.

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
"""
from __future__ import annotations

from dataclasses import dataclass

from vlcp.errors import ConfigError
from vlcp.losses import soft_distill
from vlcp.methods import register
from vlcp.methods.mof import MoF
from vlcp.methods.ucir import UCIR


@register
class LUCIR(MoF, UCIR):
    name = "lucir"

    @dataclass
    class Config(MoF.Config, UCIR.Config):
        lambda_base: float = 1.0          # CTP: the cosine distillation enters with weight 1
        adaptive_lf: bool = False         # True: UCIR's λ_base·sqrt(n_old/n_new)
        mr_weight: float = 0.0            # CTP: no inter-class (margin ranking) term
        mlm_distill_weight: float = 1.0   # CTP: MLM distillation with weight 1, T = 1

        def __post_init__(self):
            super().__post_init__()
            if self.mlm_distill_weight < 0:
                raise ConfigError(f"mlm_distill_weight: must be >= 0, got {self.mlm_distill_weight}")

    def lf_weight(self, ctx) -> float:
        return super().lf_weight(ctx) if self.cfg.adaptive_lf else self.cfg.lambda_base

    def distill_terms(self, out, old, batch, ctx) -> dict:
        terms = super().distill_terms(out, old, batch, ctx)
        if batch.mlm_labels is not None and self.cfg.mlm_distill_weight:
            terms["mlm_kd"] = self.cfg.mlm_distill_weight * soft_distill(out.mlm_logits, old.mlm_logits)
        return terms
