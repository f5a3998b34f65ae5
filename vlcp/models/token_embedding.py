"""CLL-CLIP's text side (Yang et al., AAAI 2024): CLIP's frozen text encoder fed by an
expandable token embedding layer.

`CLLText` keeps CLIP's positional embeddings, transformer, final LayerNorm and projection
(frozen unless `train_tower`), and owns:
- `embedding`: the expandable token embedding θ_t (`ExpandableEmbedding`), initialised from
  CLIP's token embedding; `expand` appends rows for new tokens (stable ids);
- `vocab`: the matching `vlcp.data.bpe.Vocab`;
- `logit_scale`: the cross-modal loss's learnable temperature (init 1/0.07, as OpenCLIP);
- `extras`: modules a method adds (adapters, prompts), so they train, checkpoint and move with
  the model.
`forward(tokens, eot, prefixes=None, adapters=None)` returns unnormalised text features pooled
at the explicit end-of-text positions. `prefixes[i]` ([B or 1, P, W]) are prepended to layer
i's attention keys and values (prefix tuning, as P-Tuning v2 and the prompt methods use);
`adapters[i]` is added residually after layer i (MLA's output adapters).
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from vlcp.data.bpe import Vocab


class ExpandableEmbedding(nn.Module):
    lookup_table = True   # used by lookup only: under DDP its used rows are averaged (vlcp.train.distributed)

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)

    @torch.no_grad()
    def expand(self, n: int, mean: float, std: float, generator: torch.Generator | None = None) -> None:
        """Append n rows drawn from N(mean, std²); existing rows (and ids) are unchanged."""
        if n <= 0:
            return
        new = torch.randn(n, self.weight.shape[1], generator=generator) * std + mean
        self.weight = nn.Parameter(torch.cat([self.weight.data, new.to(self.weight)]),
                                   requires_grad=self.weight.requires_grad)


EVAL_BUCKETS, EVAL_BUCKET_ROWS = 4, 64    # eval-mode length buckets: at most 4, of at least 64 rows


class CLLText(nn.Module):
    def __init__(self, clip: nn.Module, vocab: Vocab, init_temperature: float = 0.07):
        super().__init__()
        clip = copy.deepcopy(clip)
        self.transformer = clip.transformer
        self.positional_embedding = clip.positional_embedding
        self.ln_final = clip.ln_final
        self.text_projection = clip.text_projection
        self.register_buffer("attn_mask", clip.attn_mask, persistent=False)
        self.context_length = clip.context_length
        self.embedding = ExpandableEmbedding(clip.token_embedding.weight)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / init_temperature)))
        self.extras = nn.ModuleDict()
        self.vocab = vocab
        self.train_tower(False)

    def train_tower(self, on: bool) -> None:
        """Freeze (CLL-CLIP) or train (Fig. 4's full-model ablation) the text encoder."""
        for m in (self.transformer, self.ln_final):
            m.requires_grad_(on)
        self.positional_embedding.requires_grad_(on)
        self.text_projection.requires_grad_(on)   # a Parameter or an nn.Linear: both take requires_grad_

    @property
    def width(self) -> int:
        return self.embedding.weight.shape[1]

    @property
    def layers(self) -> int:
        return len(self.transformer.resblocks)

    def encode(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens and end-of-text positions under the current vocab, on the model's device, padded
        to the batch's longest row rather than the context length (the text tower is causal and
        pools at EOT, so the padding after it never reaches the feature; captions of ~15 tokens
        cost a fifth of a 77-token pass)."""
        tok, eot = self.vocab.encode(texts, self.context_length)
        dev = self.embedding.weight.device
        n = int(eot.max()) + 1 if len(eot) else tok.shape[1]
        return tok[:, :n].to(dev), eot.to(dev)

    def forward(self, tokens: torch.Tensor, eot: torch.Tensor, prefixes=None, adapters=None) -> torch.Tensor:
        """Text features [B, D]. In eval mode the rows are sorted by length and run in up to
        `EVAL_BUCKETS` groups, each padded to its own longest row: the same features (the padding
        after EOT never reaches them) for about two thirds of the padded positions. Training
        batches run whole."""
        buckets = min(EVAL_BUCKETS, len(eot) // EVAL_BUCKET_ROWS)
        if self.training or buckets < 2:
            return self._forward(tokens, eot, prefixes, adapters)
        order = torch.argsort(eot)
        out = []
        per_row = lambda p: p is not None and p.dim() == 3 and len(p) == len(eot)  # noqa: E731  (else shared [1, P, W])
        for rows in torch.tensor_split(order, buckets):
            out.append(self._forward(tokens[rows, : int(eot[rows].max()) + 1], eot[rows],
                                     None if prefixes is None else [p[rows] if per_row(p) else p for p in prefixes],
                                     adapters))
        return torch.cat(out)[torch.argsort(order)]

    def _forward(self, tokens: torch.Tensor, eot: torch.Tensor, prefixes=None, adapters=None) -> torch.Tensor:
        n = tokens.shape[1]                       # <= context_length (see encode)
        x = self.embedding(tokens) + self.positional_embedding[:n]
        mask = self.attn_mask[:n, :n]
        for i, blk in enumerate(self.transformer.resblocks):
            p = prefixes[i] if prefixes is not None else None
            if p is None:
                x = blk(x, attn_mask=mask)
            else:
                h = blk.ln_1(x)
                kv = torch.cat([p.expand(len(x), -1, -1), h], dim=1)
                m = torch.cat([mask.new_zeros(mask.shape[0], p.shape[1]), mask], dim=1)
                x = x + blk.ls_1(blk.attn(h, kv, kv, need_weights=False, attn_mask=m)[0])
                x = x + blk.ls_2(blk.mlp(blk.ln_2(x)))
            if adapters is not None and adapters[i] is not None:
                x = x + adapters[i](x)
        x = self.ln_final(x)[torch.arange(len(x), device=x.device), eot]
        proj = self.text_projection
        return proj(x) if isinstance(proj, nn.Linear) else x @ proj
