"""CODA-Prompt (Smith et al. 2023) on the language stream: a pool of prompt components
(`per_task` new ones per task, length `length`, at `layers`), each with a key K_m and an
attention vector A_m; a text's prompt is Σ_m α_m P_m with α_m = cos(q ⊙ A_m, K_m) over every
component learned so far. Earlier tasks' components are frozen; a new task's components are
Gram–Schmidt orthogonalised against the earlier ones when created (CLFM: pool 36 × 5,
length 2, layers 0–4)."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.fields import ranged
from vlcp.methods import register
from vlcp.methods.cll_prompts import KeyQueryPrompts


def orthogonal_to(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """Rows of `new` made orthogonal to the rows of `old` and to each other (Gram–Schmidt)."""
    basis = [b for b in F.normalize(old, dim=1)] if len(old) else []
    out = []
    for v in new:
        for b in basis:
            v = v - (v @ b) * b
        v = F.normalize(v, dim=0)
        basis.append(v)
        out.append(v)
    return torch.stack(out)


@register
class CLLCodaPrompt(KeyQueryPrompts):
    name = "cll-codaprompt"
    key = "codaprompt"

    @dataclass
    class Config(KeyQueryPrompts.Config):
        layers: list[int] = ranged(factory=lambda: [0, 1], ge=0)   # text-encoder layers given prompts
        per_task: int = ranged(5, ge=1)     # prompt components added per task
        length: int = ranged(2, ge=1)       # prompt length (tokens)

    def before_task(self, model, ctx):
        super().before_task(model, ctx)
        s = self.store(model)
        w, d = model.width, model.text_projection.shape[1]
        dev = model.embedding.weight.device
        if "p" not in s:
            s["p"], s["k"], s["a"] = nn.ParameterList(), nn.ParameterList(), nn.ParameterList()
        for p in list(s["p"]) + list(s["k"]) + list(s["a"]):
            p.requires_grad_(False)
        n = self.cfg.per_task
        shapes = {"p": (n, len(self.cfg.layers) * self.cfg.length * w), "k": (n, d), "a": (n, d)}
        for name, shape in shapes.items():
            old = torch.cat([x.detach().flatten(1) for x in s[name]]) if len(s[name]) else torch.zeros(0, shape[1])
            init = orthogonal_to(torch.randn(*shape, generator=self.gen), old.cpu()) if old.shape[0] + n <= shape[1] \
                else torch.randn(*shape, generator=self.gen)
            init = init * 0.02 if name == "p" else init
            if name == "p":
                init = init.view(n, len(self.cfg.layers), self.cfg.length, w)
            s[name].append(nn.Parameter(init.to(dev)))

    def prefixes(self, model, q, ctx=None):
        s = self.store(model)
        p, k, a = (torch.cat(list(s[x])) for x in ("p", "k", "a"))
        alpha = (F.normalize(q[:, None, :] * a[None], dim=-1) * F.normalize(k, dim=-1)[None]).sum(-1)   # [B, M]
        prompt = torch.einsum("bm,mlpw->blpw", alpha, p)
        out = [None] * model.layers
        for i, layer in enumerate(self.cfg.layers):
            out[layer] = prompt[:, i]
        return out, None
