"""Self-attention that takes q, k and v out of the packed in-projection by `unbind`.

torch's `nn.MultiheadAttention` takes them as `proj[0]`, `proj[1]`, `proj[2]`: in the backward
pass each index fills a zero tensor the size of all three (`select_backward`, `aten::fill_`)
and autograd adds the three together. `unbind`'s backward stacks the three gradients instead.
`PackedSelfAttention` runs the rest of torch's own path (`F.multi_head_attention_forward`
without weights) op for op, so its outputs and gradients are the same floats. It takes over
only when gradients flow; every other call goes to torch's forward unchanged.
`use_packed_self_attention` switches a model's attention modules to it in place, which keeps
their parameters, state dict keys and checkpoints as they were; `use_torch_attention` switches
them back (an export as open_clip builds the model).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class PackedSelfAttention(nn.MultiheadAttention):
    """`nn.MultiheadAttention` whose training-time self-attention takes q, k, v by `unbind`."""

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if (not self.serves(query, key, value, key_padding_mask, need_weights, is_causal)
                or (mask := sdpa_mask(attn_mask, query.dtype, *self.sizes(query))) is False):
            return super().forward(query, key, value, key_padding_mask=key_padding_mask, need_weights=need_weights,
                                   attn_mask=attn_mask, average_attn_weights=average_attn_weights,
                                   is_causal=is_causal)
        return self_attention(self, query, mask), None

    def serves(self, query, key, value, key_padding_mask, need_weights, is_causal) -> bool:
        """Whether torch would take its general path for this call (gradients flow, so no fast path)
        through the packed self-attention projection, without weights, a key padding mask or a causal
        hint: the calls `self_attention` reproduces. The others go to torch's forward."""
        params = (self.in_proj_weight, self.in_proj_bias, self.out_proj.weight, self.out_proj.bias)
        tensors = (query, *params)
        return (query is key and key is value and query.dim() == 3 and not query.is_nested
                and key_padding_mask is None and not need_weights and not is_causal
                and self._qkv_same_embed_dim and self.bias_k is None and self.bias_v is None and not self.add_zero_attn
                and torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
                and not torch.overrides.has_torch_function(tuple(t for t in tensors if t is not None)))

    def sizes(self, query) -> tuple[int, int, int]:
        """(batch, sequence length, heads) of a batched `query`."""
        b, t = (query.shape[0], query.shape[1]) if self.batch_first else (query.shape[1], query.shape[0])
        return b, t, self.num_heads


def sdpa_mask(attn_mask, dtype, batch: int, length: int, heads: int):
    """`attn_mask` as `F.multi_head_attention_forward` hands it to scaled_dot_product_attention for
    self-attention: boolean masks as float (-inf where masked), [L, L] and [B·H, L, L] as 4-D. None
    without a mask; False for a mask of another shape (torch's own forward then raises its error)."""
    if attn_mask is None:
        return None
    if attn_mask.dtype != torch.bool and not torch.is_floating_point(attn_mask):
        return False
    if attn_mask.dim() == 2 and attn_mask.shape == (length, length):
        attn_mask = attn_mask.unsqueeze(0)
    elif not (attn_mask.dim() == 3 and attn_mask.shape == (batch * heads, length, length)):
        return False
    if attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=dtype).masked_fill_(attn_mask, float("-inf"))
    return attn_mask.unsqueeze(0) if attn_mask.size(0) == 1 else attn_mask.view(batch, heads, -1, length)


def self_attention(mha: nn.MultiheadAttention, query: torch.Tensor, mask) -> torch.Tensor:
    """`mha(query, query, query, need_weights=False, attn_mask=...)[0]` by the ops of torch's general
    path (in-projection, scaled dot-product attention, out-projection), q, k and v by `unbind`;
    `mask`: the attention mask as `sdpa_mask` gives it."""
    x = query.transpose(1, 0) if mha.batch_first else query          # [L, B, E]
    length, batch, embed = x.shape
    heads = mha.num_heads
    proj = F.linear(x, mha.in_proj_weight, mha.in_proj_bias)
    q, k, v = (t.view(length, batch * heads, embed // heads).transpose(0, 1).view(batch, heads, length, embed // heads)
               for t in proj.unflatten(-1, (3, embed)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous().unbind(0))
    out = F.scaled_dot_product_attention(q, k, v, mask, mha.dropout if mha.training else 0.0, False)
    out = F.linear(out.permute(2, 0, 1, 3).reshape(batch * length, embed), mha.out_proj.weight, mha.out_proj.bias)
    out = out.view(length, batch, out.size(1))
    return out.transpose(1, 0) if mha.batch_first else out


def use_packed_self_attention(model: nn.Module) -> int:
    """Switch every plain `nn.MultiheadAttention` of `model` to `PackedSelfAttention`, in place (the
    same module, parameters and state dict); returns how many."""
    switched = [m for m in model.modules() if type(m) is nn.MultiheadAttention]
    for m in switched:
        m.__class__ = PackedSelfAttention
    return len(switched)


def use_torch_attention(model: nn.Module) -> int:
    """Switch every `PackedSelfAttention` of `model` back to `nn.MultiheadAttention`, in place; returns how many."""
    switched = [m for m in model.modules() if type(m) is PackedSelfAttention]
    for m in switched:
        m.__class__ = nn.MultiheadAttention
    return len(switched)
