"""MoE-Adapters (vlcp/methods/moe_adapters.py): noisy top-k gating, the load-balance loss, the sparse
combine and DDAS selection against a port of the original code (JiazuoYu/MoE-Adapters4CL,
mtil/clip/model.py and mtil/src/models/evaluation.py), and a short run through the loop."""
import pytest
import torch
from torch import nn
from torch.distributions.normal import Normal

from vlcp.config import experiment_from_dict
from vlcp.methods import moe_adapters as moe


# --- a port of the original (model.py ResidualAttentionBlock's gating, SparseDispatcher; evaluation.py DDAS) ---
class OriginalGate(nn.Module):
    def __init__(self, top_k, experts_num):
        super().__init__()
        self.top_k, self.experts_num, self.noisy_gating = top_k, experts_num, True
        self.softplus, self.softmax = nn.Softplus(), nn.Softmax(1)
        self.register_buffer("mean", torch.tensor([0.0]))
        self.register_buffer("std", torch.tensor([1.0]))

    def cv_squared(self, x):
        eps = 1e-10
        if x.shape[0] == 1:
            return torch.tensor([0], device=x.device, dtype=x.dtype)
        return x.float().var() / (x.float().mean() ** 2 + eps)

    def _gates_to_load(self, gates):
        return (gates > 0).sum(0)

    def _prob_in_top_k(self, clean_values, noisy_values, noise_stddev, noisy_top_values):
        batch = clean_values.size(0)
        m = noisy_top_values.size(1)
        top_values_flat = noisy_top_values.flatten()
        threshold_positions_if_in = torch.arange(batch, device=clean_values.device) * m + self.top_k
        threshold_if_in = torch.unsqueeze(torch.gather(top_values_flat, 0, threshold_positions_if_in), 1)
        is_in = torch.gt(noisy_values, threshold_if_in)
        threshold_positions_if_out = threshold_positions_if_in - 1
        threshold_if_out = torch.unsqueeze(torch.gather(top_values_flat, 0, threshold_positions_if_out), 1)
        normal = Normal(self.mean, self.std)
        prob_if_in = normal.cdf((clean_values - threshold_if_in) / noise_stddev)
        prob_if_out = normal.cdf((clean_values - threshold_if_out) / noise_stddev)
        return torch.where(is_in, prob_if_in, prob_if_out)

    def noisy_top_k_gating(self, x, train, w_gate, w_noise, noise_epsilon=1e-2):
        clean_logits = x @ w_gate.to(x)
        if self.noisy_gating and train:
            raw_noise_stddev = x @ w_noise.to(x)
            noise_stddev = ((self.softplus(raw_noise_stddev) + noise_epsilon))
            noisy_logits = clean_logits + (torch.randn_like(clean_logits) * noise_stddev)
            logits = noisy_logits
        else:
            logits = clean_logits
        top_logits, top_indices = logits.topk(min(self.top_k + 1, self.experts_num), dim=1)
        top_k_logits = top_logits[:, :self.top_k]
        top_k_indices = top_indices[:, :self.top_k]
        top_k_gates = self.softmax(top_k_logits)
        zeros = torch.zeros_like(logits)
        gates = zeros.scatter(1, top_k_indices, top_k_gates)
        if self.noisy_gating and self.top_k < self.experts_num and train:
            load = (self._prob_in_top_k(clean_logits, noisy_logits, noise_stddev, top_logits)).sum(0)
        else:
            load = self._gates_to_load(gates)
        return gates, load

    def balance(self, gates, load):
        importance = gates.sum(0)
        return self.cv_squared(importance) + self.cv_squared(load)


class SparseDispatcher:
    def __init__(self, num_experts, gates):
        self._gates = gates
        self._num_experts = num_experts
        sorted_experts, index_sorted_experts = torch.nonzero(gates).sort(0)
        _, self._expert_index = sorted_experts.split(1, dim=1)
        self._batch_index = torch.nonzero(gates)[index_sorted_experts[:, 1], 0]
        self._part_sizes = (gates > 0).sum(0).tolist()
        gates_exp = gates[self._batch_index.flatten()]
        self._nonzero_gates = torch.gather(gates_exp, 1, self._expert_index)

    def dispatch(self, inp):
        inp_exp = inp[self._batch_index].squeeze(1)
        return torch.split(inp_exp, self._part_sizes, dim=0)

    def combine(self, expert_out, multiply_by_gates=True):
        stitched = torch.cat(expert_out, 0)
        if multiply_by_gates:
            stitched = stitched.mul(self._nonzero_gates)
        zeros = torch.zeros(self._gates.size(0), expert_out[-1].size(1), device=stitched.device)
        return zeros.index_add(0, self._batch_index, stitched.float())


def original_moe(x, gates, experts):
    """model.py's forward around the dispatcher, x [B, L, D] (batch first)."""
    dispatcher = SparseDispatcher(len(experts), gates)
    expert_inputs = dispatcher.dispatch(x.reshape(x.shape[0], -1))
    expert_outputs = [experts[i](expert_inputs[i].view(expert_inputs[i].shape[0], x.shape[1], x.shape[2]))
                      for i in range(len(experts))]
    expert_outputs = [o.view(o.shape[0], -1) for o in expert_outputs if o.shape[0] != 0]
    return dispatcher.combine(expert_outputs).view(*x.shape)


def original_ddas(losses_per_ae, threshold):
    """evaluation.py zeroshot_eval's selection, for one input: autoencoder 0 is the reference's."""
    best_l = losses_per_ae[0]
    best_router = 0
    for i in range(1, len(losses_per_ae)):
        new_l = losses_per_ae[i]
        if new_l < best_l:
            best_l = new_l
            best_router = i
        if best_l > threshold:
            best_router = 0
    return best_router - 1


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("k,experts", [(2, 22), (1, 4), (3, 3)])
def test_noisy_top_k_gating_and_balance_loss_match_the_original(train, k, experts):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 8, generator=g)
    w_gate, w_noise = torch.randn(8, experts, generator=g), torch.randn(8, experts, generator=g) * 0.3
    torch.manual_seed(5)
    ref_gates, ref_load = OriginalGate(k, experts).noisy_top_k_gating(x, train, w_gate, w_noise)
    torch.manual_seed(5)
    gates, load = moe.noisy_top_k_gating(x, w_gate, w_noise, k, train)
    assert torch.allclose(gates, ref_gates, atol=1e-6) and torch.allclose(load.float(), ref_load.float(), atol=1e-5)
    assert (gates > 0).sum(1).eq(k).all() and torch.allclose(gates.sum(1), torch.ones(16))
    ref_balance = OriginalGate(k, experts).balance(ref_gates, ref_load)
    assert moe.balance_loss(gates, load).item() == pytest.approx(float(ref_balance), rel=1e-5, abs=1e-7)
    # each sample's own router: the same gates as routing each sample alone
    per = torch.stack([w_gate] * 16)
    assert torch.allclose(moe.noisy_top_k_gating(x, per, per, k, False)[0], moe.noisy_top_k_gating(x, w_gate, w_gate, k, False)[0])


def test_the_load_is_differentiable_in_training():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 8, generator=g)
    w_gate = torch.randn(8, 6, generator=g).requires_grad_()
    w_noise = torch.zeros(8, 6, requires_grad=True)
    gates, load = moe.noisy_top_k_gating(x, w_gate, w_noise, 2, True)
    moe.balance_loss(gates, load).backward()
    assert w_gate.grad.abs().sum() > 0 and w_noise.grad.abs().sum() > 0


def test_combine_matches_the_sparse_dispatcher():
    g = torch.Generator().manual_seed(2)
    experts = nn.ModuleList(moe.Adapter(8, 4, 0.0, 0.1) for _ in range(5))
    for e in experts:   # off the zero init, so the outputs differ
        nn.init.normal_(e.up.weight, generator=g)
    x = torch.randn(10, 3, 8, generator=g)
    gates, _ = moe.noisy_top_k_gating(x[:, 0], torch.randn(8, 5, generator=g), torch.zeros(8, 5), 2, False)
    assert torch.allclose(moe.combine(x, gates, experts), original_moe(x, gates, experts), atol=1e-6)


def test_the_adapter_starts_as_the_original_lora_init():
    a = moe.Adapter(16, 4, 0.1, 0.1)
    assert a.up.weight.abs().sum() == 0 and a.up.bias.abs().sum() == 0 and a.down.bias.abs().sum() == 0
    assert a(torch.randn(3, 16)).abs().sum() == 0


@pytest.mark.parametrize("threshold", [0.05, 0.2, 10.0])
def test_ddas_selection_matches_the_original_per_image(threshold):
    g = torch.Generator().manual_seed(3)
    errors = torch.rand(200, 6, generator=g) * 0.3
    ours = moe.ddas_select(errors, threshold)
    assert ours.tolist() == [original_ddas(row.tolist(), threshold) for row in errors]
    assert (ours == moe.ZERO_SHOT).any() and (ours >= 0).any() if threshold == 0.2 else True


def test_an_untrained_autoencoder_is_never_chosen():
    ddas = moe.DDAS(dims=4, tasks=3, code=2, threshold=None)
    ddas.trained[:2] = True
    ddas.own_error[1] = 1.0
    errs = ddas.errors(torch.randn(7, 4))
    assert torch.isinf(errs[:, 2:]).all() and set(moe.ddas_select(errs, ddas.threshold()).tolist()) <= {-1, 0}


def fomo_cfg(root, **method):
    return experiment_from_dict({
        "name": "fomo-moe-adapters", "seed": 0, "data": {"root": str(root), "stream": "concepts"},
        "model": {"name": "vlcp-tiny"},
        "method": {"name": "moe-adapters", "experts": 6, "top_k": 2, "r": 8, "routers": 2, "ae_code": 16,
                   "ae_steps": 20, "ae_reference_steps": 20, "ae_reference_samples": 200, **method},
        "fomo": {"num_tasks": 2, "steps_per_task": 3},
        "train": {"batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1, "pass_flops_seeds": [],
                  "lr": 0.01},
        "eval": {"batch_size": 256}})


def test_the_method_freezes_the_base_routes_by_task_and_freezes_chosen_experts(emoji_root):
    """prepare_model leaves only experts and the task's router trainable; a training forward routes every
    image through the task's router and records the balance loss; after the task its most chosen
    experts freeze and its autoencoder is trained; at test time DDAS routes each image."""
    from vlcp.run.streams.concepts import ConceptStream

    cfg = fomo_cfg(emoji_root)
    method = moe.MoEAdapters(moe.MoEAdapters.Config(**cfg.method.args), seed=0)
    stream = ConceptStream(cfg, torch.device("cpu"))
    stream.build(method)
    model = stream.model
    method.prepare_model(model)
    ctx = stream.context(0)
    ctx.steps = 3
    method.before_task(model, ctx)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".experts." in n or ".w_gate.0" in n or ".w_noise.0" in n for n in trainable)
    assert any(".w_gate.0" in n for n in trainable) and not any(".w_gate.1" in n for n in trainable)
    assert bool(model.visual.ddas.trained[0]) and not bool(model.visual.ddas.trained[1])   # the reference chooser
    batch = ctx.materialize(ctx.pool[:16])
    terms = method.loss(model, batch, ctx)
    assert {"clip", "balance"} <= set(terms) and terms["balance"] > 0
    assert all(b.route.eq(0).all() and b.chosen.sum() == 16 * 2 for b in moe.blocks(model))
    sum(terms.values()).backward()
    assert all(p.grad is None for n, p in model.named_parameters() if not p.requires_grad)
    method.after_task(model, ctx)
    assert all(b.frozen.sum() == 2 and b.frozen[b.chosen.topk(2).indices].all() for b in moe.blocks(model))
    assert bool(model.visual.ddas.trained[1])
    model.eval()
    with torch.no_grad():
        model.encode_image(batch.images)
    route = moe.blocks(model)[0].route
    assert route.shape == (16,) and set(route.tolist()) <= {moe.ZERO_SHOT, 0}
    ctx1 = stream.context(1)
    method.before_task(model, ctx1)
    b = moe.blocks(model)[0]
    assert all(not any(p.requires_grad for p in b.experts[e].parameters()) for e in b.frozen.nonzero().flatten().tolist())


def test_the_zero_shot_route_is_the_frozen_model():
    from vlcp.models import create_model

    model, _ = create_model("vlcp-tiny", None, "cpu", 32, ["a b c"])
    images = torch.randn(4, 3, 32, 32)
    model.eval()
    with torch.no_grad():
        before = model.encode_image(images)
        method = moe.MoEAdapters(moe.MoEAdapters.Config(experts=4, r=4, routers=2), seed=0)
        method.prepare_model(model)
        for b in moe.blocks(model):     # experts that would change the output if they were used
            for e in b.experts:
                nn.init.normal_(e.up.weight)
        model.eval()
        assert torch.equal(model.encode_image(images), before)   # nothing trained: DDAS routes all to zero-shot


def test_a_short_run_on_the_concept_stream(emoji_root, tmp_path):
    from vlcp.run import run_experiment

    r = run_experiment(fomo_cfg(emoji_root), tmp_path)
    assert len(r["train"]) == 2 and all(t["steps"] >= 1 for t in r["train"])
    assert all({"clip", "balance"} <= set(t["terms"]) for t in r["train"])
    assert len(r["trajectory"]) == 2 and all(0 <= row["GM"] <= 100 for row in r["trajectory"])


def test_more_tasks_than_routers_is_refused(emoji_root, tmp_path):
    from vlcp.errors import ConfigError
    from vlcp.run import run_experiment

    cfg = fomo_cfg(emoji_root, routers=1)
    with pytest.raises(ConfigError, match="method.routers: 1 routers for a stream of 2 tasks"):
        run_experiment(cfg, tmp_path)


def test_a_resumed_run_equals_an_uninterrupted_one(emoji_root, tmp_path):
    """The experts, routers, choosers and frozen mask are model tensors: stopping after task 1 and resuming
    gives the uninterrupted run's trajectory (the gating noise from the restored global generator)."""
    from vlcp.run import run_experiment

    cfg = fomo_cfg(emoji_root)
    whole = run_experiment(cfg, tmp_path / "whole")
    run_experiment(cfg, tmp_path / "parts", stop_after_task=0)
    resumed = run_experiment(cfg, tmp_path / "parts")
    assert [row["GM"] for row in resumed["trajectory"]] == [row["GM"] for row in whole["trajectory"]]
