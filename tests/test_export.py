"""Exporting a vlcp-trained CLIP as a plain open_clip state dict (vlcp.models.export): for plain
fine-tuning, BitFit / LNFit / a locked tower, and LoRA / DoRA / VeRA adapters (non-zero, so the
merge matters), open_clip itself loads the file strictly and computes the trained model's
features; the live model is never changed; the keys are open_clip's own."""
import copy

import open_clip
import pytest
import torch

from vlcp.errors import VlcpError
from vlcp.methods import get_method
from vlcp.models.adapters import adapted_module_names
from vlcp.models.clip import create_clip, register_configs
from vlcp.models.export import export_state_dict, load_open_clip, plain_model, save_open_clip

NAME = "vlcp-tiny"
ADAPTERS = ["lora", "dora", "vera"]
METHODS = ["seqf", "bitfit", "lnfit", "locked-image", *ADAPTERS]


@pytest.fixture(scope="module")
def clip():
    torch.manual_seed(0)
    model, _ = create_clip(NAME, None, "cpu")
    return model


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(1)
    tokens = open_clip.get_tokenizer(NAME)(["a cat", "a dog on the grass", "a red car", "two birds on a tree"])
    return torch.randn(4, 3, 32, 32, generator=g), tokens


def trained(clip, name: str, seed: int = 3) -> torch.nn.Module:
    """A copy of `clip` prepared by method `name` whose trainable tensors (adapters, biases,
    ...) were moved by random noise, as training would (LoRA's B, VeRA's Λ_b start at 0)."""
    model = copy.deepcopy(clip)
    method = get_method(name)(get_method(name).Config(), seed=0)
    method.prepare_model(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def features(model, batch):
    images, tokens = batch
    model.eval()
    with torch.no_grad():
        return model.encode_image(images, normalize=True), model.encode_text(tokens, normalize=True)


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def open_clip_keys():
    register_configs()
    return list(open_clip.create_model(NAME).state_dict())


@pytest.mark.parametrize("name", METHODS)
def test_open_clip_loads_the_export_and_computes_the_same(clip, batch, tmp_path, name):
    model = trained(clip, name)
    if name in ADAPTERS:
        assert adapted_module_names(model)                      # the export has something to merge
    path = tmp_path / "out" / "model.pt"
    save_open_clip(model, path, name=NAME)
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]   # no temporary left beside it
    register_configs()
    loaded = open_clip.create_model(NAME, pretrained=str(path))     # strict
    for got, want in zip(features(loaded, batch), features(model, batch)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", METHODS)
def test_export_is_a_plain_state_dict_and_leaves_the_model_alone(clip, name):
    model = trained(clip, name)
    before, grads = snapshot(model), {n: p.requires_grad for n, p in model.named_parameters()}
    adapted, training = adapted_module_names(model), model.training
    state = export_state_dict(model, NAME)
    assert list(state) == open_clip_keys()                     # open_clip's keys, in its order
    for k, t in state.items():
        assert t.device.type == "cpu" and t.is_contiguous() and not t.requires_grad, k
        assert t.dtype == torch.float32, k                     # the model's dtype
    after = model.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[k], v) for k, v in before.items())
    assert {n: p.requires_grad for n, p in model.named_parameters()} == grads
    assert adapted_module_names(model) == adapted and model.training == training
    if name not in ADAPTERS:                                   # nothing to merge: the weights themselves
        assert all(torch.equal(state[k], v) for k, v in before.items())


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapters_change_the_exported_weights(clip, name):
    """The merge is not a no-op: the adapted layers' exported weights differ from the base
    weights, the untouched ones (embeddings, LayerNorms) do not."""
    state, base = export_state_dict(trained(clip, name)), clip.state_dict()
    qkv = "transformer.resblocks.0.attn.in_proj_weight"
    assert not torch.equal(state[qkv], base[qkv]) and not torch.equal(
        state["visual.transformer.resblocks.1.mlp.c_fc.weight"], base["visual.transformer.resblocks.1.mlp.c_fc.weight"])
    assert torch.equal(state["token_embedding.weight"], base["token_embedding.weight"])
    assert torch.equal(state["ln_final.weight"], base["ln_final.weight"])


def test_plain_model_is_open_clips_module_tree(clip, batch):
    model = trained(clip, "dora")
    plain = plain_model(model)
    assert not adapted_module_names(plain)
    attns = [m for n, m in plain.named_modules() if n.endswith(".attn")]
    assert attns and all(type(m) is torch.nn.MultiheadAttention for m in attns)
    for got, want in zip(features(plain, batch), features(model, batch)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_export_draws_nothing_from_the_global_rng(clip):
    model = trained(clip, "lora")
    state = torch.random.get_rng_state()
    export_state_dict(model)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_load_open_clip_round_trips(clip, batch, tmp_path):
    model = trained(clip, "vera")
    save_open_clip(model, tmp_path / "model.pt")
    loaded, tokenizer = load_open_clip(NAME, tmp_path / "model.pt")
    assert torch.equal(tokenizer(["a cat"]), open_clip.get_tokenizer(NAME)(["a cat"]))
    for got, want in zip(features(loaded, batch), features(model, batch)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    with pytest.raises(VlcpError, match="no model file"):
        load_open_clip(NAME, tmp_path / "missing.pt")


def test_a_wrong_architecture_names_the_keys(clip):
    with pytest.raises(VlcpError, match=r"vlcp-small: unexpected keys: none; missing keys: .*resblocks\.2\."):
        export_state_dict(clip, "vlcp-small")          # 6 blocks per tower, tiny has 2
    with pytest.raises(VlcpError, match="unknown open_clip model"):
        export_state_dict(clip, "no-such-model")


def test_only_open_clip_models_export():
    with pytest.raises(VlcpError, match="Linear is not an open_clip CLIP"):
        export_state_dict(torch.nn.Linear(2, 2))
