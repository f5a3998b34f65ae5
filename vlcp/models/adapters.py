"""Parameter-efficient adapters and parameter selections for open_clip CLIPs (FoMo-in-Flux's
LoRA / DoRA / VeRA / BitFit / LNFit / locked towers), as small pure helpers.

- `inject_peft(model, config)`: put peft adapters (LoRA, DoRA, VeRA) into the model, in place;
  it stays a plain open_clip CLIP (no PeftModel wrapper), its `state_dict` now with the adapters.
- Selections: `adapter_names`, `bias_names` (BitFit), `layernorm_names` (LNFit),
  `image_tower_names` / `text_tower_names` (locked towers); `freeze_all_but(model, names)` makes
  exactly those parameters trainable.
- `check_targets` rejects an adapter aimed at `attn.out_proj` alone (MHA never calls it: a silent
  no-op); `project_attention` rebuilds each block's `nn.MultiheadAttention` as
  `ProjectedAttention` (the same weights and computation, its two projections called Linear
  layers, which DoRA and VeRA need; `vlcp.models.export.restore_attention` undoes it).
"""
from __future__ import annotations

import contextlib
import logging
from typing import Callable, Collection

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.errors import ConfigError, VlcpError

DEAD_TARGETS = ("out_proj",)   # called by nobody in open_clip's default blocks


@contextlib.contextmanager
def quiet_bitsandbytes():
    """For importing peft or galore_torch, which import bitsandbytes: on a CPU with AVX-512 BF16,
    bitsandbytes logs at import that its optional 4-bit CPU kernel is missing ("pip install
    kernels"), a path vlcp never takes. Its loggers show errors only while the import runs."""
    log = logging.getLogger("bitsandbytes")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def check_targets(targets, field: str = "target_modules", mha_ok: bool = True) -> None:
    """Validate adapter target names (peft suffix matching against module names): a non-empty
    list of non-empty strings, none of them `out_proj` (a dead adapter), and `attn` only where
    the adapter supports nn.MultiheadAttention (LoRA; not DoRA or VeRA)."""
    if not isinstance(targets, (list, tuple)) or not targets or not all(isinstance(t, str) and t for t in targets):
        raise ConfigError(f"{field}: expected a non-empty list of module names, got {targets!r}")
    for t in targets:
        if t.split(".")[-1] in DEAD_TARGETS:
            raise ConfigError(f"{field}: {t!r} cannot be adapted: open_clip's nn.MultiheadAttention never calls "
                              "out_proj, so its adapter would get no gradient (target 'attn' for LoRA on attention)")
        if not mha_ok and t.split(".")[-1] == "attn":
            raise ConfigError(f"{field}: {t!r} is an nn.MultiheadAttention, which this adapter does not support "
                              "(peft: LoRA only); use the MLP layers 'c_fc', 'c_proj'")


class ProjectedAttention(nn.Module):
    """An open_clip block's self-attention `nn.MultiheadAttention` with its packed in-projection
    as the Linear `qkv` (E → 3E) and its out-projection as the Linear `proj`, both called in
    forward (so adapters that wrap Linear layers work on them). Same weights, same computation
    (in-projection, scaled dot-product attention, out-projection) as MHA with need_weights=False."""

    def __init__(self, mha: nn.MultiheadAttention):
        super().__init__()
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn or mha.in_proj_bias is None:
            raise VlcpError("ProjectedAttention: only a plain self-attention nn.MultiheadAttention (one packed "
                            "in-projection with bias, no bias_k/bias_v, no add_zero_attn) can be rebuilt")
        e = mha.embed_dim
        w = mha.in_proj_weight
        self.num_heads, self.batch_first, self.dropout = mha.num_heads, mha.batch_first, mha.dropout
        # skip_init: no draws from the global RNG (the weights are copied below)
        self.qkv = nn.utils.skip_init(nn.Linear, e, 3 * e, device=w.device, dtype=w.dtype)
        self.proj = nn.utils.skip_init(nn.Linear, e, e, bias=mha.out_proj.bias is not None, device=w.device,
                                       dtype=w.dtype)
        with torch.no_grad():
            self.qkv.weight.copy_(w)
            self.qkv.bias.copy_(mha.in_proj_bias)
            self.proj.weight.copy_(mha.out_proj.weight)
            if self.proj.bias is not None:
                self.proj.bias.copy_(mha.out_proj.bias)

    def forward(self, query, key=None, value=None, need_weights=False, attn_mask=None, key_padding_mask=None,
                **_):
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise VlcpError("ProjectedAttention: self-attention only (key and value must be the query)")
        if need_weights or key_padding_mask is not None:
            raise VlcpError("ProjectedAttention: need_weights and key_padding_mask are not supported")
        x = query if self.batch_first else query.transpose(0, 1)
        b, t, e = x.shape
        h = self.num_heads
        q, k, v = self.qkv(x).view(b, t, 3, h, e // h).permute(2, 0, 3, 1, 4)   # each [b, h, t, e/h]
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:   # MHA: True = masked out; SDPA's bool is the opposite
                attn_mask = torch.zeros_like(attn_mask, dtype=q.dtype).masked_fill_(attn_mask, float("-inf"))
            if attn_mask.dim() == 3:            # [b · h, t, t]
                attn_mask = attn_mask.view(b, h, t, t)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                             dropout_p=self.dropout if self.training else 0.0)
        out = self.proj(out.transpose(1, 2).reshape(b, t, e))
        return (out if self.batch_first else out.transpose(0, 1)), None


def project_attention(model: nn.Module) -> list[str]:
    """Replace, in place, every `nn.MultiheadAttention` named `attn` (open_clip's residual blocks)
    by an equivalent `ProjectedAttention`; returns the replaced module names."""
    names = [n for n, m in model.named_modules() if isinstance(m, nn.MultiheadAttention) and n.split(".")[-1] == "attn"]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, ProjectedAttention(getattr(parent, child)))
    return names


def target_module_names(model: nn.Module, targets: Collection[str]) -> list[str]:
    """Names of the Linear / MultiheadAttention modules that peft's suffix matching of `targets`
    selects (a module is matched when its name equals a target or ends with '.' + target)."""
    return [n for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.MultiheadAttention))
            and any(n == t or n.endswith("." + t) for t in targets)]


def inject_peft(model: nn.Module, config, adapter_name: str = "default",
                seed: int | None = None) -> list[str]:
    """Inject a peft adapter config (LoraConfig, incl. DoRA, or VeraConfig) into `model` in
    place; returns the names of the adapted modules. Adapter weights are drawn from a private
    generator seeded with `seed` (the global RNG is left as it was). Raises ConfigError when a
    target matches no Linear / MultiheadAttention of the model."""
    with quiet_bitsandbytes():
        from peft import PeftType, inject_adapter_in_model
        from peft.tuners.vera import VeraModel

    targets = list(config.target_modules)
    for t in targets:
        if not target_module_names(model, [t]):
            raise ConfigError(f"target_modules: {t!r} matches no nn.Linear or nn.MultiheadAttention "
                              f"of {type(model).__name__}")
    expected = target_module_names(model, targets)
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        if config.peft_type == PeftType.VERA:
            VeraModel(model, config, adapter_name)   # the shared projections live on the layers; the tuner is dropped
        else:
            inject_adapter_in_model(config, model, adapter_name=adapter_name)
    adapted = adapted_module_names(model)
    if sorted(adapted) != sorted(expected):
        raise VlcpError(f"inject_peft: adapted {len(adapted)} modules, expected {len(expected)} "
                        f"({sorted(set(expected) ^ set(adapted))[:3]} ...)")
    return adapted


def _tuner_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    with quiet_bitsandbytes():
        from peft.tuners.tuners_utils import BaseTunerLayer
    return [(n, m) for n, m in model.named_modules() if isinstance(m, BaseTunerLayer)]


def adapted_module_names(model: nn.Module) -> list[str]:
    """The modules that carry an adapter, outermost only (peft's LoRA on an
    nn.MultiheadAttention also wraps its out_proj inside it; that counts as the one MHA)."""
    names = [n for n, _ in _tuner_layers(model)]
    return [n for n in names if not any(n.startswith(o + ".") for o in names)]


def adapter_names(model: nn.Module) -> set[str]:
    """Names of the trainable adapter tensors (peft's `adapter_layer_names`: lora_A/lora_B,
    DoRA's magnitude, VeRA's λ_b/λ_d), not the frozen base weights nor VeRA's shared projections."""
    out = set()
    for prefix, layer in _tuner_layers(model):
        for attr in layer.adapter_layer_names:
            for n, _ in getattr(layer, attr).named_parameters():
                out.add(f"{prefix}.{attr}.{n}")
    return out


def bias_names(model: nn.Module) -> set[str]:
    """BitFit: every bias (a module's own parameter named `bias` or `*_bias`, e.g. MHA's
    `in_proj_bias`), LayerNorm biases included, as FoMo-in-Flux's "bias" selection."""
    return {f"{m}.{p}" if m else p for m, mod in model.named_modules()
            for p, _ in mod.named_parameters(recurse=False) if p == "bias" or p.endswith("_bias")}


def layernorm_names(model: nn.Module) -> set[str]:
    """LNFit: the weights and biases of every nn.LayerNorm (open_clip: ln_pre, ln_1, ln_2,
    ln_post, ln_final), selected by module type."""
    return {f"{m}.{p}" for m, mod in model.named_modules() if isinstance(mod, nn.LayerNorm)
            for p, _ in mod.named_parameters(recurse=False)}


def image_tower_names(model: nn.Module) -> set[str]:
    """The image tower: every parameter under `model.visual`."""
    if not isinstance(getattr(model, "visual", None), nn.Module):
        raise VlcpError(f"{type(model).__name__} has no image tower `visual` (locked towers need an open_clip CLIP)")
    return {f"visual.{n}" for n, _ in model.visual.named_parameters()}


def text_tower_names(model: nn.Module) -> set[str]:
    """The text tower: everything of the CLIP outside `visual` (token and positional
    embeddings, transformer, ln_final, text_projection) and the logit scale, as FoMo-in-Flux's
    locked text head."""
    image = image_tower_names(model)
    return {n for n, _ in model.named_parameters() if n not in image}


def freeze_all_but(model: nn.Module, keep: Collection[str] | Callable[[str, nn.Parameter], bool]) -> list[str]:
    """Make exactly the parameters in `keep` (names, or a predicate on (name, parameter))
    trainable and freeze the rest; returns the trainable names. Raises VlcpError when `keep`
    names a parameter the model lacks or selects nothing."""
    params = dict(model.named_parameters())
    if not callable(keep):
        missing = sorted(set(keep) - set(params))
        if missing:
            raise VlcpError(f"freeze_all_but: {type(model).__name__} has no parameter {missing[0]!r}")
        names = set(keep)
        keep = lambda n, p: n in names  # noqa: E731
    trainable = []
    for n, p in params.items():
        p.requires_grad_(bool(keep(n, p)))
        if p.requires_grad:
            trainable.append(n)
    if not trainable:
        raise VlcpError(f"freeze_all_but: the selection leaves no trainable parameter in {type(model).__name__}")
    return trainable
