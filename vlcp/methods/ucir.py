"""UCIR (Hou et al., CVPR 2019), adapted to the contrastive objective as IncCLIP compares it:
ER's reservoir + CLIP loss + the less-forget constraint (1 - cosine between the previous and
current model's image and text features of every batch sample, adaptive weight
λ_base·sqrt(n_old/n_new)) + the margin ranking loss on replayed pairs (each replayed image's own
text must beat its k hardest in-batch negatives by `margin`). CLIP's features are already
cosine-normalised, which is UCIR's classifier change. The base loss is the shared `base_terms`
(CLIP loss; + MLM for models with an MLM head); `distill_terms` is the extension point LUCIR
(`lucir.py`) builds on, and `lf_weight` its weighting."""
from dataclasses import dataclass

from vlcp.fields import ranged
from vlcp.losses import cosine_distill, margin_ranking
from vlcp.methods import register
from vlcp.methods.base import base_terms, model_outputs
from vlcp.methods.teacher import TeacherER


@register
class UCIR(TeacherER):
    name = "ucir"

    @dataclass
    class Config(TeacherER.Config):
        lambda_base: float = ranged(5.0, ge=0)   # UCIR's CIFAR value
        margin: float = ranged(0.5, ge=0)        # UCIR's m
        k: int = ranged(2, ge=1)                 # UCIR's K hard negatives per replayed image
        mr_weight: float = ranged(1.0, ge=0)

    def loss(self, model, batch, ctx):
        out = model_outputs(model, batch)
        terms = base_terms(model, batch, out)
        if self.old is None:
            return terms
        return terms | self.distill_terms(out, self.teacher_outputs(batch), batch, ctx)

    def lf_weight(self, ctx) -> float:
        """The less-forget weight: UCIR's adaptive λ_base·sqrt(n_old/n_new)."""
        return self.adaptive_weight(self.cfg.lambda_base, ctx)

    def distill_terms(self, out, old, batch, ctx) -> dict:
        """The terms against the previous model (`out`, `old`: the current and previous model's
        `model_outputs` on the batch). Subclasses add theirs after calling super()."""
        img, txt = out[0], out[1]
        terms = {"lf": self.lf_weight(ctx) * (cosine_distill(img, old[0]) + cosine_distill(txt, old[1])) / 2}
        if self.cfg.mr_weight:
            terms["mr"] = self.cfg.mr_weight * margin_ranking(img, txt, self.replayed(batch, ctx),
                                                              self.cfg.margin, self.cfg.k)
        return terms
