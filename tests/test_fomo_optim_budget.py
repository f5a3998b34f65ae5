"""The FoMo-in-Flux study's optimiser (FoMo's code: torch's AdamW over every parameter, decay
0.2, β2 0.999, ε 1e-8, cosine to 1e-3 × lr), its steps per task (floored) and the memory term of
its MAFs budget (what a method keeps across tasks: offloaded as the paper does, or counted)."""
import copy

import pytest
import torch

from vlcp.config import TrainCfg, experiment_from_dict, load_params, resolve_experiment
from vlcp.methods.base import Batch, TaskContext


class TinyClip(torch.nn.Module):
    """A CLIP-shaped toy: image / text features and the exp'd logit scale, like vlcp's CLIPs."""

    def __init__(self):
        super().__init__()
        self.visual = torch.nn.Linear(12, 8)
        self.token_embedding = torch.nn.Embedding(20, 8)
        self.text_projection = torch.nn.Linear(8, 8)
        self.ln_final = torch.nn.LayerNorm(8)
        self.logit_scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, images, tokens):
        img = torch.nn.functional.normalize(self.visual(images.flatten(1)), dim=-1)
        txt = torch.nn.functional.normalize(self.text_projection(self.ln_final(self.token_embedding(tokens).mean(1))), dim=-1)
        return img, txt, self.logit_scale.exp()


def tiny_ctx(n=16, task=0):
    g = torch.Generator().manual_seed(0)
    images, tokens = torch.randn(n, 3, 2, 2, generator=g), torch.randint(0, 20, (n, 5), generator=g)
    ids = torch.arange(n)
    return TaskContext(task=task, num_tasks=2, train_set=None, task_ids=[ids], pool=ids,
                       materialize=lambda i: Batch(images[i], tokens[i], i), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def params():
    return load_params("params.yaml")


# --------------------------------------------------------------------------- 1. the optimiser

def fomo_code_adamw(model, lr):
    """FoMo's code (continual_lib/utils/base_continual_learner.py): `torch.optim.AdamW(to_optimize)`,
    to_optimize = [{"params": every parameter, "lr": optimizer.lr, "weight_decay": optimizer.weight_decay}]
    with configs/experiment/*.yaml's weight_decay 0.2 and torch's defaults β = (0.9, 0.999), ε = 1e-8."""
    return torch.optim.AdamW([{"params": list(model.parameters()), "lr": lr, "weight_decay": 0.2}])


@pytest.mark.parametrize("profile", ["tiny", "paper"])
def test_fomo_study_optimizer_is_fomo_codes_adamw(params, profile):
    p = copy.deepcopy(params)
    p["profile"] = profile
    train = resolve_experiment(p, "fomo-ft").train
    assert (train.weight_decay, train.decay_all, train.beta2, train.adam_eps, train.min_lr_ratio) == \
        (0.2, True, 0.999, 1e-8, 0.001)
    from vlcp.train.optim import make_optimizer

    torch.manual_seed(0)
    ours_model = TinyClip()
    ref_model = copy.deepcopy(ours_model)
    ours = make_optimizer(ours_model, TrainCfg(**{**train.__dict__, "lr": 0.05}))
    ref = fomo_code_adamw(ref_model, 0.05)
    ctx = tiny_ctx()
    from vlcp.methods.base import base_terms
    for step in range(3):
        for m, opt in ((ours_model, ours), (ref_model, ref)):
            opt.zero_grad()
            sum(base_terms(m, ctx.materialize(torch.arange(8) + step)).values()).backward()
            opt.step()
    for (n, a), b in zip(ours_model.named_parameters(), ref_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7), n   # gains, biases and the logit scale decay too


def test_other_studies_keep_their_optimizer(params):
    """Only the FoMo study takes FoMo's code's AdamW: the spine's seqf keeps decay 0.1 on matrices
    only, β2 0.98, ε 1e-6."""
    from vlcp.train.optim import make_optimizer

    train = resolve_experiment(params, "seqf").train
    assert (train.decay_all, train.adam_eps, train.beta2) == (False, 1e-6, 0.98)
    opt = make_optimizer(TinyClip(), train)
    assert sorted(g["weight_decay"] for g in opt.param_groups) == [0.0, train.weight_decay]
    assert all(g["eps"] == 1e-6 and g["betas"] == (0.9, 0.98) for g in opt.param_groups)


# --------------------------------------------------------------------------- 2. steps per task

def test_steps_per_task_are_floored_as_fomos_code():
    """FoMo's steps = n_samples // batch size (utils/training.py): floored, never rounded up."""
    from vlcp.run.streams.concepts import scaled_steps

    assert scaled_steps(7, 0.5) == 3 and scaled_steps(3, 0.5) == 1
    assert scaled_steps(1420, 0.4) == 568 and scaled_steps(1420, 20) == 28400   # T = 50 and the joint run, Table 4
    assert scaled_steps(100, 0.29) == 29 and scaled_steps(10, 0.01) == 1


# --------------------------------------------------------------------------- 3. the memory term

def budget_cfg(method, state_memory):
    return experiment_from_dict({"name": "fomo-x", "data": {"stream": "concepts"}, "method": method,
                                 "fomo": {"state_memory": state_memory},
                                 "train": {"batch_size": 8, "device": "cpu", "progress": False}})


def stored_bytes(method):
    return sum(t.numel() * t.element_size() for d in (method.fisher, method.anchors) for t in d.values())


def test_ewc_state_counts_in_device_memory_and_is_offloaded_by_default():
    """`state_memory: device`: EWC's training memory = full fine-tuning's + its stored F and θ*
    (nested in its state_dict, which the accounting used to skip) + its penalty's activations;
    `offloaded` (the default, the paper's CPU offloading): full fine-tuning's + the activations."""
    from vlcp.methods import get_method
    from vlcp.run.accounting import step_cost

    ewc_args = {"name": "ewc", "fisher_batches": 1, "fisher_batch_size": 8}
    model = TinyClip()
    for mode in ("device", "offloaded"):
        cfg = budget_cfg(ewc_args, mode)
        seqf = step_cost(model, get_method("seqf")(), tiny_ctx(), cfg, torch.device("cpu"))["memory"]
        ewc = get_method("ewc")(get_method("ewc").Config(fisher_batches=1, fisher_batch_size=8))
        mem = step_cost(model, ewc, tiny_ctx(), cfg, torch.device("cpu"))["memory"]
        probe = copy.deepcopy(ewc)   # step_cost ran on copies: the method itself has no Fisher yet
        assert probe.fisher is None
        probe.after_task(copy.deepcopy(model), tiny_ctx())
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        assert stored_bytes(probe) == 2 * params
        kept = (mem["total"] - mem["activations"]) - (seqf["total"] - seqf["activations"])
        assert mem["activations"] > seqf["activations"]   # the penalty's saved (θ − θ*) and F, in both modes
        if mode == "device":
            assert mem["method"] == kept == stored_bytes(probe)
        else:
            assert mem["method"] == kept == 0


def test_held_tensors_flattens_nested_state():
    from vlcp.run.accounting import held_tensors

    a, b, c = torch.zeros(2), torch.ones(3), torch.zeros(1)
    assert [t.numel() for t in held_tensors({"fisher": {"w": a}, "anchors": {"w": b}, "x": [c, (a,)], "n": 3,
                                             "none": None})] == [2, 3, 1, 2]


def test_state_memory_is_validated():
    from vlcp.errors import ConfigError

    with pytest.raises(ConfigError, match="fomo.state_memory: must be 'offloaded' or 'device'"):
        budget_cfg({"name": "seqf"}, "gpu")
