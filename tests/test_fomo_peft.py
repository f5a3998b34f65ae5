"""FoMo-in-Flux's parameter-efficient and tower-locking methods on the tiny open_clip CLIP:
LoRA / DoRA / VeRA (peft adapters: identity at init, every adapter tensor trains, nothing
else does, checkpoints round-trip), BitFit / LNFit / locked towers (exact parameter
selections), GaLore (projected groups, the loss falls), config errors, and LoRA / VeRA through
the real runner with resume."""
import copy
import re

import pytest
import torch

import vlcp.methods.bitfit  # noqa: F401  (register the methods)
import vlcp.methods.dora  # noqa: F401
import vlcp.methods.galore  # noqa: F401
import vlcp.methods.lnfit  # noqa: F401
import vlcp.methods.locked_image  # noqa: F401
import vlcp.methods.locked_text  # noqa: F401
import vlcp.methods.lora  # noqa: F401
import vlcp.methods.vera  # noqa: F401
from conftest import SMALL_TASKS, strip_timings as strip
from vlcp.config import TrainCfg, experiment_from_dict
from vlcp.errors import ConfigError
from vlcp.methods import get_method
from vlcp.methods.base import Batch
from vlcp.models.adapters import adapted_module_names, freeze_all_but, layernorm_names
from vlcp.models.clip import create_clip

ADAPTERS = ["lora", "dora", "vera"]
ADAPTER_TENSOR = re.compile(r"\.(lora_A|lora_B|lora_magnitude_vector|vera_lambda_b|vera_lambda_d)\.")


@pytest.fixture(scope="module")
def clip():
    torch.manual_seed(0)
    model, _ = create_clip("vlcp-tiny", None, "cpu", 32)
    return model


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(1)
    return Batch(images=torch.randn(16, 3, 32, 32, generator=g), tokens=torch.randint(1, 5000, (16, 24), generator=g),
                 ids=torch.arange(16))


def prepared(clip, name, seed=0, **args):
    model = copy.deepcopy(clip)
    method = get_method(name)(get_method(name).Config(**args), seed=seed)
    method.prepare_model(model)
    return model, method


def features(model, batch):
    with torch.no_grad():
        return model(batch.images, batch.tokens)[:2]


def train_steps(model, method, batch, steps, lr=1e-2, opt=None):
    """`steps` optimizer steps (the method's optimizer unless `opt`) of the method's loss on one
    batch; returns (losses, the names of the parameters that got a non-zero gradient)."""
    opt = opt or method.make_optimizer(model, TrainCfg(lr=lr, weight_decay=0.0))
    losses, touched = [], set()
    for _ in range(steps):
        loss = sum(method.loss(model, batch, None).values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        touched |= {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
        opt.step()
        losses.append(loss.item())
    return losses, touched


def trainable(model):
    return {n for n, p in model.named_parameters() if p.requires_grad}

# -- LoRA / DoRA / VeRA -------------------------------------------------------------------


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_is_identity_at_init(clip, batch, name):
    model, _ = prepared(clip, name)
    for a, b in zip(features(model, batch), features(clip, batch)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ADAPTERS)
def test_every_adapter_tensor_trains_and_nothing_else(clip, batch, name):
    model, method = prepared(clip, name)
    targets = method.cfg.target_modules
    # one adapter per targeted Linear of both towers (the MHAs rebuilt as attn.qkv / attn.proj), none elsewhere
    blocks = [n[:-len(".attn")] for n, m in clip.named_modules() if isinstance(m, torch.nn.MultiheadAttention)]
    expected = {f"{b}.{layer}" for b in blocks for layer in ("attn.qkv", "attn.proj", "mlp.c_fc", "mlp.c_proj")}
    assert len(expected) == 2 * 2 * len(targets)               # 2 towers × 2 blocks × targets
    assert set(adapted_module_names(model)) == expected
    adapters = trainable(model)
    assert adapters and all(ADAPTER_TENSOR.search(n) for n in adapters)
    assert not any(p.requires_grad for n, p in model.named_parameters() if not ADAPTER_TENSOR.search(n))
    assert any(".attn.qkv." in n for n in adapters) and any(".attn.proj." in n for n in adapters)
    base = {n: p.detach().clone() for n, p in model.state_dict().items() if not ADAPTER_TENSOR.search(n)}
    init = {n: p.detach().clone() for n, p in model.named_parameters() if n in adapters}
    # LoRA's A (VeRA's Λ_d) has no gradient at step 0 because B (Λ_b) starts at 0: two steps
    _, touched = train_steps(model, method, batch, 2)
    assert touched == adapters
    after = model.state_dict()
    for n, p in base.items():
        assert torch.equal(after[n], p), n
    assert all(not torch.equal(p, init[n]) for n, p in model.named_parameters() if n in adapters)   # all moved


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_checkpoint_round_trips(clip, batch, name):
    """A checkpoint of an adapted model loads (strictly) into a freshly prepared one built
    with another seed and reproduces its outputs: what resume relies on."""
    model, method = prepared(clip, name, seed=1)
    train_steps(model, method, batch, 2)
    fresh, _ = prepared(clip, name, seed=2)
    fresh.load_state_dict(model.state_dict())
    for a, b in zip(features(fresh, batch), features(model, batch)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_lora_scale_maps_to_peft_alpha(clip):
    model, _ = prepared(clip, "lora", r=8, scale=0.5)
    layer = model.transformer.resblocks[0].mlp.c_fc
    assert layer.r["default"] == 8 and layer.scaling["default"] == pytest.approx(0.5)   # ΔW = 0.5 · B A


def test_vera_projections_follow_the_method_seed(clip):
    a = prepared(clip, "vera", seed=3)[0].transformer.resblocks[0].mlp.c_fc.vera_A["default"]
    b = prepared(clip, "vera", seed=3)[0].transformer.resblocks[0].mlp.c_fc.vera_A["default"]
    c = prepared(clip, "vera", seed=4)[0].transformer.resblocks[0].mlp.c_fc.vera_A["default"]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_adapter_init_leaves_the_global_rng_alone(clip):
    torch.manual_seed(7)
    prepared(clip, "lora")
    x = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(torch.rand(3), x)

# -- parameter selections -------------------------------------------------------------------


SELECTIONS = {
    "bitfit": lambda n: n.endswith("bias"),
    "lnfit": lambda n: re.search(r"(^|\.)ln_(pre|1|2|post|final)\.(weight|bias)$", n) is not None,
    "locked-image": lambda n: not n.startswith("visual."),
    "locked-text": lambda n: n.startswith("visual."),
}


@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_selection_trains_exactly_its_parameters(clip, batch, name):
    model, method = prepared(clip, name)
    names = {n for n, _ in model.named_parameters()}
    expected = {n for n in names if SELECTIONS[name](n)}
    assert trainable(model) == expected and 0 < len(expected) < len(names)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    _, touched = train_steps(model, method, batch, 1)
    assert touched == expected                              # every selected tensor gets a gradient
    assert all(p.grad is None for n, p in model.named_parameters() if n not in expected)
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]) == (n not in expected), n


def test_towers_and_logit_scale(clip):
    text = trainable(prepared(clip, "locked-image")[0])
    image = trainable(prepared(clip, "locked-text")[0])
    assert not text & image and text | image == {n for n, _ in clip.named_parameters()}
    assert {"logit_scale", "token_embedding.weight", "positional_embedding", "text_projection",
            "ln_final.weight"} <= text                      # logit scale: frozen with the text tower
    assert {"visual.conv1.weight", "visual.proj", "visual.ln_post.bias"} <= image


def test_lnfit_selects_by_module_type():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    model.add_module("ln_fake", torch.nn.Linear(2, 2))      # an "ln_" name that is no LayerNorm
    assert layernorm_names(model) == {"1.weight", "1.bias"}
    with pytest.raises(Exception, match="no trainable"):
        freeze_all_but(model, set())

# -- GaLore ----------------------------------------------------------------------------------


def test_galore_projects_matrices_and_lowers_the_loss(clip, batch):
    from galore_torch import GaLoreAdamW

    model, method = prepared(clip, "galore", rank=4, update_proj_gap=50, scale=0.25)
    assert trainable(model) == {n for n, _ in clip.named_parameters()}   # full fine-tuning
    opt = method.make_optimizer(model, TrainCfg(lr=1e-3, weight_decay=0.1))
    assert isinstance(opt, GaLoreAdamW)
    projected = [g for g in opt.param_groups if "rank" in g]
    assert len(projected) == 1 and projected[0]["rank"] == 4 and projected[0]["proj_type"] == "std"
    names = {id(p): n for n, p in model.named_parameters()}
    got = {names[id(p)] for p in projected[0]["params"]}
    assert got == {n for n, p in model.named_parameters() if p.ndim == 2 and "positional" not in n}
    assert {"transformer.resblocks.0.attn.in_proj_weight", "visual.transformer.resblocks.1.mlp.c_fc.weight",
            "token_embedding.weight", "text_projection"} <= got
    plain = [names[id(p)] for g in opt.param_groups if "rank" not in g for p in g["params"]]
    assert not got & set(plain) and len(got) + len(plain) == len(names)       # each parameter once
    assert all(g["weight_decay"] == 0.0 for g in opt.param_groups if "rank" not in g
               for p in g["params"] if p.ndim < 2)
    losses, _ = train_steps(model, method, batch, 6, opt=opt)
    assert losses[-1] < losses[0] - 0.1, losses
    for p in projected[0]["params"]:   # each matrix's gradient went through a rank-4 projector
        assert 4 in opt.state[p]["projector"].ortho_matrix.shape
        assert opt.state[p]["exp_avg"].numel() < p.numel()

# -- config errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("name,args,field", [
    ("lora", {"r": 0}, "r"),
    ("lora", {"scale": 0.0}, "scale"),
    ("lora", {"target_modules": ["c_fc", "out_proj"]}, "target_modules"),
    ("lora", {"target_modules": ["attn.out_proj"]}, "target_modules"),
    ("lora", {"target_modules": []}, "target_modules"),
    ("dora", {"target_modules": ["attn"]}, "target_modules"),
    ("vera", {"target_modules": ["c_fc", "attn"]}, "target_modules"),
    ("vera", {"r": -1}, "r"),
    ("vera", {"d_initial": 0.0}, "d_initial"),
    ("galore", {"rank": 0}, "rank"),
    ("galore", {"update_proj_gap": 0}, "update_proj_gap"),
    ("galore", {"proj_type": "diagonal"}, "proj_type"),
])
def test_config_error_names_the_field(name, args, field):
    with pytest.raises(ConfigError, match=rf"^{field}:"):
        get_method(name).Config(**args)
    with pytest.raises(ConfigError, match=rf"^method\.{field}:"):   # as the experiment config reports it
        experiment_from_dict({"data": {"root": "unused"}, "method": {"name": name, **args}})


def test_target_matching_nothing_is_an_error(clip):
    with pytest.raises(ConfigError, match="target_modules: 'q_proj' matches no"):
        prepared(clip, "lora", target_modules=["c_fc", "q_proj"])

# -- through the runner: resume equals the uninterrupted run -------------------------------------


@pytest.mark.parametrize("name", ["lora", "vera"])
def test_resume_equals_uninterrupted(emoji_root, tmp_path, name):
    from vlcp.run import run_experiment

    cfg = experiment_from_dict({
        "name": f"test-{name}", "seed": 0, "data": {"root": str(emoji_root), "tasks": SMALL_TASKS[:2]},
        "model": {"name": "vlcp-tiny"}, "method": {"name": name},
        "train": {"steps": 8, "batch_size": 16, "lr": 1e-2, "progress": False, "device": "cpu", "num_threads": 1},
        "eval": {"batch_size": 256}})
    full = run_experiment(cfg, tmp_path / "full")
    partial = run_experiment(cfg, tmp_path / "part", stop_after_task=0)
    assert len(partial["cumulative"]) == 1 and not (tmp_path / "part" / "results.json").exists()
    state = torch.load(tmp_path / "part" / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert any(ADAPTER_TENSOR.search(k) for k in state["model"])      # adapters are in the checkpoint
    resumed = run_experiment(cfg, tmp_path / "part")
    assert strip(resumed) == strip(full)
    final = torch.load(tmp_path / "full" / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]
    zero_at_init = [k for k in final if re.search(r"\.(lora_B|vera_lambda_b)\.", k)]
    assert zero_at_init and all(final[k].abs().sum() > 0 for k in zero_at_init)   # the adapters trained
