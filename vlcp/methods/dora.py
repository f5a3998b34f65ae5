"""DoRA (Liu et al. 2024) as in FoMo-in-Flux: W' = m · (W₀ + scale · B A) / ‖W₀ + scale · B A‖
(per-output-row norm, detached as in DoRA §4.3), m initialised to the row norms of W₀, so the
model is unchanged at init. LoRA's Config and peft's `use_dora=True`.

Targets default to the MLP layers `c_fc`, `c_proj`: peft's DoRA does not support
nn.MultiheadAttention (`attn` is rejected), and `out_proj` of open_clip's default blocks is
never called (rejected). FoMo-in-Flux's own DoRA adapted MHA's in-projection; on
`block_type: "custom"` open_clip blocks `attn.qkv`-style Linear layers could be targeted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from vlcp.methods import register
from vlcp.methods.lora import LoRA, LoRAConfig


@dataclass
class DoRAConfig(LoRAConfig):
    target_modules: list[str] = field(default_factory=lambda: ["c_fc", "c_proj"])

    supports_mha: ClassVar[bool] = False


@register
class DoRA(LoRA):
    name = "dora"
    Config = DoRAConfig
    use_dora = True
