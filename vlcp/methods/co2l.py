"""Co2L (Cha et al., "Contrastive Continual Learning", ICCV 2021), adapted to CLIP as IncCLIP
compares it: ER's reservoir + the asymmetric contrastive loss (only the current task's pairs
are anchors; replayed pairs serve as negatives only) + instance-wise relation distillation
(each sample's distribution of similarities to the rest of the batch, previous model at
temperature `t_old` as the target for the current one at `t_new`; Co2L's CIFAR values 0.01 and
0.2), for image and text features. From the first task on the loss is the plain CLIP loss."""
from dataclasses import dataclass

from vlcp.fields import ranged
from vlcp.losses import clip_loss, relation_distill
from vlcp.methods import register
from vlcp.methods.teacher import TeacherER


@register
class Co2L(TeacherER):
    name = "co2l"

    @dataclass
    class Config(TeacherER.Config):
        ird_weight: float = ranged(1.0, ge=0)   # Co2L's λ
        t_new: float = ranged(0.2, gt=0)        # Co2L's κ (a temperature)
        t_old: float = ranged(0.01, gt=0)       # Co2L's κ*
        asymmetric: bool = True      # replayed pairs are negatives only

    def loss(self, model, batch, ctx):
        img, txt, scale = model(batch.images, batch.tokens)[:3]
        if self.old is None:
            return {"clip": clip_loss(img, txt, scale)}
        anchors = ~self.replayed(batch, ctx) if self.cfg.asymmetric else None
        terms = {"clip": clip_loss(img, txt, scale, anchors=anchors)}
        if self.cfg.ird_weight:
            old_img, old_txt, _ = self.teacher(batch)
            terms["ird"] = self.cfg.ird_weight * (relation_distill(img, old_img, self.cfg.t_new, self.cfg.t_old)
                                                  + relation_distill(txt, old_txt, self.cfg.t_new, self.cfg.t_old)) / 2
        return terms
