"""MLA (Zhang, Hu and Jin 2022, "Multi-Lingual Acquisition") on the language stream: a
bottleneck adapter per language after every text-encoder layer (CLFM's MLA.json: output adapter,
ReLU, reduction factor 2), added residually; one per language, older ones frozen (†)."""
from dataclasses import dataclass

from torch import nn

from vlcp.fields import ranged
from vlcp.methods import register
from vlcp.methods.cll_per_language import PerLanguage


class Adapter(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.down, self.up = nn.Linear(width, hidden), nn.Linear(hidden, width)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)     # starts as the identity: the frozen encoder unchanged

    def forward(self, x):
        return self.up(self.down(x).relu())


@register
class CLLMLA(PerLanguage):
    name = "cll-mla"
    key = "mla"

    @dataclass
    class Config(PerLanguage.Config):
        reduction: int = ranged(2, ge=1)

    def new_module(self, model):
        return nn.ModuleList(Adapter(model.width, max(1, model.width // self.cfg.reduction)) for _ in range(model.layers))

    def forward_with(self, model, module, tokens, eot):
        return model(tokens, eot, adapters=list(module) if module is not None else None)
