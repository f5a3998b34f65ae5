"""ZSCL, Zero-Shot Continual Learning (Zheng et al., ICCV'23; code Thunderbeee/ZSCL, mtil/): keep a
pretrained CLIP's zero-shot transfer while it learns a stream, by distillation in feature space
and weight ensembling in parameter space.

- Distillation: each step, `ref_batch_size` reference images (the stream's reference set: pairs
  the pretrained θ0 saw) against `ref_texts` fixed reference captions. θ0 (frozen) and the current
  model each give image→text logits (their own logit scale); the loss is the soft cross-entropy
  CE(softmax(θ0/T), softmax(current/T))·T² ("zscl_image") plus the same over the transposed
  logits, text→image ("zscl_text"). The current model's logits use its own text features (the
  paper: both encoders are distilled; the code uses θ0's text features here, see the Deviations).
- Weight ensemble (WE): within each task a running average of the weights, the task's starting
  weights counted once and the trained weights after every `we_interval`-th step (steps 0, I,
  2I, ...) once each; at the task's end the average is the model (evaluated, and the next task's
  start), as the code saves its WE model.
- `l2_weight` (the code's `--l2`, 0 by default): Σ‖θ − θ_task start‖², the released script's
  extra weight constraint.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.errors import ConfigError
from vlcp.fields import check_ranges, ranged
from vlcp.losses import soft_distill
from vlcp.methods import register
from vlcp.methods.base import Method, base_terms, frozen_copy
from vlcp.methods.merging import snapshot
from vlcp.utils import derive_seed


def zscl_distillation(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The original's `distillation(t, s, T)`: CE(s/T, softmax(t/T)), mean over rows, times T²."""
    return soft_distill(student_logits, teacher_logits, temperature) * temperature ** 2


def zscl_terms(img: torch.Tensor, txt: torch.Tensor, scale: torch.Tensor, ref_img: torch.Tensor,
               ref_txt: torch.Tensor, ref_scale: torch.Tensor, temperature: float) -> dict[str, torch.Tensor]:
    """{"zscl_image": image→text distillation, "zscl_text": text→image} from unit features: the
    current model's (`img`, `txt`, `scale`) and θ0's (`ref_*`) on the same reference images and texts."""
    current = scale * img @ txt.T
    ref = ref_scale * ref_img @ ref_txt.T
    return {"zscl_image": zscl_distillation(current, ref, temperature),
            "zscl_text": zscl_distillation(current.T, ref.T, temperature)}


@torch.no_grad()
def we_update(average: dict[str, torch.Tensor], weights: dict[str, torch.Tensor], n: int) -> None:
    """The original's `merge_we(model, we_model, n)`, in place: average ← (average·n + θ) / (n + 1),
    `n` the number of weight sets already in the average less one (the code's count after its +1)."""
    for k, a in average.items():
        a.mul_(n).add_(weights[k].to(a)).div_(n + 1)


@register
class ZSCL(Method):
    name = "zscl"
    needs = frozenset({"pixels", "reference"})

    @dataclass
    class Config:
        zscl_weight: float = ranged(1.0, ge=0)   # the image→text term (the code: 1, 0.5 with --weight_adjust)
        zscl_text_weight: float = ranged(1.0, ge=0)   # the text→image term (--text_loss)
        temperature: float = ranged(2.0, gt=0)   # T of the distillation (the code's --T)
        ref_batch_size: int = ranged(128, ge=1)   # reference images per step (the code: the training batch size)
        ref_texts: int = ranged(1000, ge=2)   # fixed reference captions (the code: Conceptual Captions' validation set)
        we: bool = True                          # weight ensemble (--we)
        we_interval: int = ranged(100, ge=1)     # I: steps between averages (--avg_freq)
        l2_weight: float = ranged(0.0, ge=0)     # the released script's --l2 1 (not in the paper's method)

        def __post_init__(self):
            check_ranges(self)
            if not isinstance(self.we, bool):
                raise ConfigError(f"we: must be true or false, got {self.we!r}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.init: dict[str, torch.Tensor] | None = None   # θ0, the distillation's reference model (saved)
        self.teacher: torch.nn.Module | None = None        # θ0 as a frozen module (derived from `init`)
        self.ref_tokens: torch.Tensor | None = None        # the fixed reference captions (saved)
        self.ref_text: torch.Tensor | None = None          # θ0's features of them
        self.average: dict[str, torch.Tensor] | None = None   # the task's weight ensemble
        self.count = 0
        self.start: dict[str, torch.Tensor] | None = None   # the task's starting weights (l2_weight)
        self.gen: torch.Generator | None = None              # the task's reference-image draws

    @torch.no_grad()
    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        if ctx.reference is None or len(ctx.reference) == 0:
            raise ConfigError("method.name: 'zscl' needs the stream's reference set (ctx.reference is empty)")
        if self.init is None:
            if ctx.task > 0:
                raise RuntimeError(f"zscl: no θ0 stored before task {ctx.task} (state not restored?)")
            self.init = snapshot(model)
        if self.ref_tokens is None:   # drawn once per run (then saved: a caption's draw depends on the task)
            gen = torch.Generator().manual_seed(derive_seed(self.seed, "zscl", "texts"))
            ref = ctx.reference
            ids = ref[torch.randperm(len(ref), generator=gen)[: self.cfg.ref_texts]]
            self.ref_tokens = ctx.materialize_plain(ids).tokens.cpu()
        if self.teacher is None:
            self.teacher = frozen_copy(model)
            self.teacher.load_state_dict(self.init)
            device = next(model.parameters()).device
            self.ref_text = self.teacher.encode_text(self.ref_tokens.to(device), normalize=True)
        self.gen = torch.Generator().manual_seed(derive_seed(self.seed, "zscl", "images", ctx.task))
        params = dict(model.named_parameters())
        self.average = {k: p.detach().clone() for k, p in params.items()} if self.cfg.we else None
        self.count = 0
        self.start = {k: p.detach().clone() for k, p in params.items() if p.requires_grad} if self.cfg.l2_weight else None

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx) if getattr(super().loss, "__func__", None) is not Method.loss \
            else base_terms(model, batch)
        ref = ctx.reference
        ids = ref[torch.randint(0, len(ref), (self.cfg.ref_batch_size,), generator=self.gen)]
        images = ctx.materialize_plain(ids).images   # the code's reference loader: test-time preprocessing
        with torch.no_grad():
            ref_img = self.teacher.encode_image(images, normalize=True)
        img = model.encode_image(images, normalize=True)
        txt = model.encode_text(self.ref_tokens.to(images.device), normalize=True)
        zs = zscl_terms(img, txt, model.logit_scale.exp(), ref_img, self.ref_text, self.teacher.logit_scale.exp(),
                        self.cfg.temperature)
        if self.cfg.zscl_weight:
            terms["zscl_image"] = self.cfg.zscl_weight * zs["zscl_image"]
        if self.cfg.zscl_text_weight:
            terms["zscl_text"] = self.cfg.zscl_text_weight * zs["zscl_text"]
        if self.start is not None:
            terms["l2"] = self.cfg.l2_weight * sum(((p - self.start[k]) ** 2).sum()
                                                   for k, p in model.named_parameters() if k in self.start)
        return terms

    def after_step(self, model, batch, ctx):
        super().after_step(model, batch, ctx)
        if self.average is not None and ctx.step % self.cfg.we_interval == 0:
            self.count += 1
            we_update(self.average, dict(model.named_parameters()), self.count)

    @torch.no_grad()
    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        if self.average is not None:
            for k, p in model.named_parameters():
                p.copy_(self.average[k])
        self.average, self.start = None, None

    def state_dict(self):
        return super().state_dict() | {"init": self.init, "ref_tokens": self.ref_tokens}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.init, self.ref_tokens, self.teacher = state["init"], state["ref_tokens"], None

    def extra_cost(self) -> float:
        return super().extra_cost() + 4 / 3   # the student's and θ0's passes on a reference batch of the batch's size
