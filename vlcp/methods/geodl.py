"""GeoDL (Simon et al., "On Learning the Geodesic Path for Incremental Learning", CVPR 2021),
adapted to the contrastive objective as IncCLIP compares it: ER's reservoir + CLIP loss +
distillation along the geodesic flow between the previous and current model's feature
subspaces of each batch (image and text features alike; `vlcp.losses.geodesic_distill`), with
UCIR's adaptive weight λ_base·sqrt(n_old/n_new) as GeoDL uses it. The subspace dimension is a
config field (`dim`; GeoDL's choice depends on the feature size, ours is 8 of 128)."""
from dataclasses import dataclass

from vlcp.fields import ranged
from vlcp.losses import clip_loss, geodesic_distill
from vlcp.methods import register
from vlcp.methods.teacher import TeacherER


@register
class GeoDL(TeacherER):
    name = "geodl"

    @dataclass
    class Config(TeacherER.Config):
        lambda_base: float = ranged(5.0, ge=0)
        dim: int = ranged(8, ge=1)   # subspace dimension

    def loss(self, model, batch, ctx):
        img, txt, scale = model(batch.images, batch.tokens)[:3]
        terms = {"clip": clip_loss(img, txt, scale)}
        if self.old is not None:
            old_img, old_txt, _ = self.teacher(batch)
            lam = self.adaptive_weight(self.cfg.lambda_base, ctx)
            terms["geo"] = lam * (geodesic_distill(img, old_img, self.cfg.dim)
                                  + geodesic_distill(txt, old_txt, self.cfg.dim)) / 2
        return terms
