"""DualPrompt (Wang et al. 2022) on the language stream: a shared G-prompt at `g_layers`
(length `g_length`) and a pool of task E-prompts at `e_layers` (length `e_length`), each with a
key. Training uses the current task's E-prompt (CLFM's task-id bootstrap) and pulls its key
towards the queries (weight `pull`, 1 − cosine); inference picks the E-prompt whose key is the
most similar to the query (top-1). CLFM: G at layers 0–1 (length 2), E at 2–4 (length 16) of 12;
our tiny text encoder has 2 layers: G at 0, E at 1."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.fields import ranged
from vlcp.methods import register
from vlcp.methods.cll_prompts import KeyQueryPrompts


@register
class CLLDualPrompt(KeyQueryPrompts):
    name = "cll-dualprompt"
    key = "dualprompt"

    @dataclass
    class Config(KeyQueryPrompts.Config):
        g_layers: list[int] = ranged(factory=lambda: [0], ge=0)   # layers of the shared (general) prompt
        e_layers: list[int] = ranged(factory=lambda: [1], ge=0)   # layers of the per-task (expert) prompts
        g_length: int = ranged(2, ge=1)
        e_length: int = ranged(8, ge=1)
        pull: float = ranged(1.0, ge=0)     # weight of the key-query pull term

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        s = self.store(model)
        w, d = model.width, model.text_projection.shape[1]
        dev = model.embedding.weight.device
        if "g" not in s:
            s["g"] = nn.ParameterList([nn.Parameter(torch.randn(1, self.cfg.g_length, w, generator=self.gen) * 0.02)
                                       for _ in self.cfg.g_layers]).to(dev)
            s["e"], s["key_vectors"] = nn.ParameterList(), nn.ParameterList()
        for p in list(s["e"]) + list(s["key_vectors"]):
            p.requires_grad_(False)
        s["e"].append(nn.Parameter((torch.randn(len(self.cfg.e_layers), self.cfg.e_length, w, generator=self.gen) * 0.02).to(dev)))
        s["key_vectors"].append(nn.Parameter((torch.randn(d, generator=self.gen) * 0.02).to(dev)))

    def prefixes(self, model, q, ctx=None):
        s = self.store(model)
        keys = F.normalize(torch.stack(list(s["key_vectors"])), dim=-1)
        if ctx is not None:        # training: the current task's prompt
            pick = torch.full((len(q),), len(keys) - 1, device=q.device)
            extra = self.cfg.pull * (1 - (q * keys[-1]).sum(-1)).mean()
        else:
            pick, extra = (q @ keys.T).argmax(1), None
        e = torch.stack(list(s["e"]))[pick]             # [B, len(e_layers), e_length, W]
        out = [None] * model.layers
        for i, layer in enumerate(self.cfg.g_layers):
            out[layer] = s["g"][i]
        for i, layer in enumerate(self.cfg.e_layers):
            out[layer] = e[:, i] if out[layer] is None else torch.cat([out[layer].expand(len(q), -1, -1), e[:, i]], 1)
        return out, extra
