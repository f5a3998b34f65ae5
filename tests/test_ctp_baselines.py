"""The CTP paper's memory-free baselines (SI, MAS, RWalk, AFEC, LwF) and EWC's Fisher merges:
their importances and penalties against hand-computed values on toy problems, and each method
through the real loop (`train_task`) on a tiny CLIP with synthetic data: two short tasks, a
state_dict round trip, and composition with ER."""
import copy
import io
import math
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vlcp.config import TrainCfg
from vlcp.errors import ConfigError
from vlcp.losses import mask_tokens
from vlcp.losses.regularizers import (ewc_penalty, merge_average, merge_fisher, quadratic_penalty_grad, support_rows,
                                      rwalk_score, si_importance)
from vlcp.methods import get_method
from vlcp.methods.base import Batch, Method, TaskContext, compose_configs, model_outputs
from vlcp.methods.afec import AFEC
from vlcp.methods.er import ER
from vlcp.methods.ewc import EWC
from vlcp.methods.lwf import LwF
from vlcp.methods.mas import MAS, output_energy
from vlcp.methods.rwalk import RWalk
from vlcp.methods.si import SI
from vlcp.train.loop import Materializer, train_task

N_PER_TASK = 16
CFG = TrainCfg(steps=6, batch_size=8, lr=1e-3, warmup_steps=1, progress=False, device="cpu", num_threads=1)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def tiny_clip():
    from vlcp.models import create_clip

    torch.manual_seed(0)
    return create_clip("vlcp-tiny")[0]


@pytest.fixture(scope="module")
def clip_data():
    g = torch.Generator().manual_seed(0)
    n = 2 * N_PER_TASK
    images = torch.randint(0, 256, (n, 32, 32, 3), generator=g, dtype=torch.uint8)
    tokens = torch.randint(1, 1000, (n, 1, 24), generator=g)
    tokens[:, :, 0] = 49406                       # start of text
    tokens[:, :, 6] = 49407                       # end of text (argmax pooling)
    tokens[:, :, 7:] = 0
    return Materializer(images, torch.arange(n), tokens, torch.device("cpu"), augment=False)


def make_ctx(task: int, materialize, seed: int = 0) -> TaskContext:
    task_ids = [torch.arange(N_PER_TASK), torch.arange(N_PER_TASK, 2 * N_PER_TASK)]
    gen = torch.Generator().manual_seed(1000 * seed + task)
    return TaskContext(task=task, num_tasks=2, train_set=None, task_ids=task_ids, pool=task_ids[task],
                       materialize=lambda ids, g=gen: materialize(ids, g), generator=gen)


def run_task(model, method, task, materialize, steps=3):
    ctx = make_ctx(task, materialize)
    stats = train_task(model, method, ctx, steps, CFG, torch.device("cpu"))
    method.after_task(model, ctx)
    return stats


def roundtrip(method) -> dict:
    buf = io.BytesIO()
    torch.save(method.state_dict(), buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


# a fake ALBEF: the output contract (NamedTuple with mlm_logits for the masked positions) and
# the encoders MAS reads, in a few hundred parameters

class FakeOut(NamedTuple):
    image_features: torch.Tensor
    text_features: torch.Tensor
    logit_scale: torch.Tensor
    mlm_logits: torch.Tensor | None


class FakeALBEF(nn.Module):
    vocab, dim = 12, 8

    def __init__(self):
        super().__init__()
        self.visual = nn.Linear(3 * 4 * 4, self.dim)
        self.embed = nn.Embedding(self.vocab, self.dim)
        self.fusion = nn.Linear(2 * self.dim, self.dim)       # only in encode_multimodal
        self.mlm_head = nn.Linear(self.dim, self.vocab)       # only in the MLM logits
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)), requires_grad=False)
        self.vision_proj, self.text_proj = nn.Identity(), nn.Identity()   # where ALBEF's raw features come out

    def encode_image(self, images, normalize=False):
        x = self.vision_proj(self.visual(images.flatten(1)))
        return F.normalize(x, dim=-1) if normalize else x

    def encode_text(self, tokens, normalize=False):
        x = self.text_proj(self.embed(tokens).mean(1))
        return F.normalize(x, dim=-1) if normalize else x

    def encode_multimodal(self, images, tokens, normalize=False):
        x = self.fusion(torch.cat([self.encode_image(images), self.encode_text(tokens)], -1))
        return F.normalize(x, dim=-1) if normalize else x

    def forward(self, images, tokens, mlm_input=None, mlm_mask=None):
        logits = None
        if mlm_input is not None:
            logits = self.mlm_head(self.embed(mlm_input) + self.encode_image(images)[:, None])[mlm_mask]
        return FakeOut(self.encode_image(images, True), self.encode_text(tokens, True), self.logit_scale.exp(), logits)


def fake_materialize(mlm: bool):
    data = torch.Generator().manual_seed(1)
    images = torch.randn(2 * N_PER_TASK, 3, 4, 4, generator=data)
    tokens = torch.randint(5, FakeALBEF.vocab, (2 * N_PER_TASK, 6), generator=data)

    def materialize(ids, g):
        b = Batch(images[ids], tokens[ids], ids)
        if mlm:
            b.mlm_input, b.mlm_labels = mask_tokens(b.tokens, g, FakeALBEF.vocab, 4, (0,), prob=0.5)
        return b
    return materialize


# ---------------------------------------------------------------- toy problems by hand


class Quadratic(nn.Module):
    """One parameter vector θ; the base loss Σ a (θ − c)²/2 + b·θ0·θ1 (no data)."""

    def __init__(self, theta):
        super().__init__()
        self.theta = nn.Parameter(torch.tensor(theta, dtype=torch.float64))


class QuadraticBase(Method):
    a, c, b = 2.0, 1.0, 0.0

    def loss(self, model, batch, ctx):
        t = model.theta
        return {"q": (self.a * (t - self.c) ** 2 / 2).sum() + self.b * t[0] * t[-1]}


class QuadSI(SI, QuadraticBase):
    pass


def sgd_task(method, model, steps, lr, ctx):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    method.before_task(model, ctx)
    for _ in range(steps):
        loss = sum(method.loss(model, None, ctx).values())
        opt.zero_grad()
        loss.backward()
        method.after_backward(model, ctx)
        opt.step()
        method.after_step(model, None, ctx)
    method.after_task(model, ctx)


def toy_ctx(task=0):
    return TaskContext(task=task, num_tasks=3, train_set=None, task_ids=[], pool=torch.arange(4),
                       materialize=lambda ids: None, generator=torch.Generator().manual_seed(0))


def test_si_omega_on_a_quadratic_matches_the_closed_form():
    # gradient descent on a(θ−c)²/2 from θ0: θ_k − c = r^k (θ0 − c), r = 1 − ηa, g_k = a(θ_k − c);
    # ω = −Σ g_k δθ_k = η Σ g_k² = η a² (θ0−c)² Σ_{k<K} r^{2k}; Δ = (r^K − 1)(θ0 − c)
    a, c, theta0, eta, steps, xi = 2.0, 1.0, 0.0, 0.1, 3, 0.1
    m, model = QuadSI(SI.Config(si_xi=xi)), Quadratic([theta0])
    sgd_task(m, model, steps, eta, toy_ctx())
    r = 1 - eta * a
    w = eta * a ** 2 * (theta0 - c) ** 2 * sum(r ** (2 * k) for k in range(steps))
    delta = (r ** steps - 1) * (theta0 - c)
    assert w == pytest.approx(0.4 + 0.256 + 0.16384)                 # by hand: g = -2, -1.6, -1.28
    assert m.omega["theta"].item() == pytest.approx(w / (delta ** 2 + xi), rel=1e-12)
    assert m.anchors["theta"].item() == pytest.approx(c + r ** steps * (theta0 - c))
    # a second task accumulates: Ω ← Ω + ω₂/(Δ₂² + ξ)
    first = m.omega["theta"].clone()
    sgd_task(m, model, 1, eta, toy_ctx(1))
    assert m.omega["theta"].item() > first.item()


def test_si_unregularised_gradient_equals_the_base_gradient():
    QuadraticBase.b = 0.7
    try:
        m, model = QuadSI(SI.Config(si_lambda=3.0)), Quadratic([0.2, -0.4, 1.5])
        sgd_task(m, model, 4, 0.1, toy_ctx())
        assert m.omega and (m.omega["theta"] != 0).any()
        m.before_task(model, toy_ctx(1))
        with torch.no_grad():
            model.theta.add_(torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64))   # the penalty is active
        terms = m.loss(model, None, toy_ctx(1))
        assert terms["si"].item() > 0
        want = torch.autograd.grad(terms["q"], model.theta, retain_graph=True)[0]
        model.zero_grad(set_to_none=True)
        sum(terms.values()).backward()
        assert not torch.allclose(model.theta.grad, want)                # the penalty's gradient is in .grad
        m.after_backward(model, toy_ctx(1))
        assert torch.allclose(m.si_path._grad["theta"], want, atol=1e-12)
    finally:
        QuadraticBase.b = 0.0


class ScaledQuadratic(Quadratic):
    """`Quadratic` with the frozen logit scale the loop clamps (so `train_task` runs it)."""

    def __init__(self, theta):
        super().__init__(theta)
        self.logit_scale = nn.Parameter(torch.tensor(0.0, dtype=torch.float64), requires_grad=False)


def coupled_quadratic(model):
    t = model.theta                                      # QuadraticBase with a = 2, c = 1, b = 0.7
    return (2.0 * (t - 1.0) ** 2 / 2).sum() + 0.7 * t[0] * t[-1]


def reference_task(model, steps, step_fn):
    """The loop's optimizer, LR schedule and clipping (vlcp.train.loop.train_task with CFG) around
    a ported per-step SI update `step_fn(opt)`, which backpropagates and returns after clipping."""
    from vlcp.train.optim import make_optimizer
    from vlcp.train.schedules import lr_fn, plan_for
    opt, lr_at = make_optimizer(model, CFG), lr_fn(CFG.schedule, plan_for(CFG, [steps]), 0)
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        step_fn(opt)


def ctp_si_reference(theta0, tasks, steps, lamda=1.0, damping=0.1):
    """Ported from KevinLight831/CTP, train/train_SI.py (`update_train`, `compute_SI`, and the
    end-of-task importance update in `main_SI`), on the coupled quadratic; the loop's gradient
    clipping added before `optimizer.step()` (the loop clips; the CTP code does not)."""
    model = ScaledQuadratic(theta0)
    named = lambda: {n: p for n, p in model.named_parameters() if p.requires_grad}  # noqa: E731
    w = {n: torch.zeros(p.shape, dtype=p.dtype) for n, p in named().items()}
    older_params = {n: p.clone().detach() for n, p in named().items()}
    importance = {n: torch.zeros(p.shape, dtype=p.dtype) for n, p in named().items()}

    def compute_SI():
        return lamda * sum(torch.sum(importance[n] * (p - older_params[n]).pow(2)) for n, p in named().items())

    for iteration in range(tasks):
        def step(optimizer):
            curr_feat_ext = {n: p.clone().detach() for n, p in named().items()}
            loss = coupled_quadratic(model)
            optimizer.zero_grad()
            if iteration > 0:
                loss.backward(retain_graph=True)
            else:
                loss.backward()
            unreg_grads = {n: p.grad.clone().detach() for n, p in named().items() if p.grad is not None}
            if iteration > 0:
                loss = coupled_quadratic(model) + compute_SI()
                optimizer.zero_grad()
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CFG.grad_clip)
            optimizer.step()
            with torch.no_grad():
                for n, p in named().items():
                    if n in unreg_grads.keys():
                        w[n] -= unreg_grads[n] * (p.detach() - curr_feat_ext[n])
        reference_task(model, steps, lambda opt: step(opt))
        with torch.no_grad():
            for n, p in importance.items():
                importance[n] += w[n] / ((named()[n] - older_params[n]) ** 2 + damping)
                w[n].zero_()
        older_params = {n: p.clone().detach() for n, p in named().items()}
    return importance["theta"], older_params["theta"]


def fomo_si_reference(theta0, tasks, steps, c=0.5, xi=1.0):
    """Ported from ExplainableML/fomo_in_flux (read in the fork pseudope/fomo_in_flux),
    continual_lib/si.py (`Model.observe`, `penalty`, `end_task`): one flat parameter vector,
    ω += lr·g² of the clipped total gradient each step, Ω += ω/((θ − θ_ckpt)² + ξ) at the task end,
    penalty c·Σ Ω (θ − θ_ckpt)²; the checkpoint starts as the initial parameters."""
    model = ScaledQuadratic(theta0)
    params = [p for p in model.parameters() if p.requires_grad]
    get_params = lambda: torch.cat([pp.view(-1) for pp in params])  # noqa: E731
    get_grads = lambda: torch.cat([(pp.grad if pp.grad is not None else torch.zeros_like(pp)).view(-1)  # noqa: E731
                                   for pp in params])
    state = {"big_omega": None, "small_omega": 0, "checkpoint": get_params().data.clone()}

    def penalty():
        if state["big_omega"] is None:
            return torch.tensor(0.0)
        return (state["big_omega"] * ((get_params() - state["checkpoint"]) ** 2)).sum()

    def observe(opt):
        opt.zero_grad()
        loss = coupled_quadratic(model) + c * penalty()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CFG.grad_clip)
        if not any(torch.isnan(get_grads().data)):
            state["small_omega"] += opt.param_groups[0]["lr"] * get_grads().data ** 2
        opt.step()

    for _ in range(tasks):
        reference_task(model, steps, observe)
        if state["big_omega"] is None:
            state["big_omega"] = torch.zeros_like(get_params())
        state["big_omega"] += state["small_omega"] / ((get_params().data - state["checkpoint"]) ** 2 + xi)
        state["checkpoint"] = get_params().data.clone()
        state["small_omega"] = 0
    return state["big_omega"], state["checkpoint"]


@pytest.mark.parametrize("setting", ["ctp", "fomo"])
def test_si_matches_the_original_code_over_two_tasks_of_a_toy_quadratic(setting):
    """Both SI settings through the real loop (AdamW with weight decay, warmup + cosine LR,
    clipping) against the ported originals: CTP's exact path integral of the unregularised
    gradient; FoMo's lr·g² of the clipped total gradient with c = 0.5, ξ = 1."""
    theta0, steps = [0.2, -0.4, 1.5], 5
    QuadraticBase.b = 0.7
    try:
        cfg = SI.Config() if setting == "ctp" else SI.Config(path="lr_grad2", si_lambda=0.5, si_xi=1.0)
        m, model = QuadSI(cfg), ScaledQuadratic(theta0)
        for t in range(2):
            ctx = toy_ctx(t)
            train_task(model, m, ctx, steps, CFG, torch.device("cpu"))
            m.after_task(model, ctx)
    finally:
        QuadraticBase.b = 0.0
    omega, anchor = (ctp_si_reference if setting == "ctp" else fomo_si_reference)(theta0, 2, steps)
    assert torch.allclose(m.anchors["theta"], anchor, rtol=1e-10, atol=1e-12)
    assert torch.allclose(m.omega["theta"], omega, rtol=1e-8, atol=1e-12)
    assert (omega != 0).all()


def test_quadratic_penalty_grad_is_the_autograd_gradient_with_padded_rows():
    g = torch.Generator().manual_seed(0)
    p = {"w": torch.randn(5, 3, generator=g, requires_grad=True), "b": torch.randn(3, generator=g, requires_grad=True)}
    anchors = {"w": torch.randn(4, 3, generator=g), "b": torch.randn(3, generator=g)}   # "w" grew a row
    imp = {"w": torch.rand(4, 3, generator=g), "b": torch.rand(3, generator=g)}
    auto = torch.autograd.grad(ewc_penalty(p, anchors, imp), [p["w"], p["b"]])
    ana = quadratic_penalty_grad(p, anchors, imp)
    assert torch.allclose(ana["w"], auto[0]) and torch.allclose(ana["b"], auto[1])
    assert (ana["w"][4] == 0).all()                                     # the new row: no importance


def test_penalty_over_the_support_rows_equals_the_whole_penalty():
    """A token embedding's importance is zero on the rows its batches did not use (and on rows it
    grew since): the penalty over the rows with importance has the same value and gradient."""
    g = torch.Generator().manual_seed(0)
    p = {"emb": torch.randn(10, 3, generator=g, requires_grad=True), "b": torch.randn(3, generator=g, requires_grad=True)}
    anchors = {"emb": torch.randn(8, 3, generator=g), "b": torch.randn(3, generator=g)}   # "emb" grew 2 rows
    fisher = {"emb": torch.rand(8, 3, generator=g), "b": torch.rand(3, generator=g)}
    fisher["emb"][[0, 2, 3, 5, 6]] = 0                                                     # 3 of 8 rows used
    a, f, rows = support_rows(anchors, fisher)
    assert rows["emb"].tolist() == [1, 4, 7] and "b" not in rows and f["b"] is fisher["b"]
    dense, sparse = ewc_penalty(p, anchors, fisher), ewc_penalty(p, a, f, rows)
    assert torch.allclose(sparse, dense)
    for x, y in zip(torch.autograd.grad(dense, list(p.values())), torch.autograd.grad(sparse, list(p.values()))):
        assert torch.allclose(x, y)
    assert support_rows(anchors, {**fisher, "emb": torch.rand(8, 3, generator=g)})[2] == {}   # dense: kept whole


def test_si_and_rwalk_importances_by_hand():
    w, delta = torch.tensor([0.5, -0.2, 0.0]), torch.tensor([1.0, 0.5, 0.0])
    assert si_importance(w, delta, 0.1).tolist() == pytest.approx([0.5 / 1.1, -0.2 / 0.35, 0.0])
    fisher = torch.tensor([2.0, 1.0, 3.0])
    s = rwalk_score(w, fisher, delta, 0.1)
    assert s.tolist() == pytest.approx([0.5 / 2.1, 0.0, 0.0])          # negative ω → 0
    assert (s >= 0).all()


def test_fisher_merges_by_hand():
    f = [{"x": torch.tensor([4.0])}, {"x": torch.tensor([2.0])}, {"x": torch.tensor([6.0])}]
    avg = merge_average(None, f[0], 0)
    assert avg["x"].item() == 4.0
    avg = merge_average(avg, f[1], 1)                                    # α = 1/2: ½·4 + ½·2
    assert avg["x"].item() == pytest.approx(3.0)
    avg = merge_average(avg, f[2], 2)                                    # α = 2/3: ⅔·3 + ⅓·6
    assert avg["x"].item() == pytest.approx(4.0)                         # = the mean of 4, 2, 6
    online = merge_fisher(merge_fisher(merge_fisher(None, f[0], 0.5), f[1], 0.5), f[2], 0.5)
    assert online["x"].item() == pytest.approx((4 * 0.5 + 2) * 0.5 + 6)


class TaskScaledBase(Method):
    """Base loss (t+1)·Σθ at task t: the empirical Fisher is (t+1)² for every entry."""

    def loss(self, model, batch, ctx):
        return {"lin": (ctx.task + 1) * model.theta.sum()}


class ToyEWC(EWC, TaskScaledBase):
    pass


@pytest.mark.parametrize("merge,want", [("average", [1.0, 2.5, 14 / 3]), ("online", [1.0, 5.0, 14.0])])
def test_ewc_fisher_merge_over_three_tasks(merge, want):
    m, model = ToyEWC(EWC.Config(fisher_merge=merge, fisher_batches=2, fisher_batch_size=2)), Quadratic([0.0, 1.0])
    for t in range(3):
        m.after_task(model, toy_ctx(t))
        assert m.fisher["theta"].tolist() == pytest.approx([want[t]] * 2)
    assert EWC.Config().fisher_merge == "online" and EWC.Config().ewc_lambda == 1000.0   # defaults unchanged


class RegressionBase(Method):
    """Base loss of a batch of ids: mean_i (x_i·θ − y_i)² over fixed rows (x_i, y_i), so each
    batch has its own gradient (the batch *is* its ids: `materialize` is the identity)."""
    X = torch.randn(20, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    Y = torch.randn(20, generator=torch.Generator().manual_seed(5), dtype=torch.float64)

    def loss(self, model, batch, ctx):
        return {"mse": ((self.X[batch] @ model.theta - self.Y[batch]) ** 2).mean()}


class RegressionEWC(EWC, RegressionBase):
    pass


def regression_ctx(task, seed=0):
    pools = [torch.arange(10), torch.arange(10, 20)]
    return TaskContext(task=task, num_tasks=2, train_set=None, task_ids=pools, pool=pools[task],
                       materialize=lambda ids: ids, generator=torch.Generator().manual_seed(seed + task))


def fomo_ewc_reference(model, loaders, thetas, batch_size, e_lambda=1.0, gamma=1.0, max_fim_samples=50000):
    """Ported from ExplainableML/fomo_in_flux (read in the fork pseudope/fomo_in_flux),
    continual_lib/ewc.py (`Model.end_task`, `penalty`, `observe`), on one flat parameter vector
    (the AMP scale is 1 here). `loaders[t]`: task t's training batches; `thetas[t]`: the weights
    at the end of task t. Returns the penalty term e_lambda/2 · penalty at `thetas[-1]` after
    the end of task len(loaders) − 2, and the merged Fisher."""
    import numpy as np
    get_params = lambda: torch.cat([pp.view(-1) for pp in model.parameters() if pp.requires_grad])  # noqa: E731
    get_grads = lambda: torch.cat([pp.grad.view(-1) for pp in model.parameters() if pp.requires_grad])  # noqa: E731
    fim_backbone, checkpoint = None, None
    for loader, theta in zip(loaders[:-1], thetas[:-1]):
        with torch.no_grad():
            model.theta.copy_(theta)
        checkpoint = get_params().data.clone()
        num_iter = int(np.ceil(max_fim_samples / batch_size))
        if num_iter >= len(loader):
            num_iter = len(loader)
        fim = torch.zeros_like(checkpoint)
        for batch_idx, data in enumerate(loader):
            model.zero_grad()
            loss = RegressionBase().loss(model, data, None)["mse"]
            loss.backward()
            fim += get_grads() ** 2
            if batch_idx == num_iter - 1:
                break
        fim /= num_iter
        if fim_backbone is None:
            fim_backbone = fim
        else:
            fim_backbone *= gamma
            fim_backbone += fim
    with torch.no_grad():
        model.theta.copy_(thetas[-1])
    penalty = (fim_backbone * ((get_params() - checkpoint) ** 2)).sum()
    return e_lambda / 2 * penalty, fim_backbone


def test_fomo_ewc_fisher_pass_merge_and_penalty_equal_the_original_code():
    """FoMo's code's EWC (fomo-ewc's constants with `fisher_merge: online`, the code's form that
    params.yaml's fomo-ewc keeps as a setting; it runs the paper text's rolling average): λ = 1
    with ½, F ← F + F_new, F from every pair of the task in training-size batches (up to 50,000
    samples), mean over batches of the squared batch gradients."""
    cfg = EWC.Config(ewc_lambda=1.0, half=True, fisher_samples=50000, fisher_batch_size=4)
    m, model = RegressionEWC(cfg), Quadratic([0.3, -0.2, 0.5])
    thetas = [torch.tensor(t, dtype=torch.float64) for t in ([0.3, -0.2, 0.5], [0.1, 0.4, -0.3], [-0.5, 0.2, 0.6])]
    loaders = []
    for t in range(2):
        with torch.no_grad():
            model.theta.copy_(thetas[t])
        ctx = regression_ctx(t)
        perm = ctx.pool[torch.randperm(10, generator=torch.Generator().manual_seed(t))]
        loaders.append([perm[:4], perm[4:8], torch.cat([perm[8:], perm[:2]])])   # the task looped: full batches
        m.after_task(model, ctx)
    with torch.no_grad():
        model.theta.copy_(thetas[2])
    terms = m.loss(model, torch.arange(4), regression_ctx(1))
    want, fisher = fomo_ewc_reference(Quadratic([0.0, 0.0, 0.0]), loaders + [None], thetas, batch_size=4)
    assert torch.allclose(m.fisher["theta"], fisher, rtol=1e-12)
    assert terms["ewc"].item() == pytest.approx(want.item(), rel=1e-12)
    assert want.item() > 0


def test_ctp_ewc_setting_is_the_ctp_codes_penalty():
    """ctp-ewc (λ 2500, no ½, average merge) = the CTP code's compute_ewc × 5000
    (train/train_EWC.py: Σ fisher·(p − older)²/2, lamda = 5000) = λ 5000 with `half`."""
    g = torch.Generator().manual_seed(6)
    anchors, fisher = {"theta": torch.randn(3, generator=g, dtype=torch.float64)}, {"theta": torch.rand(3, generator=g, dtype=torch.float64)}
    model = Quadratic([0.4, -0.1, 0.9])
    want = 5000 * sum(torch.sum(fisher[n] * (p - anchors[n]).pow(2)) / 2 for n, p in model.named_parameters())
    for cfg in (EWC.Config(ewc_lambda=2500, fisher_merge="average"), EWC.Config(ewc_lambda=5000, half=True, fisher_merge="average")):
        m = RegressionEWC(cfg)
        m.fisher, m.anchors = fisher, anchors
        assert m.loss(model, torch.arange(3), regression_ctx(0))["ewc"].item() == pytest.approx(want.item(), rel=1e-12)


# ---------------------------------------------------------------- MAS


def test_mas_importance_is_zero_for_parameters_that_do_not_reach_the_outputs(tiny_clip, clip_data):
    model = copy.deepcopy(tiny_clip)
    m = MAS(MAS.Config(importance_batches=1, importance_batch_size=8))
    m.after_task(model, make_ctx(0, clip_data))
    assert (m.importance["logit_scale"] == 0).all()                     # not in the raw features
    assert m.importance["visual.proj"].abs().sum() > 0 and m.importance["text_projection"].abs().sum() > 0
    assert all((v >= 0).all() for v in m.importance.values())

    albef = FakeALBEF()
    m = MAS(MAS.Config(importance_batches=2, importance_batch_size=4))
    m.after_task(albef, make_ctx(0, fake_materialize(mlm=True)))
    assert (m.importance["mlm_head.weight"] == 0).all()                 # MLM head: not an output feature
    assert m.importance["fusion.weight"].abs().sum() > 0                # the multi-modal feature counts


def test_mas_importance_by_hand_on_a_linear_encoder():
    # E = mean ‖W x + b‖ (image) + mean ‖e_tok‖ (text) + mean ‖fusion‖ (plain L2 norms, the CTP
    # code's): for the image tower, ∂E/∂W = mean_b (y_b/‖y_b‖) x_bᵀ + the fusion's share; check
    # the image-only part with fusion zeroed
    albef = FakeALBEF()
    with torch.no_grad():
        albef.fusion.weight.zero_(), albef.fusion.bias.zero_()
    x = torch.randn(5, 3, 4, 4, generator=torch.Generator().manual_seed(2))
    batch = Batch(x, torch.randint(0, 12, (5, 6)), torch.arange(5))
    g = torch.autograd.grad(output_energy(albef, batch), albef.visual.weight)[0]
    xf = x.flatten(1)
    y = xf @ albef.visual.weight.T + albef.visual.bias
    want = (y / y.norm(dim=1, keepdim=True)).T @ xf / 5
    assert torch.allclose(g, want, atol=1e-5)


def ctp_memory_aware_synapses(model, batches):
    """Ported from KevinLight831/CTP, train/train_MAS.py, `get_Memory_Aware_Synapses`
    (`get_raw_VL_feature` = the unnormalised image, text and fused features)."""
    importance = {n: torch.zeros(p.shape) for n, p in model.named_parameters() if p.requires_grad}
    for batch in batches:
        model.zero_grad()
        image_feat = model.encode_image(batch.images)
        text_feat = model.encode_text(batch.tokens)
        fusion_out = model.encode_multimodal(batch.images, batch.tokens)
        loss = torch.norm(image_feat, p=2, dim=1).mean() + torch.norm(text_feat, p=2, dim=1).mean() + \
            torch.norm(fusion_out, p=2, dim=1).mean()
        loss.backward()
        for n, p in model.named_parameters():
            if p.grad is not None:
                importance[n] += p.grad.abs().clone()
    for n, p in importance.items():
        importance[n] = p / len(batches)
    model.zero_grad()
    return importance


def mas_importance_against_the_ctp_code(model, materialize, batches=3, batch_size=4):
    m = MAS(MAS.Config(importance_batches=batches, importance_batch_size=batch_size))
    ctx = make_ctx(0, materialize)
    state = ctx.generator.get_state()
    m.after_task(model, ctx)
    ctx.generator.set_state(state)                   # the same batches, drawn as gradient_importance draws them
    drawn = [ctx.materialize(ctx.pool[torch.randint(0, len(ctx.pool), (batch_size,), generator=ctx.generator)])
             for _ in range(batches)]
    want = ctp_memory_aware_synapses(model, drawn)
    assert set(m.importance) == set(want)
    for n in want:
        assert torch.allclose(m.importance[n], want[n], rtol=1e-4, atol=1e-7), n
    assert sum(w.abs().sum() for w in want.values()) > 0
    return m


def test_mas_importance_equals_the_ctp_code():
    torch.manual_seed(0)
    mas_importance_against_the_ctp_code(FakeALBEF(), fake_materialize(mlm=True))


# ---------------------------------------------------------------- RWalk, AFEC, LwF


def test_rwalk_scores_are_non_negative_and_average(tiny_clip, clip_data):
    model = copy.deepcopy(tiny_clip)
    m = RWalk(RWalk.Config(fisher_batches=1, fisher_batch_size=8))
    run_task(model, m, 0, clip_data)
    assert all((s >= 0).all() for s in m.scores.values())
    assert any((s > 0).any() for s in m.scores.values())
    first = {n: s.clone() for n, s in m.scores.items()}
    stats = run_task(model, m, 1, clip_data)
    assert {"clip", "ewc", "rwalk"} <= set(stats["terms"])
    assert all((s >= 0).all() for s in m.scores.values())
    # s ← (s_old + s_new)/2 with s_new ≥ 0: never below half the old score
    assert all((m.scores[n] >= first[n] / 2 - 1e-12).all() for n in first)


def test_afec_expanded_model_differs_and_its_penalty_pulls_towards_it(tiny_clip, clip_data):
    model = copy.deepcopy(tiny_clip)
    m = AFEC(AFEC.Config(fisher_batches=1, fisher_batch_size=8, expand_steps=3))
    run_task(model, m, 0, clip_data)
    assert m.expanded is None and m.fisher                              # task 0: plain training + Fisher
    ctx = make_ctx(1, clip_data)
    before = ctx.generator.get_state()
    m.before_task(model, ctx)
    m.make_optimizer(model, CFG)
    assert torch.equal(ctx.generator.get_state(), before)               # the main run's batches are untouched
    params = dict(model.named_parameters())
    moved = [n for n in m.expanded if not torch.equal(m.expanded[n], params[n].detach())]
    assert "visual.proj" in moved and "text_projection" in moved
    # (expansion steps + F_e batches) / the task's budget (6 steps over 2 equal tasks)
    assert m.extra_cost() == pytest.approx((3 + 1) / 3)
    # the "afec" term's gradient points away from θ_e: ⟨∇, θ − θ_e⟩ = λ_e Σ F_e (θ−θ_e)² > 0
    batch = ctx.materialize(ctx.pool[:8])
    terms = m.loss(model, batch, ctx)
    assert {"clip", "ewc", "afec"} <= set(terms)
    names = [n for n in m.expanded]
    grads = torch.autograd.grad(terms["afec"], [params[n] for n in names], allow_unused=True)
    inner = sum((g * (params[n].detach() - m.expanded[n])).sum() for n, g in zip(names, grads) if g is not None)
    assert inner.item() > 0
    assert inner.item() == pytest.approx(2 * terms["afec"].item(), rel=1e-4)   # a quadratic: ⟨∇q, x⟩ = 2q
    # one small gradient step on the term alone brings θ closer to θ_e (in the F_e metric)
    with torch.no_grad():
        for n, g in zip(names, grads):
            if g is not None:
                params[n].sub_(1e-3 * g / max(g.abs().max().item(), 1e-12))
    assert m.loss(model, batch, ctx)["afec"].item() < terms["afec"].item()


def test_lwf_kl_is_zero_for_the_teacher_itself_and_positive_after_a_change(tiny_clip, clip_data):
    model = copy.deepcopy(tiny_clip)
    m = LwF()
    ctx = make_ctx(1, clip_data)
    m.before_task(model, ctx)
    batch = ctx.materialize(ctx.pool[:8])
    terms = m.loss(model, batch, ctx)
    assert set(terms) == {"clip", "lwf"}
    assert terms["lwf"].item() == pytest.approx(0, abs=1e-6)
    with torch.no_grad():
        model.visual.proj.add_(0.05 * torch.randn_like(model.visual.proj))
    assert m.loss(model, batch, ctx)["lwf"].item() > 1e-6
    assert m.teacher is not model and not any(p.requires_grad for p in m.teacher.parameters())


def ctp_lwf_feature_loss(raw_image_feature, raw_text_feature, ref_image_feature, ref_text_feature, temp=0.07):
    """Ported from KevinLight831/CTP, models/clip_pretrain.py, `CLIP_Pretrain.LWF_forward` (the
    `iteration > 0` branch; `self.temp` = 0.07): the raw (unnormalised) projected features of
    `get_raw_feature`, current vs the reference model, softmax over dim = 1 (the features)."""
    loss_i_dis = nn.KLDivLoss(reduction='batchmean')(F.log_softmax(raw_image_feature / temp, dim=1),
                                                     F.softmax(ref_image_feature / temp, dim=1))
    loss_t_dis = nn.KLDivLoss(reduction='batchmean')(F.log_softmax(raw_text_feature / temp, dim=1),
                                                     F.softmax(ref_text_feature / temp, dim=1))
    return (loss_i_dis + loss_t_dis) / 2


def test_lwf_feature_kd_equals_the_ctp_code_on_random_features():
    from vlcp.losses import lwf_feature_kd
    g = torch.Generator().manual_seed(3)
    img, txt, old_img, old_txt = (torch.randn(6, 256, generator=g) * 0.3 for _ in range(4))
    want = ctp_lwf_feature_loss(img, txt, old_img, old_txt)
    assert want.item() > 0
    assert lwf_feature_kd(img, txt, old_img, old_txt).item() == pytest.approx(want.item(), rel=1e-5)
    assert lwf_feature_kd(img, txt, img, txt).item() == pytest.approx(0, abs=1e-6)
    # per sample (no batch coupling): a batch's loss is the mean of its samples' losses
    halves = [lwf_feature_kd(img[s], txt[s], old_img[s], old_txt[s]) for s in (slice(0, 3), slice(3, 6))]
    assert (sum(halves) / 2).item() == pytest.approx(want.item(), rel=1e-5)


@pytest.mark.parametrize("family", ["clip", "fake-albef"])
def test_lwf_term_is_the_ctp_formula_on_the_raw_projected_features(tiny_clip, clip_data, family):
    """The "lwf" term equals the CTP code's formula on the models' unnormalised features
    (encode_image / encode_text without normalisation: what LWF_forward's get_raw_feature
    returns), taken from the training forward itself."""
    torch.manual_seed(0)
    model, materialize = ((copy.deepcopy(tiny_clip), clip_data) if family == "clip"
                          else (FakeALBEF(), fake_materialize(mlm=True)))
    m = LwF()
    ctx = make_ctx(1, materialize)
    m.before_task(model, ctx)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    batch = ctx.materialize(ctx.pool[:8])
    terms = m.loss(model, batch, ctx)
    with torch.no_grad():
        want = ctp_lwf_feature_loss(model.encode_image(batch.images), model.encode_text(batch.tokens),
                                    m.teacher.encode_image(batch.images), m.teacher.encode_text(batch.tokens))
    assert want.item() > 1e-4
    assert terms["lwf"].item() == pytest.approx(want.item(), rel=1e-4)
    grads = torch.autograd.grad(terms["lwf"], [p for p in model.parameters() if p.requires_grad], allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)       # it trains the student


def test_lwf_mlm_term_only_with_mlm_inputs():
    for mlm in (False, True):
        torch.manual_seed(0)
        model, m = FakeALBEF(), LwF()
        run_task(model, m, 0, fake_materialize(mlm))
        stats = run_task(model, m, 1, fake_materialize(mlm))
        want = {"clip", "lwf"} | ({"mlm", "lwf_mlm"} if mlm else set())
        assert set(stats["terms"]) == want
        assert all(math.isfinite(v) for v in stats["terms"].values())
    # at the start of a task the student is its teacher: the soft MLM target is its own prediction
    ctx = make_ctx(1, fake_materialize(True))
    m.before_task(model, ctx)
    batch = ctx.materialize(ctx.pool[:8])
    terms = m.loss(model, batch, ctx)
    logits = model_outputs(model, batch).mlm_logits
    entropy = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
    assert terms["lwf_mlm"].item() == pytest.approx(entropy.item(), rel=1e-5)
    assert terms["lwf"].item() == pytest.approx(0, abs=1e-6)


def test_lwf_reuses_the_student_forward():
    calls = []
    model, m = FakeALBEF(), LwF()
    ctx = make_ctx(1, fake_materialize(True))
    m.before_task(model, ctx)
    model.register_forward_hook(lambda *a: calls.append("student"))
    m.teacher.register_forward_hook(lambda *a: calls.append("teacher"))
    m.loss(model, ctx.materialize(ctx.pool[:8]), ctx)
    assert calls == ["student", "teacher"]


# ---------------------------------------------------------------- end to end, resume, composition

METHODS = [
    ("si", {}, {"si"}),
    ("mas", {"importance_batches": 1, "importance_batch_size": 8}, {"mas"}),
    ("rwalk", {"fisher_batches": 1, "fisher_batch_size": 8}, {"ewc", "rwalk"}),
    ("afec", {"fisher_batches": 1, "fisher_batch_size": 8, "expand_steps": 2}, {"ewc", "afec"}),
    ("lwf", {}, {"lwf"}),
    ("ewc", {"fisher_batches": 1, "fisher_batch_size": 8, "fisher_merge": "average"}, {"ewc"}),
]


@pytest.fixture(scope="module")
def seqf_task0(tiny_clip, clip_data):
    model = copy.deepcopy(tiny_clip)
    return run_task(model, get_method("seqf")(), 0, clip_data), model


@pytest.mark.parametrize("name,args,extra", METHODS, ids=[m[0] for m in METHODS])
def test_two_tasks_and_resume_gives_identical_losses(tiny_clip, clip_data, seqf_task0, name, args, extra):
    cls = get_method(name)
    model, m = copy.deepcopy(tiny_clip), cls(cls.Config(**args))
    first = run_task(model, m, 0, clip_data)
    assert first["terms"] == seqf_task0[0]["terms"]                     # task 0 exactly as plain fine-tuning
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), seqf_task0[1].state_dict().values()))
    saved_model, saved_method = copy.deepcopy(model.state_dict()), roundtrip(m)
    second = run_task(model, m, 1, clip_data)
    assert set(second["terms"]) == {"clip"} | extra
    assert all(math.isfinite(v) for v in second["terms"].values()) and second["terms"][sorted(extra)[-1]] > 0

    resumed_model, resumed = copy.deepcopy(tiny_clip), cls(cls.Config(**args))
    resumed_model.load_state_dict(saved_model)
    resumed.load_state_dict(saved_method)
    again = run_task(resumed_model, resumed, 1, clip_data)
    assert again["terms"] == second["terms"]
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), resumed_model.state_dict().values()))


@pytest.mark.parametrize("base", [SI, RWalk, LwF], ids=["si", "rwalk", "lwf"])
def test_composes_with_er(tiny_clip, clip_data, base):
    class WithER(base, ER):
        name = f"{base.name}+er"
        Config = compose_configs(base.Config, ER.Config)

    args = {"fisher_batches": 1, "fisher_batch_size": 8} if base is RWalk else {}
    m = WithER(WithER.Config(buffer_size=8, replay_fraction=0.5, **args))
    model = copy.deepcopy(tiny_clip)
    run_task(model, m, 0, clip_data)
    assert len(m.buffer) == 8
    stats = run_task(model, m, 1, clip_data)
    assert set(stats["terms"]) > {"clip"}
    own = {SI: {"omega", "anchors"}, RWalk: {"fisher", "anchors", "scores"}, LwF: set()}[base]
    assert set(roundtrip(m)) == {"buffer"} | own                        # the teacher is derived, not saved


@pytest.mark.parametrize("name,field,value", [("si", "si_xi", 0.0), ("si", "si_lambda", -1.0), ("si", "path", "sgd"),
                                              ("mas", "mas_lambda", -1.0), ("mas", "importance_batches", 0), ("rwalk", "rwalk_xi", 0.0),
                                              ("afec", "afec_lambda", -1.0), ("afec", "expand_fraction", 0.0),
                                              ("afec", "expand_steps", -1), ("lwf", "lwf_weight", -1.0),
                                              ("lwf", "lwf_mlm_temperature", 0.0), ("ewc", "fisher_merge", "mean"),
                                              ("ewc", "fisher_batch_size", 0), ("ewc", "fisher_samples", -1),
                                              ("rwalk", "fisher_merge", "x"), ("rwalk", "half", True)])
def test_config_errors_name_the_field(name, field, value):
    with pytest.raises(ConfigError, match=field):
        get_method(name).Config(**{field: value})


def test_paper_constants_are_the_defaults():
    assert (SI.Config().si_lambda, SI.Config().si_xi) == (1.0, 0.1)
    assert MAS.Config().mas_lambda == 1.0
    assert (RWalk.Config().ewc_lambda, RWalk.Config().rwalk_xi, RWalk.Config().fisher_merge) == (1000.0, 0.1, "average")
    assert (AFEC.Config().ewc_lambda, AFEC.Config().afec_lambda, AFEC.Config().fisher_merge) == (5000.0, 1.0, "average")
    assert (LwF.Config().lwf_weight, LwF.Config().lwf_mlm_weight) == (1.0, 1.0)
