"""PackedSelfAttention: torch's self-attention floats, without select_backward's zero fills."""
import copy

import pytest
import torch
from torch import nn

from vlcp.losses import clip_loss
from vlcp.models.attention import PackedSelfAttention, use_packed_self_attention, use_torch_attention


def backward_ops(out: torch.Tensor) -> set[str]:
    """The names of every autograd node behind `out`."""
    seen, todo = set(), [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo += [n for n, _ in node.next_functions]
    return {type(n).__name__ for n in seen}


def pair(batch_first: bool):
    torch.manual_seed(0)
    torch_mha = nn.MultiheadAttention(64, 2, batch_first=batch_first)
    packed = copy.deepcopy(torch_mha)
    assert use_packed_self_attention(packed) == 1 and type(packed) is PackedSelfAttention
    return torch_mha, packed


def masks(length: int, batch_heads: int) -> dict:
    causal = torch.ones(length, length, dtype=torch.bool).triu(1)
    return {"none": None, "float": torch.zeros(length, length).masked_fill(causal, float("-inf")), "bool": causal,
            "per head": torch.randn(batch_heads, length, length, generator=torch.Generator().manual_seed(1))}


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask", ["none", "float", "bool", "per head"])
def test_outputs_and_gradients_are_torchs_floats_without_select_backward(batch_first, mask):
    torch_mha, packed = pair(batch_first)
    x = torch.randn(8, 5, 64, generator=torch.Generator().manual_seed(2))
    length, batch = (5, 8) if batch_first else (8, 5)
    m = masks(length, batch * 2)[mask]
    outs = []
    for mha in (torch_mha, packed):
        xi = x.clone().requires_grad_()
        y = mha(xi, xi, xi, need_weights=False, attn_mask=m)[0]
        y.backward(torch.randn(y.shape, generator=torch.Generator().manual_seed(3)))
        outs.append((y, xi.grad, [p.grad for p in mha.parameters()], backward_ops(y)))
    (y0, gx0, gp0, ops0), (y1, gx1, gp1, ops1) = outs
    assert torch.equal(y0, y1) and torch.equal(gx0, gx1)
    assert all(torch.equal(a, b) for a, b in zip(gp0, gp1))
    assert "SelectBackward0" in ops0 and "SelectBackward0" not in ops1 and "UnbindBackward0" in ops1


def test_calls_it_does_not_reproduce_go_to_torchs_forward():
    torch_mha, packed = pair(True)
    x = torch.randn(4, 5, 64, generator=torch.Generator().manual_seed(2))
    other = torch.randn(4, 5, 64, generator=torch.Generator().manual_seed(4))
    torch_mha.eval(), packed.eval()
    with torch.no_grad():   # torch's fast path
        assert torch.equal(torch_mha(x, x, x, need_weights=False)[0], packed(x, x, x, need_weights=False)[0])
    for kwargs in ({"need_weights": True}, {"key_padding_mask": torch.zeros(4, 5, dtype=torch.bool)}):
        a, b = torch_mha(x, x, x, **kwargs), packed(x, x, x, **kwargs)
        assert torch.equal(a[0], b[0]) and (a[1] is None) == (b[1] is None)
    y = packed(x, other, other, need_weights=False)[0]   # not self-attention
    assert torch.equal(torch_mha(x, other, other, need_weights=False)[0], y) and "SelectBackward0" in backward_ops(y)
    with pytest.raises(RuntimeError):   # a mask of the wrong shape: torch's own error
        packed(x, x, x, need_weights=False, attn_mask=torch.zeros(3, 3))


def test_a_tiny_clip_steps_to_the_same_parameters_with_the_same_state_dict():
    """create_clip's models use it; an AdamW step of the tiny CLIP on torch's attention and on it
    gives the same loss and parameters, and the state dict is the one open_clip's model has."""
    from vlcp.models.clip import create_clip

    torch.manual_seed(0)
    model, _ = create_clip("vlcp-tiny")
    assert sum(type(m) is PackedSelfAttention for m in model.modules()) == 4   # 2 blocks per tower
    reference = copy.deepcopy(model)
    assert use_torch_attention(reference) == 4 and not any(type(m) is PackedSelfAttention for m in reference.modules())
    assert list(reference.state_dict()) == list(model.state_dict())
    g = torch.Generator().manual_seed(0)
    images, tokens = torch.randn(16, 3, 32, 32, generator=g), torch.randint(1, 49000, (16, 24), generator=g)
    losses = []
    for m in (reference, model):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True)
        for _ in range(2):
            loss = clip_loss(*m(images, tokens)[:3])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        losses.append(loss.detach())
    assert torch.equal(*losses)
    assert all(torch.equal(a, b) for a, b in zip(reference.parameters(), model.parameters()))
