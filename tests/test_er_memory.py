"""ER's memory timing (vlcp/methods/er.py `memory_update`): the IncCLIP study's replay methods
update the reservoir after each task's training (IncCLIP §3.3), so no pair of the current task
is replayed within its task and nothing is replayed in task 0; CTP's ER keeps the online
reservoir (the default)."""
from types import SimpleNamespace

import pytest
import torch

from vlcp.config import load_params, resolve_experiment
from vlcp.errors import ConfigError
from vlcp.methods import get_method

IC_METHODS = ("er", "ucir", "geodl", "co2l", "incclip")
IC_EXPERIMENTS = [f"{split}-{m}" for split in ("ic4", "ic8", "ici") for m in IC_METHODS] + [
    "incclip", "ic4-incclip-wnc", "ic4-incclip-wnc-kd", "ic4-incclip-mem1", "ic4-incclip-mem50", "ic4-incclip-every8",
    "ic4-incclip-band", "ic4-incclip-pseudoall", "ic4-incclip-kdt02", "ic4-incclip-wnc12", "ic4-incclip-replay25"]


@pytest.fixture(scope="module")
def params():
    return load_params("params.yaml")


def method_of(cfg):
    cls = get_method(cfg.method.name)
    return cls(cls.Config(**cfg.method.args), seed=0)


def replay_log(method, task_sizes=(40, 30, 50), steps=6, batch=8):
    """Drive the replay hooks (make_batch -> after_step per step, after_task per task) over a
    stream of disjoint id ranges; per task, the current and replayed ids of every step."""
    starts = [sum(task_sizes[:t]) for t in range(len(task_sizes))]
    task_ids = [torch.arange(s, s + n) for s, n in zip(starts, task_sizes)]
    log = []
    for t, ids in enumerate(task_ids):
        gen = torch.Generator().manual_seed(t)
        ctx = SimpleNamespace(task=t, num_tasks=len(task_ids), task_ids=task_ids, pool=ids, generator=gen,
                              step=0, extras={}, materialize=lambda x: SimpleNamespace(ids=x))
        rows = []
        for step in range(steps):
            ctx.step = step
            drawn = ids[torch.randint(0, len(ids), (batch,), generator=gen)]
            b = method.make_batch(drawn, ctx)
            n_current = len(ctx.extras["current_ids"])
            rows.append((b.ids[:n_current], b.ids[n_current:]))
            method.after_step(None, b, ctx)
        method.after_task(None, ctx)
        log.append(rows)
    return task_ids, log


@pytest.mark.parametrize("name", IC_EXPERIMENTS)
def test_incclip_study_updates_memory_after_each_task(params, name):
    assert resolve_experiment(params, name).method.args["memory_update"] == "after_task"


@pytest.mark.parametrize("name", [f"ic4-{m}" for m in IC_METHODS])
def test_incclip_study_never_replays_the_current_task(params, name):
    method = method_of(resolve_experiment(params, name))
    task_ids, log = replay_log(method)
    assert all(len(replayed) == 0 for _, replayed in log[0]), "replay starts in task 0"
    for t in range(1, len(task_ids)):
        earlier = torch.cat(task_ids[:t])
        for current, replayed in log[t]:
            assert len(replayed) == 4                                   # replay_fraction 0.5 of 8
            assert torch.isin(replayed, earlier).all(), f"task {t} replays a pair of its own task"
            assert torch.isin(current, task_ids[t]).all()


def test_after_task_offers_each_training_pair_once_by_reservoir_sampling():
    cls = get_method("er")
    m = cls(cls.Config(buffer_size=25, memory_update="after_task"), seed=3)
    task_ids, _ = replay_log(m, task_sizes=(40, 30, 50))
    assert m.buffer.seen == 120                                         # every training pair once, not every draw
    assert len(m.buffer) == 25 and len(set(m.buffer.ids.tolist())) == 25
    # Vitter's R over the stream of tasks: the buffer stays a uniform sample of every pair seen
    shares = []
    for seed in range(60):
        m = cls(cls.Config(buffer_size=20, memory_update="after_task"), seed=seed)
        replay_log(m, task_sizes=(40, 40), steps=1)
        shares.append(torch.isin(m.buffer.ids, torch.arange(40)).float().mean().item())
    assert sum(shares) / len(shares) == pytest.approx(0.5, abs=0.06)


def test_online_memory_is_the_default_and_unchanged():
    """CTP's ER (supp. B.2) keeps the online reservoir: every step's current pairs enter at once."""
    cls = get_method("er")
    assert cls.Config().memory_update == "online"
    m = cls(cls.Config(buffer_size=1000), seed=0)
    task_ids, log = replay_log(m, task_sizes=(40, 30), steps=3)
    assert len(log[0][0][1]) == 0 and len(log[0][1][1]) == 4          # replay from task 0's second step
    offered = torch.cat([c for rows in log for c, _ in rows])
    assert m.buffer.seen == len(offered) and torch.equal(m.buffer.ids, offered)


def test_memory_update_error_names_the_field():
    with pytest.raises(ConfigError, match="memory_update"):
        get_method("incclip").Config(memory_update="per_epoch")


@pytest.mark.parametrize("name,terms", [("ucir", {"clip", "lf", "mr"}), ("geodl", {"clip", "geo"}),
                                        ("co2l", {"clip", "ird"}), ("incclip", {"clip", "kd"})])
def test_replay_methods_run_on_the_after_task_memory(name, terms):
    """Task 0 with an empty buffer: no crash, no replayed rows, only the CLIP loss; task 1 replays
    task 0's pairs and has every term, all finite."""
    from vlcp.methods.base import Batch
    from vlcp.models.clip import create_clip

    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny-rn")
    images, tokens = torch.randn(24, 3, 32, 32), tok([f"emoji {i} of a thing" for i in range(24)])
    cls = get_method(name)
    m = cls(cls.Config(buffer_size=6, memory_update="after_task",
                       **({"pseudo_iters": 1, "pseudo_batch": 2} if name == "incclip" else {})), seed=0)
    task_ids = [torch.arange(0, 12), torch.arange(12, 24)]
    for t, ids in enumerate(task_ids):
        gen = torch.Generator().manual_seed(t)
        ctx = SimpleNamespace(task=t, num_tasks=2, task_ids=task_ids, pool=ids, generator=gen, step=0, extras={},
                              materialize=lambda x: Batch(images[x], tokens[x], x))
        m.before_task(model, ctx)
        batch = m.make_batch(ids[:8], ctx)
        replayed = batch.ids[len(ctx.extras["current_ids"]):]
        out = m.loss(model, batch, ctx)
        assert set(out) == ({"clip"} if t == 0 else terms)
        assert all(torch.isfinite(v) for v in out.values())
        assert len(replayed) == (0 if t == 0 else 4) and torch.isin(replayed, task_ids[0]).all()
        m.after_step(model, batch, ctx)
        m.after_task(model, ctx)
