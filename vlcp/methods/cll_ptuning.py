"""P-Tuning v2 (Liu et al. 2022) on the language stream: deep prefix tuning, `prefix_length`
trainable key/value prefix vectors at every text-encoder layer, one set per language, older
ones frozen (†). Prefixes live in the attention's input space (projected by the frozen
in-projection); CLFM used the `adapters` library's prefix tuning (length 30 with an MLP
reparametrisation), scaled down here."""
from dataclasses import dataclass

import torch
from torch import nn

from vlcp.fields import ranged
from vlcp.methods import register
from vlcp.methods.cll_per_language import PerLanguage


@register
class CLLPTuning(PerLanguage):
    name = "cll-ptuning"
    key = "ptuning"

    @dataclass
    class Config(PerLanguage.Config):
        prefix_length: int = ranged(4, ge=1)

    def new_module(self, model):
        p = torch.randn(model.layers, 1, self.cfg.prefix_length, model.width, generator=self.gen) * 0.02
        return nn.ParameterList([nn.Parameter(x) for x in p])

    def forward_with(self, model, module, tokens, eot):
        return model(tokens, eot, prefixes=list(module) if module is not None else None)
