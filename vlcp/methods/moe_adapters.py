"""MoE-Adapters (Yu et al., CVPR'24; code JiazuoYu/MoE-Adapters4CL, mtil/): a frozen CLIP whose
image-tower blocks each get a mixture of adapter experts beside the MLP, routed per task, plus the
distribution-discriminative auto-selector (DDAS) that picks, per test image, the task whose
experts to use or the frozen zero-shot model.

- Experts: `experts` adapters per block (down r, ReLU, dropout, up; ×`adapter_scale`, LoRA-style
  init: up and biases zero), on the block's input after attention, in parallel to the MLP:
  x ← x + MLP(LN(x)) + Σ_e g_e(x)·expert_e(x) (the code's `ffn_option: parallel`).
- Router: one per task (`routers` ≥ the stream's tasks), noisy top-k gating on the class token
  (Shazeer et al. 2017, as the code: noise sd softplus(x·W_noise) + 1e-2 in training, none at
  test; softmax over the top-k logits) and the load-balance loss
  `balance_weight`·(cv²(importance) + cv²(load)), summed over blocks ("balance").
- Activate-freeze: after each task the `top_k` experts its router chose most, per block, are frozen
  for the later tasks (the code's frozen list).
- DDAS: per task an autoencoder on the frozen model's image features of the task's training
  images (sigmoid input, MSE), plus one on the reference set (the pairs θ0 saw, the code's
  TinyImageNet chooser: routes to zero-shot). A test image goes to the task whose autoencoder
  reconstructs it best, or to the frozen model (no adapters) when that is the reference's or
  its error exceeds the threshold (`threshold`, or calibrated: the largest of the task
  autoencoders' `threshold_quantile` of their own training errors).

The adapters, routers, autoencoders and the frozen experts' mask are model tensors (checkpointed
with it); the blocks read their routing from `route`, set per forward by a pre-hook on the image tower.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.errors import ConfigError
from vlcp.fields import check_ranges, ranged
from vlcp.methods import register
from vlcp.methods.base import Method, base_terms
from vlcp.models.adapters import freeze_all_but
from vlcp.train.context import model_outputs
from vlcp.utils import derive_seed

ZERO_SHOT = -1   # the route of an image that DDAS sends to the frozen model


# --------------------------------------------------------------------------- the gating (pure)

def cv_squared(x: torch.Tensor) -> torch.Tensor:
    """The squared coefficient of variation of a sample (0 for one element), the code's `cv_squared`."""
    if x.shape[0] == 1:
        return torch.zeros((), device=x.device, dtype=torch.float32)
    return x.float().var() / (x.float().mean() ** 2 + 1e-10)


def prob_in_top_k(clean: torch.Tensor, noisy: torch.Tensor, noise_sd: torch.Tensor, top_values: torch.Tensor,
                  k: int) -> torch.Tensor:
    """[B, E]: the probability that each expert is in a sample's top k under fresh noise (the code's
    `_prob_in_top_k`): the differentiable load."""
    normal = torch.distributions.Normal(torch.zeros((), device=clean.device), torch.ones((), device=clean.device))
    threshold_in = top_values[:, k:k + 1]        # the (k+1)-th noisy value: what an expert in the top k must beat
    threshold_out = top_values[:, k - 1:k]       # the k-th: what an expert outside must beat
    is_in = noisy > threshold_in
    return torch.where(is_in, normal.cdf((clean - threshold_in) / noise_sd), normal.cdf((clean - threshold_out) / noise_sd))


def noisy_top_k_gating(x: torch.Tensor, w_gate: torch.Tensor, w_noise: torch.Tensor, k: int, train: bool,
                       noise_epsilon: float = 1e-2) -> tuple[torch.Tensor, torch.Tensor]:
    """(gates [B, E], load [E]) for inputs x [B, d]: `w_gate`, `w_noise` [d, E] (one router) or
    [B, d, E] (each sample's router). Noise (torch's global generator) only when `train`."""
    mul = (lambda w: x @ w) if w_gate.dim() == 2 else (lambda w: torch.einsum("bd,bde->be", x, w))  # noqa: E731
    clean = mul(w_gate.to(x))
    experts = clean.shape[1]
    if train:
        noise_sd = F.softplus(mul(w_noise.to(x))) + noise_epsilon
        noisy = clean + torch.randn_like(clean) * noise_sd
        logits = noisy
    else:
        logits = clean
    top_logits, top_indices = logits.topk(min(k + 1, experts), dim=1)
    gates = torch.zeros_like(logits).scatter(1, top_indices[:, :k], F.softmax(top_logits[:, :k], dim=1))
    if train and k < experts:
        load = prob_in_top_k(clean, noisy, noise_sd, top_logits, k).sum(0)
    else:
        load = (gates > 0).sum(0)
    return gates, load


def balance_loss(gates: torch.Tensor, load: torch.Tensor) -> torch.Tensor:
    """cv²(importance) + cv²(load), importance = the gates summed over the batch."""
    return cv_squared(gates.sum(0)) + cv_squared(load)


def combine(x: torch.Tensor, gates: torch.Tensor, experts: nn.ModuleList) -> torch.Tensor:
    """Σ_e gates[b, e]·expert_e(x[b]) over the experts a sample's gates select (the code's SparseDispatcher)."""
    out = torch.zeros_like(x)
    for e, expert in enumerate(experts):
        rows = gates[:, e].nonzero().squeeze(1)
        if len(rows):
            g = gates[rows, e].to(x.dtype).view(-1, *([1] * (x.dim() - 1)))
            out = out.index_add(0, rows, g * expert(x[rows]))
    return out


def ddas_select(errors: torch.Tensor, threshold: float | torch.Tensor) -> torch.Tensor:
    """Routes [N] from each image's reconstruction errors [N, K] (column 0: the reference set's
    autoencoder; column j > 0: task j − 1's; an untrained one +inf): the best column's task, or
    ZERO_SHOT when the best is the reference's or its error exceeds `threshold`."""
    best, col = errors.min(dim=1)
    return torch.where((col == 0) | (best > threshold), torch.full_like(col, ZERO_SHOT), col - 1)


# --------------------------------------------------------------------------- the modules

class Adapter(nn.Module):
    """The code's `Adapter` (adapter_layernorm_option none): up(dropout(ReLU(down(x)))) × scale."""

    def __init__(self, width: int, r: int, dropout: float, scale: float):
        super().__init__()
        self.down, self.up, self.dropout, self.scale = nn.Linear(width, r), nn.Linear(r, width), dropout, scale
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.down.weight, a=math.sqrt(5))
            nn.init.zeros_(self.up.weight)
            nn.init.zeros_(self.down.bias)
            nn.init.zeros_(self.up.bias)

    def forward(self, x):
        return self.up(F.dropout(F.relu(self.down(x)), p=self.dropout, training=self.training)) * self.scale


class MoEBlock(nn.Module):
    """An open_clip residual block with a routed mixture of adapters beside its MLP. `route` (set per
    forward): each sample's router, ZERO_SHOT for none; gating is noisy in training mode."""

    def __init__(self, block: nn.Module, cfg, batch_first: bool):
        super().__init__()
        width = block.ln_1.normalized_shape[0]
        self.block, self.top_k, self.batch_first = block, cfg.top_k, batch_first
        self.experts = nn.ModuleList(Adapter(width, cfg.r, cfg.dropout, cfg.adapter_scale) for _ in range(cfg.experts))
        self.w_gate = nn.ParameterList(nn.Parameter(torch.zeros(width, cfg.experts)) for _ in range(cfg.routers))
        self.w_noise = nn.ParameterList(nn.Parameter(torch.zeros(width, cfg.experts)) for _ in range(cfg.routers))
        self.register_buffer("frozen", torch.zeros(cfg.experts, dtype=torch.bool))   # activate-freeze
        self.register_buffer("chosen", torch.zeros(cfg.experts), persistent=False)   # this task's choices
        self.route: torch.Tensor | None = None
        self.balance: torch.Tensor | None = None   # the last training forward's balance loss (read by the method)

    def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
        b = self.block
        x = q_x + b.ls_1(b.attention(q_x=b.ln_1(q_x), attn_mask=attn_mask))
        out = x + b.ls_2(b.mlp(b.ln_2(x)))
        route = self.route
        if route is None or bool((route == ZERO_SHOT).all()):
            return out
        xs = x if self.batch_first else x.transpose(0, 1)          # [B, L, D]
        on = (route != ZERO_SHOT).nonzero().squeeze(1)
        ids = route[on]
        if bool((ids == ids[0]).all()):
            w_gate, w_noise = self.w_gate[int(ids[0])], self.w_noise[int(ids[0])]
        else:
            w_gate = torch.stack([self.w_gate[int(i)] for i in ids])
            w_noise = torch.stack([self.w_noise[int(i)] for i in ids])
        gates, load = noisy_top_k_gating(xs[on, 0, :], w_gate, w_noise, self.top_k, self.training)
        if self.training:
            self.balance = balance_loss(gates, load)
            with torch.no_grad():
                self.chosen += (gates > 0).sum(0).to(self.chosen)
        y = torch.zeros_like(xs).index_copy(0, on, combine(xs[on], gates, self.experts))
        return out + (y if self.batch_first else y.transpose(0, 1))


class Autoencoder(nn.Module):
    """The code's DDAS autoencoder: ReLU(Linear(d, code)) → Sigmoid(Linear(code, d))."""

    def __init__(self, dims: int, code: int):
        super().__init__()
        self.encoder, self.decoder = nn.Linear(dims, code), nn.Linear(code, dims)

    def forward(self, x):
        return torch.sigmoid(self.decoder(F.relu(self.encoder(x))))


class DDAS(nn.Module):
    """The auto-selector: autoencoder 0 on the reference set, j on task j − 1; `route(features)`."""

    def __init__(self, dims: int, tasks: int, code: int, threshold: float | None):
        super().__init__()
        self.encoders = nn.ModuleList(Autoencoder(dims, code) for _ in range(tasks + 1))
        self.register_buffer("trained", torch.zeros(tasks + 1, dtype=torch.bool))
        self.register_buffer("own_error", torch.zeros(tasks + 1))   # each one's quantile of its own training errors
        self.register_buffer("task", torch.zeros((), dtype=torch.long), persistent=False)   # the task being trained
        #                                                                     (its router routes every training image)
        self.fixed = threshold
        self.off = False      # a pass of the frozen model (the features DDAS reads)

    def errors(self, feats: torch.Tensor) -> torch.Tensor:
        """[N, K] per-image MSE of each autoencoder (+inf for an untrained one)."""
        x = torch.sigmoid(feats.float())
        return torch.stack([((ae(x) - x) ** 2).mean(1) if done else torch.full((len(x),), math.inf, device=x.device)
                            for ae, done in zip(self.encoders, self.trained.tolist())], dim=1)

    def threshold(self) -> float:
        if self.fixed is not None:
            return self.fixed
        own = self.own_error[1:][self.trained[1:]]
        return own.max().item() if len(own) else math.inf


def blocks(model) -> list[MoEBlock]:
    return [b for b in model.visual.transformer.resblocks if isinstance(b, MoEBlock)]


def set_route(visual, args):
    """The image tower's pre-hook: every block's route for this forward (training: the current task's
    router for every image; evaluation: DDAS on the frozen model's features of the same images)."""
    ddas, images = visual.ddas, args[0]
    if ddas.off or not visual.training:
        route = torch.full((len(images),), ZERO_SHOT, dtype=torch.long, device=images.device)
        if not ddas.off and bool(ddas.trained[1:].any()):
            ddas.off = True
            try:
                with torch.no_grad():
                    feats = visual(images)
            finally:
                ddas.off = False
            route = ddas_select(ddas.errors(feats), ddas.threshold())
    else:
        route = ddas.task.expand(len(images)).to(images.device)
    for b in visual.transformer.resblocks:
        b.route = route


@torch.no_grad()
def frozen_features(model, materialize, ids: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """The frozen model's (no adapters) image features of training images `ids`."""
    visual, was = model.visual, model.visual.training
    visual.ddas.off = True
    visual.eval()
    try:
        return torch.cat([visual(materialize(ids[i:i + batch_size]).images) for i in range(0, len(ids), batch_size)])
    finally:
        visual.ddas.off = False
        visual.train(was)


def train_autoencoder(ae: Autoencoder, feats: torch.Tensor, steps: int, batch_size: int, lr: float,
                      gen: torch.Generator, decay: bool = True) -> torch.Tensor:
    """The code's chooser training: Adam (weight decay 1e-4), MSE on sigmoid(features), lr ×0.1 every 10
    passes over the data (`decay`; else constant); returns the per-image errors after training."""
    x = torch.sigmoid(feats.float())
    ae.requires_grad_(True)
    opt = torch.optim.Adam(ae.parameters(), lr=lr, weight_decay=1e-4)
    per_pass = max(1, len(x) // batch_size) if decay else steps
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr * 0.1 ** (step // per_pass // 10)
        b = x[torch.randint(0, len(x), (batch_size,), generator=gen).to(x.device)]
        loss = F.mse_loss(ae(b), b)
        opt.zero_grad()
        loss.backward()
        opt.step()
    ae.zero_grad(set_to_none=True)
    ae.requires_grad_(False)
    with torch.no_grad():
        return ((ae(x) - x) ** 2).mean(1)


# --------------------------------------------------------------------------- the method

@register
class MoEAdapters(Method):
    name = "moe-adapters"
    needs = frozenset({"pixels", "reference", "clip"})

    @dataclass
    class Config:
        experts: int = ranged(22, ge=1)          # the code's --experts_num 22
        top_k: int = ranged(2, ge=1)             # --topk 2
        r: int = ranged(64, ge=1)                # adapter width (--ffn_num 64)
        routers: int = ranged(11, ge=1)          # one per task; at least the stream's tasks (the code: 11)
        dropout: float = ranged(0.1, ge=0, lt=1)
        adapter_scale: float = ranged(0.1, gt=0)
        balance_weight: float = ranged(1e-2, ge=0)   # the code's 1e-2 × (cv²(importance) + cv²(load))
        ae_code: int = ranged(100, ge=1)          # autoencoder code size (the code: 100 of AlexNet's 9,216)
        ae_steps: int = ranged(300, ge=0)         # per task (the code: 300; 1,000 for the first chooser)
        ae_reference_steps: int = ranged(1000, ge=0)
        ae_reference_samples: int = ranged(5000, ge=1)
        ae_batch_size: int = ranged(128, ge=1)
        ae_lr: float = ranged(0.01, gt=0)         # the code's exp_lr_scheduler(init_lr=0.01)
        ae_lr_decay: bool = True                  # ×0.1 every 10 passes over the task's images (the code's)
        threshold: float | None = ranged(None, gt=0)   # a fixed DDAS threshold (the code: 0.0655); None: calibrated
        threshold_quantile: float = ranged(0.95, gt=0, le=1)

        def __post_init__(self):
            check_ranges(self)
            if not isinstance(self.ae_lr_decay, bool):
                raise ConfigError(f"ae_lr_decay: must be true or false, got {self.ae_lr_decay!r}")
            if self.top_k > self.experts:
                raise ConfigError(f"top_k: {self.top_k} is more than the {self.experts} experts")

    def prepare_model(self, model):
        super().prepare_model(model)
        visual = getattr(model, "visual", None)
        if visual is None or not hasattr(getattr(visual, "transformer", None), "resblocks"):
            raise ConfigError(f"method.name: 'moe-adapters' adapts an open_clip ViT image tower; "
                              f"{type(visual).__name__} has none")
        tr = visual.transformer
        for i, block in enumerate(tr.resblocks):
            tr.resblocks[i] = MoEBlock(block, self.cfg, getattr(tr, "batch_first", True))
        device = next(model.parameters()).device
        visual.ddas = DDAS(visual.output_dim, self.cfg.routers, self.cfg.ae_code, self.cfg.threshold)
        visual.to(device)
        visual.register_forward_pre_hook(set_route)
        freeze_all_but(model, lambda n, p: ".experts." in n)

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        if ctx.num_tasks > self.cfg.routers:
            raise ConfigError(f"method.routers: {self.cfg.routers} routers for a stream of {ctx.num_tasks} tasks")
        ddas = model.visual.ddas
        ddas.task.fill_(ctx.task)
        if not bool(ddas.trained[0]):
            self.fit(model, ctx, 0, ctx.reference, self.cfg.ae_reference_steps, self.cfg.ae_reference_samples)
        for b in blocks(model):
            b.chosen.zero_()
            for e, expert in enumerate(b.experts):
                expert.requires_grad_(not bool(b.frozen[e]))
            for t, (g, n) in enumerate(zip(b.w_gate, b.w_noise)):
                g.requires_grad_(t == ctx.task)
                n.requires_grad_(t == ctx.task)

    def loss(self, model, batch, ctx):
        out = model_outputs(model, batch)
        terms = base_terms(model, batch, out)
        parts = [b.balance for b in blocks(model) if b.balance is not None]
        for b in blocks(model):
            b.balance = None
        if parts and self.cfg.balance_weight:
            terms["balance"] = self.cfg.balance_weight * sum(parts)
        return terms

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        for b in blocks(model):   # activate-freeze: this task's most chosen experts
            b.frozen[b.chosen.topk(self.cfg.top_k).indices] = True
        self.fit(model, ctx, ctx.task + 1, ctx.task_ids[ctx.task], self.cfg.ae_steps)

    def fit(self, model, ctx, k: int, ids, steps: int, limit: int | None = None) -> None:
        """Train DDAS autoencoder k on the frozen model's features of training images `ids`."""
        gen = torch.Generator().manual_seed(derive_seed(self.seed, "ddas", k))
        if limit is not None and len(ids) > limit:
            ids = ids[torch.randperm(len(ids), generator=gen)[:limit]]
        ddas = model.visual.ddas
        feats = frozen_features(model, ctx.materialize_plain or ctx.materialize, ids)
        with torch.enable_grad():
            err = train_autoencoder(ddas.encoders[k], feats, steps, self.cfg.ae_batch_size, self.cfg.ae_lr, gen,
                                    self.cfg.ae_lr_decay)
        ddas.trained[k] = True
        ddas.own_error[k] = torch.quantile(err.float().cpu(), self.cfg.threshold_quantile).item()
