"""The loop end to end on three real tasks: resume equals an uninterrupted run, seeds reproduce,
every method runs and produces a full results.json."""
import json

import pytest

from conftest import tiny_experiment, strip_timings as strip
from vlcp.run import run_experiment


@pytest.fixture(scope="module")
def uninterrupted(emoji_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return run_experiment(tiny_experiment(emoji_root, "er", buffer_size=20), out), out


def test_results_schema(uninterrupted):
    r, out = uninterrupted
    assert json.loads((out / "results.json").read_text())["experiment"] == "test-er"
    assert r["tasks"] == ["Smileys & Emotion", "Animals & Nature", "Activities"]
    assert sum(r["steps_per_task"]) == 12
    rm = r["matrix"]["unseen_style"]["Rm"]
    assert len(rm) == 3 and all(len(row) == 3 for row in rm)
    assert set(r["matrix"]["test"]) >= {"TR@1", "IR@10", "Rm", "ZS@1"}
    assert len(r["cumulative"]) == 3 and {"Rm", "mAP@10", "mAP_std@10"} <= set(r["cumulative"][-1]["test"])
    assert len(r["final_cumulative"]) == 3
    assert r["final_cumulative"][-1]["Rm"] == pytest.approx(r["cumulative"][-1]["test"]["Rm"])
    assert all(t["samples"] == t["steps"] * 16 and t["seconds"] > 0 for t in r["train"])
    assert r["flops_per_step"] > 0 and r["zero_shot"]["test"]["Rm"]


def test_resume_equals_uninterrupted(uninterrupted, emoji_root, tmp_path):
    full, _ = uninterrupted
    cfg = tiny_experiment(emoji_root, "er", buffer_size=20)
    partial = run_experiment(cfg, tmp_path, stop_after_task=0)
    assert len(partial["cumulative"]) == 1 and not (tmp_path / "results.json").exists()
    resumed = run_experiment(cfg, tmp_path)
    assert strip(resumed) == strip(full)


def test_checkpoint_due_at_known_tasks():
    from vlcp.run.state import checkpoint_due

    assert [t for t in range(7) if checkpoint_due(t, 7, 1, None)] == list(range(7))
    assert [t for t in range(7) if checkpoint_due(t, 7, 3, None)] == [2, 5, 6]     # every 3rd and the last
    assert [t for t in range(7) if checkpoint_due(t, 7, 3, 3)] == [2, 3, 4, 5, 6]  # and from a stop on


def test_interrupted_between_checkpoints_resumes_from_the_earlier_one(uninterrupted, emoji_root, tmp_path, monkeypatch):
    """`train.checkpoint_every: 2` on three tasks: a checkpoint after the second task and the last
    only; a run that dies in the third task resumes after the second and ends as the uninterrupted run."""
    from dataclasses import replace

    import vlcp.run.loop as runner
    from vlcp.train.checkpoint import Checkpoints

    full, _ = uninterrupted
    cfg = tiny_experiment(emoji_root, "er", buffer_size=20)
    cfg = replace(cfg, train=replace(cfg.train, checkpoint_every=2))
    saved, save, train = [], Checkpoints.save, runner.train_counted
    monkeypatch.setattr(Checkpoints, "save", lambda self, state: (saved.append(state["task"]), save(self, state)))

    def dies_in_third_task(model, method, ctx, *args, **kwargs):
        if ctx.task == 2:
            raise RuntimeError("killed")
        return train(model, method, ctx, *args, **kwargs)
    monkeypatch.setattr(runner, "train_counted", dies_in_third_task)
    with pytest.raises(RuntimeError, match="killed"):
        run_experiment(cfg, tmp_path)
    assert saved == [1]
    monkeypatch.setattr(runner, "train_counted", train)
    resumed = run_experiment(cfg, tmp_path)
    assert saved == [1, 2]
    a, b = strip(resumed), strip(full)
    assert a.pop("config")["train"]["checkpoint_every"] == 2
    b.pop("config"), a.pop("config_hash"), b.pop("config_hash")
    assert a == b


def test_compiled_model_trains_like_the_eager_one(uninterrupted, emoji_root, tmp_path, monkeypatch):
    """`train.compile`: the step's forward and loss under torch.compile (dynamo's tracing; the `eager`
    backend, VLCP_COMPILE_BACKEND, runs the captured graphs without code generation, so this stays a CPU
    test of the wiring, not of inductor) gives the same run as the uncompiled one, ER's buffer included."""
    from dataclasses import replace

    from vlcp.config import ConfigError, experiment_from_dict
    import torch._dynamo
    from torch._dynamo.utils import counters

    full, _ = uninterrupted
    cfg = tiny_experiment(emoji_root, "er", buffer_size=20)
    monkeypatch.setenv("VLCP_COMPILE_BACKEND", "eager")
    torch._dynamo.reset()
    counters.clear()
    compiled = run_experiment(replace(cfg, train=replace(cfg.train, compile="default")), tmp_path)
    assert counters["stats"]["unique_graphs"] > 0          # the forward did go through dynamo
    a, b = strip(compiled), strip(full)
    assert a.pop("config")["train"]["compile"] == "default"
    b.pop("config"), a.pop("config_hash"), b.pop("config_hash")
    assert a == b
    with pytest.raises(ConfigError, match="train.compile: must be one of none, default, .* got 'fast'"):
        experiment_from_dict({"train": {"compile": "fast"}})


def test_same_seed_same_metrics_other_seed_differs(emoji_root, tmp_path):
    a = run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path / "a")
    b = run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path / "b")
    assert strip(a)["matrix"] == strip(b)["matrix"]
    cfg = tiny_experiment(emoji_root, "seqf", steps=6)
    cfg.seed = 1
    c = run_experiment(cfg, tmp_path / "c")
    assert c["matrix"] != a["matrix"]


def test_jointt_trains_on_all_seen_tasks(emoji_root, tmp_path):
    from vlcp.methods import get_method
    from vlcp.methods.base import TaskContext
    import torch

    ids = [torch.arange(0, 5), torch.arange(5, 9), torch.arange(9, 12)]
    ctx = TaskContext(task=2, num_tasks=3, train_set=None, task_ids=ids, pool=ids[2], materialize=None,
                      generator=torch.Generator())
    get_method("jointt")().before_task(None, ctx)
    assert ctx.pool.tolist() == list(range(12))
    r = run_experiment(tiny_experiment(emoji_root, "jointt", steps=6), tmp_path)
    assert len(r["cumulative"]) == 3


def test_er_replays_from_the_buffer(emoji_root):
    import torch

    from vlcp.methods import get_method
    from vlcp.methods.base import TaskContext

    er = get_method("er")(get_method("er").Config(buffer_size=4, replay_fraction=0.5))
    er.buffer.add(torch.tensor([100, 101, 102, 103]))
    seen = {}
    ctx = TaskContext(task=1, num_tasks=2, train_set=None, task_ids=[], pool=torch.arange(8),
                      materialize=lambda ids: seen.setdefault("ids", ids), generator=torch.Generator().manual_seed(0))
    er.make_batch(torch.arange(8), ctx)
    assert seen["ids"][:4].tolist() == [0, 1, 2, 3]
    assert set(seen["ids"][4:].tolist()) <= {100, 101, 102, 103}
    er.after_step(None, None, ctx)
    assert er.buffer.seen == 8  # the 4 current samples were offered to the reservoir


@pytest.mark.parametrize("method,args", [("ewc", {"fisher_batches": 2}), ("afec", {"fisher_batches": 2})])
def test_per_task_passes_are_counted_on_copies(emoji_root, tmp_path, monkeypatch, method, args):
    """EWC's Fisher pass and AFEC's expansion are counted (task_pass_flops) without changing the
    run: the same results as with the counting switched off."""
    import vlcp.run.accounting as runner

    counted = run_experiment(tiny_experiment(emoji_root, method, steps=9, **args), tmp_path / "a")
    passes = [t["task_pass_flops"] for t in counted["train"]]
    step = counted["train"][0]["flops_per_step"]
    assert all(p >= 2 * step * 0.5 for p in passes)              # >= the Fisher's 2 batches (of 16 vs 16)
    if method == "afec":                                           # + the expansion from task 1 on: 3 more steps
        assert all(p > passes[0] + 2 * step for p in passes[1:])
    monkeypatch.setattr(runner, "task_pass_flops", lambda *a: 0)
    plain = run_experiment(tiny_experiment(emoji_root, method, steps=9, **args), tmp_path / "b")
    for r in (counted, plain):
        for t in r["train"]:
            t.pop("task_pass_flops")
    assert strip(counted) == strip(plain)


def test_flops_every_counts_some_tasks_and_changes_nothing_else(uninterrupted, emoji_root, tmp_path):
    """`train.flops_every: 2` on three tasks counts the step's and the passes' FLOPs after the
    second and the last task only (EWC: its Fisher pass), with the counts of the run that counts
    every task, and leaves the run as it was."""
    from dataclasses import replace

    every = run_experiment(tiny_experiment(emoji_root, "ewc", steps=9, fisher_batches=2), tmp_path / "a")
    cfg = tiny_experiment(emoji_root, "ewc", steps=9, fisher_batches=2)
    sampled = run_experiment(replace(cfg, train=replace(cfg.train, flops_every=2)), tmp_path / "b")
    pick = lambda r, k: [t[k] for t in r["train"]]  # noqa: E731
    for k in ("flops_per_step", "task_pass_flops"):
        assert pick(sampled, k)[0] is None and pick(sampled, k)[1:] == pick(every, k)[1:] and pick(every, k)[0] > 0
    for r in (sampled, every):
        for t in r["train"]:
            del t["flops_per_step"], t["task_pass_flops"]
    a, b = strip(sampled), strip(every)
    assert a.pop("config")["train"]["flops_every"] == 2
    b.pop("config"), a.pop("config_hash"), b.pop("config_hash")
    assert a == b


def test_phase_seconds_split_each_task_and_a_profile_splits_them_by_op(emoji_root, tmp_path):
    """Every task records the seconds of each loop phase (they add up to the task's time); under
    torch.profiler the same phases are labelled, and `phase_profile` finds them with their ops."""
    import torch

    from vlcp.train.budget import PYTHON, phase_profile
    from vlcp.train.loop import PHASES, TASK_PHASES

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        r = run_experiment(tiny_experiment(emoji_root, "si", steps=6), tmp_path)
    for t in r["train"]:
        ph = t["phase_seconds"]
        assert set(ph) == set(PHASES + TASK_PHASES)       # SI has after_backward, after_step and after_task work
        assert 0.5 * t["seconds"] < sum(ph.values()) <= t["seconds"] * 1.01
    prof_ms = phase_profile(prof.events(), steps=6)
    assert set(prof_ms["ms_per_step"]) == set(PHASES + TASK_PHASES)
    ops = dict(prof_ms["top_ops"]["backward"])
    assert any(op.startswith("aten::") for op in ops) and all(v >= 0 for v in ops.values())
    fwd = dict(prof_ms["top_ops"]["forward"])
    assert PYTHON in dict(phase_profile(prof.events(), steps=6, top=100)["top_ops"]["forward"])
    assert max(fwd.values()) <= prof_ms["ms_per_step"]["forward"]


def test_passes_are_counted_only_for_the_listed_seeds(emoji_root, tmp_path):
    cfg = tiny_experiment(emoji_root, "ewc", steps=6, fisher_batches=1)
    cfg.train.pass_flops_seeds = [1]
    r = run_experiment(cfg, tmp_path)
    assert [t["task_pass_flops"] for t in r["train"]] == [None] * len(r["train"])
    cfg.seed = 1
    assert all(t["task_pass_flops"] > 0 for t in run_experiment(cfg, tmp_path / "s1")["train"])


def test_methods_without_per_task_hooks_count_no_passes(emoji_root, tmp_path):
    r = run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path)
    assert [t["task_pass_flops"] for t in r["train"]] == [0] * len(r["train"])


def test_cpu_peak_memory_is_per_task(tmp_path):
    """On Linux the CPU peak (VmHWM) restarts at each task's reset, so the runs of a study process
    each get their own peak memory rather than the largest of every earlier run."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("no /proc/self/clear_refs (not Linux)")
    # in a fresh process: a test worker's earlier, freed memory can serve the allocation unseen
    code = """
import torch
from vlcp.train import budget
cpu = torch.device("cpu")
budget.reset_peak_memory(cpu)
base = budget.peak_memory_mb(cpu)
x = torch.ones(64 * 2**20)      # 256 MB, touched
del x
grown = budget.peak_memory_mb(cpu)
budget.reset_peak_memory(cpu)
print(base, grown, budget.peak_memory_mb(cpu))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout.split()
    base, grown, after = map(float, out[-3:])
    assert grown > base + 200
    assert after < base + 100


def test_lamb_steps_each_tensor_by_its_trust_ratio(emoji_root, tmp_path):
    """train.optimizer: lamb (IncCLIP's): each decayed tensor moves by lr × its own norm on the
    first step (LAMB's trust ratio ‖θ‖ / ‖Adam step + decay‖); the undecayed ones (biases, gains)
    take Adam's step, as timm's LAMB; a run trains with it; methods that build their own
    optimizer refuse it by name."""
    from dataclasses import replace

    import torch

    from vlcp.config import ConfigError, TrainCfg
    from vlcp.train.optim import make_optimizer

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    opt = make_optimizer(model, TrainCfg(optimizer="lamb", lr=0.01, weight_decay=0.003))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model(torch.randn(32, 8)).pow(2).mean().backward()
    opt.step()
    for n, p in model.named_parameters():
        step = p.detach() - before[n]
        if p.ndim == 2:
            assert abs((step.norm() / before[n].norm()).item() - 0.01) < 1e-5, n
        else:   # Adam's first step: lr × sign(g) per element
            torch.testing.assert_close(step.abs(), torch.full_like(step, 0.01), rtol=1e-3, atol=1e-6)
    r = run_experiment(replace(tiny_experiment(emoji_root, "er", steps=6, buffer_size=20),
                               train=replace(tiny_experiment(emoji_root).train, steps=6, optimizer="lamb")), tmp_path / "lamb")
    assert r["config"]["train"]["optimizer"] == "lamb" and len(r["train"]) == 3
    with pytest.raises(ConfigError, match="train.optimizer: GaLore builds its own optimizer"):
        cfg = tiny_experiment(emoji_root, "galore", steps=3)
        run_experiment(replace(cfg, train=replace(cfg.train, optimizer="lamb")), tmp_path / "galore")
    with pytest.raises(ConfigError, match="optimizer: must be one of adamw, lamb"):
        TrainCfg(optimizer="sgd")


@pytest.mark.parametrize("scale", [1e-3, 1e3, float("nan")])
def test_clip_gradients_equals_torchs_clip_and_skips_only_a_multiply_by_one(monkeypatch, scale):
    """vlcp.train.optim.clip_gradients: the same gradients and norm as torch.nn.utils.clip_grad_norm_,
    bit for bit, with the multiply by a coefficient of 1 skipped when the host may read it (`read`)."""
    import torch

    from vlcp.train import optim

    def params():
        g = torch.Generator().manual_seed(0)
        ps = [torch.nn.Parameter(torch.randn(n, generator=g)) for n in (7, 300, 4096)] + [torch.nn.Parameter(torch.ones(3))]
        for p in ps[:3]:
            p.grad = torch.randn(p.shape, generator=g) * scale   # the last one has no gradient
        return ps

    ref = params()
    ref_norm = torch.nn.utils.clip_grad_norm_(ref, 1.0)
    calls = []
    clip = torch.nn.utils.clip_grads_with_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grads_with_norm_", lambda *a: calls.append(1) or clip(*a))
    for read in (False, True):
        calls.clear()
        ps = params()
        norm = optim.clip_gradients(ps, 1.0, read=read)
        assert torch.equal(norm, ref_norm) or (norm.isnan() and ref_norm.isnan())
        for p, r in zip(ps, ref):
            assert (p.grad is None) == (r.grad is None)
            if p.grad is not None:
                assert torch.equal(p.grad, r.grad) or (p.grad.isnan().all() and r.grad.isnan().all())
        assert len(calls) == (0 if read and scale < 1 else 1)   # skipped: the norm within 1.0, and read
