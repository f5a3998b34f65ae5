"""GaLore (Zhao et al. 2024) as in FoMo-in-Flux: full fine-tuning with galore-torch's
`GaLoreAdamW`. Every trainable 2-D weight matrix (vlcp's weight-decay group) gets a GaLore group:
its gradient is projected to rank `rank` (the projector, from an SVD of the gradient, refreshed
every `update_proj_gap` steps), Adam runs in the low-rank space and the update is projected back
and scaled by `scale`; the other parameters keep vlcp's plain AdamW groups
(`vlcp.train.optim.param_groups`). The optimizer is re-created at each task; weight decay is
decoupled (to every parameter with `train.decay_all`), eps is galore-torch's 1e-6, betas
(0.9, `train.beta2`). bitsandbytes, which `import galore_torch` pulls in, is imported quietly
(`quiet_bitsandbytes`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.fields import check_ranges, ranged
from vlcp.errors import ConfigError
from vlcp.methods import register
from vlcp.methods.base import Method
from vlcp.models.adapters import quiet_bitsandbytes
from vlcp.train.optim import param_groups, require_adamw

PROJ_TYPES = ("std", "reverse_std", "right", "left", "full")


def galore_param_groups(model: torch.nn.Module, weight_decay: float, galore: dict, decay_all: bool = False) -> list[dict]:
    """vlcp's decay / no-decay groups (`decay_all` as `param_groups`), with the 2-D matrices of
    the decay group moved to one GaLore group carrying `galore` ({rank, update_proj_gap, scale, proj_type})."""
    decayed = next((g["params"] for g in param_groups(model, 1.0, decay_all=decay_all) if g["weight_decay"]), [])
    matrices = [p for p in decayed if p.ndim == 2]
    rest = param_groups(model, weight_decay, exclude=matrices, decay_all=decay_all)
    return ([{"params": matrices, "weight_decay": weight_decay, **galore}] if matrices else []) + rest


@register
class GaLore(Method):
    name = "galore"

    @dataclass
    class Config:
        rank: int = ranged(8, ge=1)
        update_proj_gap: int = ranged(200, ge=1)   # steps
        scale: float = ranged(2.0, gt=0)
        proj_type: str = "std"

        def __post_init__(self):
            check_ranges(self)
            if self.proj_type not in PROJ_TYPES:
                raise ConfigError(f"proj_type: must be one of {', '.join(PROJ_TYPES)}, got {self.proj_type!r}")

    def make_optimizer(self, model, cfg):
        with quiet_bitsandbytes():
            from galore_torch import GaLoreAdamW

        require_adamw(cfg, "GaLore", "GaLoreAdamW")

        galore = {"rank": self.cfg.rank, "update_proj_gap": self.cfg.update_proj_gap, "scale": self.cfg.scale,
                  "proj_type": self.cfg.proj_type}
        return GaLoreAdamW(galore_param_groups(model, cfg.weight_decay, galore, cfg.decay_all), lr=cfg.lr, betas=(0.9, cfg.beta2),
                           eps=1e-6, weight_decay=0.0, no_deprecation_warning=True)
