"""VeRA (Kopiczko et al. 2024) as in FoMo-in-Flux: W' = W₀ + Λ_b B Λ_d A with frozen random
projections A [r, in], B [out, r] shared by all adapted layers (sliced to each layer's shape)
and trainable vectors Λ_d ∈ R^r, Λ_b ∈ R^out, through peft's VeraConfig.

- Init (peft, as the VeRA paper): Λ_b = 0, Λ_d = `d_initial` (0.1), so the model is unchanged at
  init. FoMo-in-Flux's own code swapped them (rank vector 0, output vector 0.1); either way
  ΔW = 0 at init and one of the two vectors gets no gradient on the first step.
- The projections are Kaiming-uniform from `projection_prng_key`, derived from the method seed
  (same seed, same projections); they are saved in checkpoints (peft's save_projection).
- Targets: `PEFT_TARGETS` (peft_adapter.py), the same layers as LoRA and DoRA (attention
  `attn.qkv`, `attn.proj`, MLP `c_fc`, `c_proj`; peft's VeRA wraps Linear layers, so each MHA is
  rebuilt from called Linear layers first). The shared projections are sized to the largest
  in/out of the adapted layers and sliced per layer.
"""
from __future__ import annotations

from dataclasses import dataclass

from vlcp.fields import ranged
from vlcp.methods import register
from vlcp.methods.peft_adapter import AdapterConfig, PeftAdapter
from vlcp.models.adapters import quiet_bitsandbytes
from vlcp.utils import derive_seed


@dataclass
class VeRAConfig(AdapterConfig):
    # initial value of the rank-sized vector Λ_d (any sign; peft's default 0.1)
    d_initial: float = ranged(0.1, nonzero=True, note="with Λ_b = 0 at init, Λ_d = 0 would never get a gradient")


@register
class VeRA(PeftAdapter):
    name = "vera"
    Config = VeRAConfig

    def peft_config(self):
        with quiet_bitsandbytes():
            from peft import VeraConfig

        return VeraConfig(r=self.cfg.r, target_modules=list(self.cfg.target_modules), d_initial=self.cfg.d_initial,
                          projection_prng_key=derive_seed(self.seed, "vera-projection"), save_projection=True,
                          vera_dropout=0.0, bias="none")
