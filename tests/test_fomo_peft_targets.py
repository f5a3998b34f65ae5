"""FoMo-in-Flux's PEFT placement: LoRA, DoRA and VeRA adapt the same layers (FoMo's code gives
all three one placement; the paper does not say), every one of them live: the attention's q/k/v
in-projection and out-projection (each nn.MultiheadAttention rebuilt from called Linear layers,
which it must match exactly) and the MLP's c_fc / c_proj; adapters get gradients, base weights
don't."""
import copy

import pytest
import torch

import vlcp.methods.dora  # noqa: F401  (register the methods)
import vlcp.methods.lora  # noqa: F401
import vlcp.methods.vera  # noqa: F401
from vlcp.errors import ConfigError
from vlcp.methods import get_method
from vlcp.methods.base import Batch
from vlcp.methods.peft_adapter import PEFT_TARGETS, ProjectedAttention
from vlcp.models.adapters import adapted_module_names, adapter_names
from vlcp.models.clip import create_clip

ADAPTERS = ["lora", "dora", "vera"]


@pytest.fixture(scope="module")
def clip():
    torch.manual_seed(0)
    return create_clip("vlcp-tiny", None, "cpu", 32)[0]


def prepared(clip, name):
    model = copy.deepcopy(clip)
    method = get_method(name)(get_method(name).Config(), seed=0)
    method.prepare_model(model)
    return model, method


def test_lora_dora_vera_adapt_the_same_modules(clip):
    blocks = [n[:-len(".attn")] for n, m in clip.named_modules() if isinstance(m, torch.nn.MultiheadAttention)]
    assert len(blocks) == 4                                    # 2 towers × 2 blocks
    expected = sorted(f"{b}.{t}" for b in blocks for t in ("attn.qkv", "attn.proj", "mlp.c_fc", "mlp.c_proj"))
    for name in ADAPTERS:
        assert get_method(name).Config().target_modules == list(PEFT_TARGETS), name
        assert sorted(adapted_module_names(prepared(clip, name)[0])) == expected, name


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapters_get_gradients_and_base_weights_do_not(clip, name):
    model, method = prepared(clip, name)
    g = torch.Generator().manual_seed(1)
    batch = Batch(images=torch.randn(8, 3, 32, 32, generator=g), tokens=torch.randint(1, 5000, (8, 24), generator=g),
                  ids=torch.arange(8))
    with torch.no_grad():   # B (LoRA, DoRA) / Λ_b (VeRA) start at 0: make every adapter tensor's gradient non-zero
        for n, p in model.named_parameters():
            if n.endswith(("lora_B.default.weight", "vera_lambda_b.default")):
                p.normal_(0, 0.1, generator=g)
    sum(method.loss(model, batch, None).values()).backward()
    adapters = adapter_names(model)
    for layer in ("attn.qkv", "attn.proj", "mlp.c_fc", "mlp.c_proj"):   # the attention's adapters are live too
        assert any(f".{layer}." in n for n in adapters), layer
    for n, p in model.named_parameters():
        if n in adapters:
            assert p.requires_grad and p.grad is not None and p.grad.abs().sum() > 0, n
        else:
            assert not p.requires_grad and p.grad is None, n


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask", [None, "causal-float", "causal-bool", "per-head"])
def test_projected_attention_equals_multihead_attention(batch_first, mask):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first)
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    ours = ProjectedAttention(mha)
    x = torch.randn(3, 5, 16) if batch_first else torch.randn(5, 3, 16)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    attn_mask = {None: None, "causal-bool": causal,
                 "causal-float": torch.zeros(5, 5).masked_fill(causal, float("-inf")),
                 "per-head": torch.randn(3 * 4, 5, 5)}[mask]
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = mha(x1, x1, x1, need_weights=False, attn_mask=attn_mask)[0]
    got = ours(x2, x2, x2, need_weights=False, attn_mask=attn_mask)[0]
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    want.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.qkv.weight.grad, mha.in_proj_weight.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.proj.weight.grad, mha.out_proj.weight.grad, atol=1e-5, rtol=1e-5)


def test_projected_attention_rejects_cross_attention():
    ours = ProjectedAttention(torch.nn.MultiheadAttention(8, 2, batch_first=True))
    with pytest.raises(Exception, match="self-attention only"):
        ours(torch.randn(1, 3, 8), torch.randn(1, 3, 8), torch.randn(1, 3, 8))


@pytest.mark.parametrize("name", ADAPTERS)
@pytest.mark.parametrize("target", ["attn", "attn.out_proj", "out_proj"])
def test_retired_attention_targets_name_the_field(name, target):
    with pytest.raises(ConfigError, match=r"^target_modules: .*'attn\.qkv'"):
        get_method(name).Config(target_modules=["c_fc", target])
