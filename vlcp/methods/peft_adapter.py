"""The shared part of FoMo-in-Flux's adapter methods (LoRA, DoRA, VeRA): inject one peft
adapter into every targeted layer of both towers once per run (`prepare_model`, so checkpoints
hold the adapter tensors and a resume loads them), freeze everything else, then train as plain
fine-tuning (the loop's AdamW over the trainable parameters, re-created every task). As in
FoMo-in-Flux, the adapters persist across tasks and are never merged into the base weights.

Targets (`PEFT_TARGETS`, the one list all three use): every projection of open_clip's residual
blocks, i.e. the attention's packed q/k/v in-projection (`attn.qkv`) and out-projection
(`attn.proj`) and the MLP's `c_fc`, `c_proj`. FoMo-in-Flux's paper does not say which layers
its adapters target; its code gives LoRA, DoRA and VeRA one placement: the attention's q/k/v
in-projection and `c_proj` (its `c_fc` was skipped by a substring filter on "fc" and its
`out_proj` adapter was dead). peft's DoRA and VeRA cannot wrap an `nn.MultiheadAttention`, and
MHA never calls its `out_proj`, so `prepare_model` first rebuilds each block's MHA as
`ProjectedAttention` (the same weights and the same computation, with the two projections as
called `nn.Linear` layers); then every method adapts the same Linear layers.

A subclass names the method, its Config (an `AdapterConfig` subclass) and `peft_config()`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.fields import check_ranges, ranged
from vlcp.errors import ConfigError, VlcpError
from vlcp.methods.base import Method
from vlcp.models.adapters import adapter_names, check_targets, freeze_all_but, inject_peft

# the layers LoRA, DoRA and VeRA adapt (peft suffix matching), in both towers' residual blocks
PEFT_TARGETS = ("attn.qkv", "attn.proj", "c_fc", "c_proj")


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


def check_peft_targets(targets, field: str = "target_modules") -> None:
    """`check_targets` plus the names that the attention rebuild retires: `attn` (no
    nn.MultiheadAttention is left to adapt) and `out_proj` (now `attn.proj`)."""
    if isinstance(targets, (list, tuple)):
        for t in targets:
            if isinstance(t, str) and t.split(".")[-1] in ("attn", "out_proj", "in_proj"):
                raise ConfigError(f"{field}: {t!r} is not a layer here: every adapter's attention targets are "
                                  "'attn.qkv' (the q/k/v in-projection) and 'attn.proj' (the out-projection)")
    check_targets(targets, field, mha_ok=False)


@dataclass
class AdapterConfig:
    r: int = ranged(4, ge=1)                     # rank (FoMo-in-Flux's tables: 4 and 64)
    target_modules: list[str] = field(default_factory=lambda: list(PEFT_TARGETS))

    def __post_init__(self):
        check_ranges(self)
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise ConfigError(f"r: must be an integer >= 1, got {self.r!r}")
        check_peft_targets(self.target_modules, "target_modules")
        self.target_modules = list(self.target_modules)


class PeftAdapter(Method):
    """Base of the peft adapter methods; not registered itself."""
    Config: ClassVar[type] = AdapterConfig

    def peft_config(self):
        """The peft config (LoraConfig / VeraConfig) built from `self.cfg`."""
        raise NotImplementedError

    def prepare_model(self, model):
        super().prepare_model(model)
        project_attention(model)
        self.adapted = inject_peft(model, self.peft_config(), seed=self.seed)
        freeze_all_but(model, adapter_names(model))
