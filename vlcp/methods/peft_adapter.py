"""The shared part of FoMo-in-Flux's adapter methods (LoRA, DoRA, VeRA): inject one peft adapter
into every targeted layer of both towers once per run (`prepare_model`, so checkpoints hold the
adapter tensors), freeze everything else, then train as plain fine-tuning. The adapters persist
across tasks and are never merged into the base weights.

Targets (`PEFT_TARGETS`): every projection of open_clip's residual blocks (`attn.qkv`,
`attn.proj`, `c_fc`, `c_proj`). `prepare_model` first rebuilds each block's MHA as
`vlcp.models.adapters.ProjectedAttention` (the same weights and computation, its projections as
called `nn.Linear` layers), which peft's DoRA and VeRA can wrap.

A subclass names the method, its Config (an `AdapterConfig` subclass) and `peft_config()`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from vlcp.fields import check_ranges, ranged
from vlcp.errors import ConfigError
from vlcp.methods.base import Method
from vlcp.models.adapters import ProjectedAttention  # noqa: F401  (re-exported)
from vlcp.models.adapters import adapter_names, check_targets, freeze_all_but, inject_peft, project_attention

# the layers LoRA, DoRA and VeRA adapt (peft suffix matching), in both towers' residual blocks
PEFT_TARGETS = ("attn.qkv", "attn.proj", "c_fc", "c_proj")


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
