"""The CLL-CLIP study's experiments as params.yaml resolves them: Table 2's joint-learning upper
bound is plain CLL-CLIP (CLFM's JointTrain_CLL_CLIP: CLL_CLIP + the oracle vocab, no TEIR), and
the SGD control's weight decay follows the study's decay budget (lr x wd x steps per task =
0.033), so that decay alone does not wipe the embedding out within a task."""
import copy

import pytest
import torch

from vlcp.config import load_params, resolve_experiment
from vlcp.data.languages import XM3600
from vlcp.methods import get_method
from vlcp.train.budget import allocate_steps
from vlcp.train.optim import RowScaledAdamW, RowScaledSGD
from vlcp.train.schedules import lr_fn, plan_for

PROFILES = ("tiny", "small", "paper")
SGD = ("cll-sgd", "cll-sgd-grad", "cll-sgd-decay")


@pytest.fixture(scope="module")
def params():
    return load_params("params.yaml")


def resolved(params, name, profile):
    p = copy.deepcopy(params)
    p["profile"] = profile
    return resolve_experiment(p, name)


class Embeddings(torch.nn.Module):
    """What CLLCLIP.make_optimizer reads of a CLLText: the token embedding and the temperature."""

    def __init__(self, rows=6, width=4):
        super().__init__()
        self.embedding = torch.nn.Embedding(rows, width)
        self.logit_scale = torch.nn.Parameter(torch.zeros(()))


def method_of(cfg):
    cls = get_method(cfg.method.name)
    return cls(cls.Config(**cfg.method.args))


def steps_per_task(cfg) -> list[int]:
    n = cfg.data.num_languages or len(XM3600)
    return allocate_steps(cfg.train.steps, [1] * n, cfg.train.steps_split)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", ["cll-joint", "cll36-joint"])
def test_joint_upper_bound_is_plain_cll_clip(params, profile, name):
    """Table 2's "Joint Learning: CLL-CLIP" row: no identical-distribution init, no row scales in
    the optimizer (TEIR's λ would scale the gradient and decay of every row); the oracle vocab."""
    cfg = resolved(params, name, profile)
    args = cfg.method.args
    assert cfg.method.name == "cll-joint" and args["oracle_vocab"]
    assert not (args["teir"] or args["identical_init"] or args["grad_reg"] or args["decay_reg"]), args
    method = method_of(cfg)
    model = Embeddings()
    method.scale = torch.tensor([0.0, 0.5, 1.0, 0.0, 0.25, 0.0])   # a λ, as before_task computes it
    opt = method.make_optimizer(model, cfg.train)
    assert type(opt) is RowScaledAdamW
    assert opt.row_grad_scale is None and opt.row_decay_scale is None and opt.live is None


def decay_budget(cfg) -> float:
    return cfg.train.lr * cfg.train.weight_decay * steps_per_task(cfg)[1]


def decay_kept(cfg) -> float:
    """The share of a row's norm that weight decay alone keeps over one (the second) task of the
    run's schedule: prod over steps of (1 - lr_t wd), RowScaled's decoupled decay at λ = 1."""
    steps = steps_per_task(cfg)
    lr_at = lr_fn(cfg.train.schedule, plan_for(cfg.train, steps), 1)
    kept = 1.0
    for step in range(steps[1]):
        kept *= 1 - lr_at(step) * cfg.train.weight_decay
    return kept


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", SGD)
def test_sgd_control_keeps_the_embedding_over_a_task(params, profile, name):
    """Weight decay alone (zero gradients) over one task of the SGD control keeps >= 90% of every
    row's norm (exp(-0.033) = 96.8% at the budget); lr 1.0 with the AdamW runs' weight decay kept
    (1 - lr wd)^steps of it (0.03% on tiny). The budget is the AdamW runs' of the same profile
    (cll-clip). On the study's profile (tiny) the optimizer its method builds is stepped."""
    cfg = resolved(params, name, profile)
    assert cfg.method.args["optimizer"] == "sgd"
    assert decay_budget(cfg) == pytest.approx(decay_budget(resolved(params, "cll-clip", profile)), rel=0.02)
    kept = decay_kept(cfg)
    assert kept >= 0.9, f"{name} ({profile}): rows keep {kept:.2%} of their norm over a task"
    if profile != "tiny":
        return
    steps = steps_per_task(cfg)
    lr_at = lr_fn(cfg.train.schedule, plan_for(cfg.train, steps), 1)
    torch.manual_seed(0)
    model = Embeddings()
    w0 = model.embedding.weight.detach().clone()
    method = method_of(cfg)
    method.scale = torch.ones(len(w0))        # λ = 1: the rows a task uses the first time decay fully
    opt = method.make_optimizer(model, cfg.train)
    assert isinstance(opt, RowScaledSGD)
    for step in range(steps[1]):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        model.embedding.weight.grad = torch.zeros_like(w0)
        opt.step()
    ratio = model.embedding.weight.detach().norm(dim=1) / w0.norm(dim=1)
    assert ratio.tolist() == pytest.approx([kept] * len(w0), rel=1e-5)
