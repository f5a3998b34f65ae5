"""LoRA (Hu et al. 2022) as in FoMo-in-Flux: ΔW = scale · B A on every targeted layer of both
towers, through peft (`LoraConfig`, injected in place by `PeftAdapter.prepare_model`); only
the adapters train.

- `scale` is FoMo-in-Flux's weighting of BA (its α, "set to a constant α = 1"): peft scales by
  lora_alpha / r, so lora_alpha = scale · r.
- Targets: `PEFT_TARGETS` (peft_adapter.py), the same layers as DoRA and VeRA: the attention's
  q/k/v in-projection `attn.qkv` and out-projection `attn.proj` (each MHA rebuilt from called
  Linear layers) and the MLP's `c_fc`, `c_proj`. FoMo-in-Flux's own code skipped `c_fc` (a
  substring filter on "fc") and had a dead out_proj adapter; here every targeted layer is live.
- Init: peft's (A Kaiming-uniform with a = √5, B = 0; FoMo-in-Flux used a = √r), so the model
  is unchanged at init; dropout 0. Adapter draws come from the method seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from vlcp.fields import ranged
from vlcp.methods import register
from vlcp.methods.peft_adapter import AdapterConfig, PeftAdapter
from vlcp.models.adapters import quiet_bitsandbytes


@dataclass
class LoRAConfig(AdapterConfig):
    scale: float = ranged(1.0, gt=0)   # ΔW = scale · B A (peft lora_alpha = scale · r)


@register
class LoRA(PeftAdapter):
    name = "lora"
    Config = LoRAConfig
    use_dora: ClassVar[bool] = False

    def peft_config(self):
        with quiet_bitsandbytes():
            from peft import LoraConfig

        return LoraConfig(r=self.cfg.r, lora_alpha=self.cfg.scale * self.cfg.r,
                          target_modules=list(self.cfg.target_modules), lora_dropout=0.0, bias="none",
                          use_dora=self.use_dora)
