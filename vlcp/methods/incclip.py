"""IncCLIP (Yan et al., "Generative Negative Text Replay for Continual Vision-Language
Pretraining", ECCV 2022): ER's reservoir replay plus

(a) pseudo negative texts, generated for every batch by inverting the previous-step model in
    token-embedding space: each replayed pair's text embedding is mixed with another replayed
    text's (ratio ~ U[mix_low, mix_high]) and optimised by SGD for `pseudo_iters` steps under the
    margin loss that keeps its cosine with the replayed image inside [s_min, s_max];
(b) the pseudo texts as extra negatives in the image→text direction of the contrastive loss;
(c) multi-modal distillation: KL between the previous and current model's image→text (pseudo
    texts included) and text→image distributions, weight `kd_weight` (teacher scale `kd_scale`);
(d) weight-norm clipping after every step: a weight matrix whose norm exceeds `wnc_ratio` × its
    reference norm (the model entering the second task) is scaled back onto that bound;
(e) ER's compute-matched reservoir memory (`replay_fraction`, `memory_update`).

`pseudo_every: k` reuses a generation for k steps. Ablations: `kd_weight: 0`, `pseudo: false`,
`pseudo_iters: 0`, `s_min: -1, s_max: -1` (naive inversion), `wnc_ratio: null`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.fields import ranged
from vlcp.errors import ConfigError
from vlcp.losses import clip_loss, cross_modal_kd, score_band_loss
from vlcp.methods import register
from vlcp.methods.teacher import TeacherER
from vlcp.models.clip import encode_text_embeddings
from vlcp.train.distributed import unwrap
from vlcp.utils import derive_seed


@register
class IncCLIP(TeacherER):
    name = "incclip"
    needs = frozenset({"pixels", "replay", "clip"})

    @dataclass
    class Config(TeacherER.Config):
        pseudo: bool = True              # generate pseudo negative texts
        pseudo_batch: int | None = ranged(16, ge=1)   # pseudo texts per step (at most one per replayed pair); None: one per pair
        pseudo_iters: int = ranged(3, ge=0)   # SGD iterations per batch
        pseudo_every: int = ranged(1, ge=1)   # generate every k steps, reuse in between (1: every batch, the paper)
        pseudo_lr: float = ranged(0.5, ge=0)   # SGD learning rate on token embeddings
        s_min: float = ranged(0.1, ge=-1, le=1)   # hard: cosine with its image at least this ...
        s_max: float = ranged(0.3, ge=-1, le=1)   # ... and at most this (negative)
        mix_low: float = ranged(0.0, ge=0, le=1)   # mixing ratio of the two source texts ~ U[mix_low, mix_high]
        mix_high: float = ranged(1.0, ge=0, le=1)
        kd_weight: float = ranged(1.0, ge=0)   # weight of the multi-modal distillation loss
        kd_scale: float | None = ranged(None, gt=0)   # teacher logit scale (1/temperature); None: the teacher's own
        wnc_ratio: float | None = ranged(1.0, gt=0)   # weight-norm clipping bound relative to the reference; None: off

        def __post_init__(self):
            super().__post_init__()
            if not -1 <= self.s_min <= self.s_max <= 1:
                raise ConfigError(f"s_min, s_max: need -1 <= s_min <= s_max <= 1, got {self.s_min}, {self.s_max}")
            if not 0 <= self.mix_low <= self.mix_high <= 1:
                raise ConfigError(f"mix_low, mix_high: need 0 <= mix_low <= mix_high <= 1, got {self.mix_low}, {self.mix_high}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.ref_norms: dict[str, torch.Tensor] | None = None
        self.pseudo = None                # the latest pseudo texts (derived state: regenerated each task)
        self.gen = torch.Generator().manual_seed(derive_seed(seed, "incclip"))

    # -- hooks ---------------------------------------------------------------------------
    def before_task(self, model, ctx):
        super().before_task(model, ctx)   # self.old: the previous-step model
        self.pseudo = None
        if ctx.task > 0:
            if self.ref_norms is None:
                self.ref_norms = {n: p.detach().norm().clone() for n, p in model.named_parameters() if p.ndim >= 2}

    def loss(self, model, batch, ctx):
        img, txt, scale = model(batch.images, batch.tokens)[:3]
        if self.old is None:
            return {"clip": clip_loss(img, txt, scale)}
        old_img, old_txt, old_scale = self.teacher(batch)
        n_replay = int(self.replayed(batch, ctx).sum())              # replayed pairs come last
        n_pseudo = min(n_replay, self.cfg.pseudo_batch or n_replay)
        extra = old_extra = None
        if self.cfg.pseudo and n_pseudo:
            if self.pseudo is None or ctx.step % self.cfg.pseudo_every == 0:
                self.pseudo = self.pseudo_texts(batch.tokens[-n_pseudo:], old_img[-n_pseudo:])
            emb, pool, old_extra = self.pseudo
            extra = encode_text_embeddings(unwrap(model), emb, pool)
        terms = {"clip": clip_loss(img, txt, scale, extra_text=extra)}
        if self.cfg.kd_weight:
            teacher_scale = old_scale if self.cfg.kd_scale is None else self.cfg.kd_scale
            terms["kd"] = self.cfg.kd_weight * cross_modal_kd(img, txt, old_img, old_txt, scale, teacher_scale,
                                                              extra, old_extra)
        return terms

    def after_step(self, model, batch, ctx):
        super().after_step(model, batch, ctx)
        if self.cfg.wnc_ratio is not None and self.ref_norms is not None:
            clip_weight_norms(model, self.ref_norms, self.cfg.wnc_ratio)

    # -- pseudo negative texts -----------------------------------------------------------
    def pseudo_texts(self, tokens: torch.Tensor, image_features: torch.Tensor):
        """Token embeddings of one hard negative text per image (inverting the previous model),
        their pooling token ids, and the previous model's features of them."""
        old, n = self.old, len(tokens)
        with torch.no_grad():
            emb = old.token_embedding(tokens)
        partner = torch.randint(0, n, (n,), generator=self.gen).to(tokens.device)
        lam = torch.empty(n, 1, 1).uniform_(self.cfg.mix_low, self.cfg.mix_high, generator=self.gen).to(emb)
        pool = torch.where(lam.view(n, 1) >= 0.5, tokens, tokens[partner])
        x = (lam * emb + (1 - lam) * emb[partner]).detach().requires_grad_(True)
        opt = torch.optim.SGD([x], lr=self.cfg.pseudo_lr)
        with torch.enable_grad():
            for _ in range(self.cfg.pseudo_iters):
                scores = (encode_text_embeddings(old, x, pool) * image_features).sum(1)
                loss = score_band_loss(scores, self.cfg.s_min, self.cfg.s_max)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        with torch.no_grad():
            old_features = encode_text_embeddings(old, x, pool)
        return x.detach(), pool, old_features

    # -- state ---------------------------------------------------------------------------
    def state_dict(self):
        return super().state_dict() | {"ref_norms": self.ref_norms, "gen": self.gen.get_state()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.ref_norms = state["ref_norms"]
        self.gen.set_state(state["gen"])


@torch.no_grad()
def clip_weight_norms(model: torch.nn.Module, ref_norms: dict[str, torch.Tensor], ratio: float) -> int:
    """Scale every parameter named in `ref_norms` whose norm exceeds ratio × its reference back
    onto that bound (direction kept; the others are multiplied by exactly 1). Returns how many
    were clipped. One fused norm over all of them (the per-parameter loop cost ~1.5 ms a step)."""
    named = [(p, ref_norms[n]) for n, p in unwrap(model).named_parameters() if n in ref_norms]
    if not named:
        return 0
    params = [p for p, _ in named]
    norms = torch.stack(torch._foreach_norm(params))
    bounds = ratio * torch.stack([r for _, r in named]).to(norms)
    over = norms > bounds
    torch._foreach_mul_(params, torch.where(over, bounds / norms, torch.ones_like(norms)).tolist())
    return int(over.sum())
