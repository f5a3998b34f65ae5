"""DoRA (Liu et al. 2024) as in FoMo-in-Flux: W' = m · (W₀ + scale · B A) / ‖W₀ + scale · B A‖
(per-output-row norm, detached as in DoRA §4.3), m initialised to the row norms of W₀, so the
model is unchanged at init. LoRA's Config and peft's `use_dora=True`.

Targets: `PEFT_TARGETS` (peft_adapter.py), the same layers as LoRA and VeRA (attention
`attn.qkv`, `attn.proj`, MLP `c_fc`, `c_proj`); on the packed q/k/v in-projection the magnitude
is one vector over its 3E output rows, as FoMo-in-Flux's DoRA on MHA.

peft computes DoRA on activations, (m/‖W+sBA‖ − 1)·(W x) + m/‖W+sBA‖·s·B A x, and saves two
[batch, tokens, out] tensors per adapted layer for backward; FoMo-in-Flux's code (DoRA's eq. 5)
rescales the weight, which costs [out, in] copies independent of the batch. Same outputs and
gradients, more training memory here (a FoMo deviation: DoRA's memory multiplier).
"""
from __future__ import annotations

from dataclasses import dataclass

from vlcp.methods import register
from vlcp.methods.lora import LoRA, LoRAConfig


@dataclass
class DoRAConfig(LoRAConfig):
    """LoRA's fields (r, scale, target_modules)."""


@register
class DoRA(LoRA):
    name = "dora"
    Config = DoRAConfig
    use_dora = True
