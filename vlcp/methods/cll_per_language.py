"""The base of the methods that add modules per language (MLA's adapters, P-Tuning's prefixes,
LoRA): a new module for each task's language, the older ones frozen, the token embeddings
still trained (as CLFM). They need the task identity at inference (†): with `oracle` the
language's own module is used; without it, the latest task's (what a deployed model without a
language identifier would run). Not a method itself."""
from __future__ import annotations

import torch
from torch import nn

from vlcp.methods.cllclip import CLLCLIP
from vlcp.train.distributed import unwrap


class PerLanguage(CLLCLIP):
    needs_task_id = True
    key = "per_language"

    def new_module(self, model) -> nn.Module:
        raise NotImplementedError

    def forward_with(self, model, module: nn.Module | None, tokens, eot) -> torch.Tensor:
        raise NotImplementedError

    def modules_of(self, model) -> nn.ModuleDict:
        model = unwrap(model)
        if self.key not in model.extras:
            model.extras[self.key] = nn.ModuleDict()
        return model.extras[self.key]

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        mods = self.modules_of(model)
        for m in mods.values():
            m.requires_grad_(False)
        for lang in ctx.extras["languages"]:
            mods[f"lang_{lang}"] = self.new_module(model).to(model.embedding.weight.device)
        self.latest = f"lang_{ctx.extras['languages'][-1]}"

    def text_features(self, model, batch, ctx):
        mods = self.modules_of(model)
        return self.forward_with(model, mods[f"lang_{batch.langs[0]}"], batch.tokens, batch.eot)

    @torch.no_grad()
    def encode_eval(self, model, lang, texts, oracle=True):
        mods = self.modules_of(model)
        key = f"lang_{lang}" if oracle and f"lang_{lang}" in mods else getattr(self, "latest", None)
        return self.forward_with(model, mods[key] if key in mods else None, *model.encode(texts))

    def state_dict(self):
        return super().state_dict() | {"latest": getattr(self, "latest", None)}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.latest = state["latest"]
