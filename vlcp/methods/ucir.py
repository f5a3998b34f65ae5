"""UCIR (Hou et al., CVPR 2019), adapted to the contrastive objective as IncCLIP compares it:
ER's reservoir + CLIP loss + the less-forget constraint (1 - cosine between the previous and
current model's image and text features of every batch sample, adaptive weight
λ_base·sqrt(n_old/n_new)) + the margin ranking loss on replayed pairs (each replayed image's own
text must beat its k hardest in-batch negatives by `margin`). CLIP's features are already
cosine-normalised, which is UCIR's classifier change."""
from dataclasses import dataclass

from vlcp.errors import ConfigError
from vlcp.losses import clip_loss, cosine_distill, margin_ranking
from vlcp.methods import register
from vlcp.methods.teacher import TeacherER


@register
class UCIR(TeacherER):
    name = "ucir"

    @dataclass
    class Config(TeacherER.Config):
        lambda_base: float = 5.0     # UCIR's CIFAR value
        margin: float = 0.5          # UCIR's m
        k: int = 2                   # UCIR's K hard negatives per replayed image
        mr_weight: float = 1.0

        def __post_init__(self):
            super().__post_init__()
            for f in ("lambda_base", "margin", "mr_weight"):
                if getattr(self, f) < 0:
                    raise ConfigError(f"{f}: must be >= 0, got {getattr(self, f)}")
            if self.k < 1:
                raise ConfigError(f"k: must be >= 1, got {self.k}")

    def loss(self, model, batch, ctx):
        img, txt, scale = model(batch.images, batch.tokens)[:3]
        terms = {"clip": clip_loss(img, txt, scale)}
        if self.old is None:
            return terms
        old_img, old_txt, _ = self.teacher(batch)
        lam = self.adaptive_weight(self.cfg.lambda_base, ctx)
        terms["lf"] = lam * (cosine_distill(img, old_img) + cosine_distill(txt, old_txt)) / 2
        if self.cfg.mr_weight:
            terms["mr"] = self.cfg.mr_weight * margin_ranking(img, txt, self.replayed(batch, ctx),
                                                              self.cfg.margin, self.cfg.k)
        return terms
