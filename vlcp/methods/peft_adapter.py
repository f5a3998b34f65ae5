"""The shared part of FoMo-in-Flux's adapter methods (LoRA, DoRA, VeRA): inject one peft
adapter into every targeted layer of both towers once per run (`prepare_model`, so checkpoints
hold the adapter tensors and a resume loads them), freeze everything else, then train as plain
fine-tuning (the loop's AdamW over the trainable parameters, re-created every task). As in
FoMo-in-Flux, the adapters persist across tasks and are never merged into the base weights.

A subclass names the method, its Config (an `AdapterConfig` subclass) and `peft_config()`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from vlcp.config import check_ranges, ranged
from vlcp.errors import ConfigError
from vlcp.methods.base import Method
from vlcp.models.adapters import adapter_names, check_targets, freeze_all_but, inject_peft


@dataclass
class AdapterConfig:
    r: int = ranged(4, ge=1)                     # rank (FoMo-in-Flux's tables: 4 and 64)
    target_modules: list[str] = field(default_factory=lambda: ["c_fc", "c_proj"])

    supports_mha: ClassVar[bool] = False         # may target `attn` (nn.MultiheadAttention)

    def __post_init__(self):
        check_ranges(self)
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise ConfigError(f"r: must be an integer >= 1, got {self.r!r}")
        check_targets(self.target_modules, "target_modules", mha_ok=self.supports_mha)
        self.target_modules = list(self.target_modules)


class PeftAdapter(Method):
    """Base of the peft adapter methods; not registered itself."""
    Config: ClassVar[type] = AdapterConfig

    def peft_config(self):
        """The peft config (LoraConfig / VeraConfig) built from `self.cfg`."""
        raise NotImplementedError

    def prepare_model(self, model):
        super().prepare_model(model)
        self.adapted = inject_peft(model, self.peft_config(), seed=self.seed)
        freeze_all_but(model, adapter_names(model))
