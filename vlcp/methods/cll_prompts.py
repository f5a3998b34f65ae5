"""The base of the key–query prompt methods (DualPrompt, CodaPrompt) on the language stream:
prompts are prefix key/values of the frozen text encoder's layers, chosen per text by a query,
the text's own feature computed without prompts (an extra no-grad forward, as CLFM), so no task
identity is needed at inference. Not a method itself."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.methods.cllclip import CLLCLIP
from vlcp.train.distributed import unwrap


class KeyQueryPrompts(CLLCLIP):
    key = "prompts"

    def store(self, model) -> nn.ModuleDict:
        model = unwrap(model)
        if self.key not in model.extras:
            model.extras[self.key] = nn.ModuleDict()
        return model.extras[self.key]

    @torch.no_grad()
    def query(self, model, tokens, eot) -> torch.Tensor:
        return F.normalize(model(tokens, eot), dim=-1)

    def prefixes(self, model, q: torch.Tensor, ctx=None) -> tuple[list, torch.Tensor | None]:
        """(per-layer prefixes [B, P, W] or None, an extra loss term or None)."""
        raise NotImplementedError

    def text_features(self, model, batch, ctx):
        q = self.query(model, batch.tokens, batch.eot)
        prefixes, extra = self.prefixes(model, q, ctx)
        if extra is not None:
            ctx.extras["prompt_loss"] = extra
        return model(batch.tokens, batch.eot, prefixes=prefixes)

    def loss(self, model, batch, ctx):
        terms = super().loss(model, batch, ctx)
        extra = ctx.extras.pop("prompt_loss", None)
        if extra is not None:
            terms["prompt"] = extra
        return terms

    @torch.no_grad()
    def encode_eval(self, model, lang, texts, oracle=True):
        tokens, eot = model.encode(texts)
        if self.key not in unwrap(model).extras:
            return model(tokens, eot)
        prefixes, _ = self.prefixes(model, self.query(model, tokens, eot))
        return model(tokens, eot, prefixes=prefixes)
