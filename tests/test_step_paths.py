"""The step's GPU options on CPU (`train.compile`, `train.accum_freq`, `train.grad_checkpointing`): each
trains as the plain step does, and the methods and models an option cannot serve are refused in one line."""
from __future__ import annotations

import pytest
import torch

from vlcp.config import ConfigError, TrainCfg, experiment_from_dict
from vlcp.methods import get_method
from vlcp.methods.base import Batch, TaskContext
from vlcp.models.clip import create_clip
from vlcp.train.loop import train_task

STEPS = 3


@pytest.fixture(scope="module")
def data():
    """32 random image-text pairs for vlcp-tiny (dropout-free), and its initial weights."""
    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny")
    g = torch.Generator().manual_seed(1)
    images = torch.randn(32, 3, 32, 32, generator=g)
    texts = torch.randint(1, 49408, (32, tok.context_length), generator=g)
    return images, texts, {k: v.clone() for k, v in model.state_dict().items()}


def fresh_model(data):
    model, _ = create_clip("vlcp-tiny")
    model.load_state_dict(data[2])
    return model


def train(data, model=None, method="seqf", **options):
    """`STEPS` steps of `method` at batch 16 on `data`: (stats, the model)."""
    images, texts, _ = data
    model = model or fresh_model(data)
    pool = torch.arange(len(images))
    ctx = TaskContext(task=0, num_tasks=1, train_set=None, task_ids=[pool], pool=pool,
                      generator=torch.Generator().manual_seed(2), materialize=lambda ids: Batch(images[ids], texts[ids], ids))
    cfg = TrainCfg(batch_size=16, lr=1e-3, warmup_steps=0, progress=False, **options)
    return train_task(model, get_method(method)(), ctx, STEPS, cfg, torch.device("cpu")), model


def gradients(model, batch, **options):
    """Every parameter's gradient after one step's backward (`train_task`'s, lr 0: nothing moves)."""
    images, texts = batch
    pool = torch.arange(len(images))
    ctx = TaskContext(task=0, num_tasks=1, train_set=None, task_ids=[pool], pool=pool,
                      generator=torch.Generator().manual_seed(2), materialize=lambda ids: Batch(images, texts, pool))
    cfg = TrainCfg(batch_size=len(images), lr=1e-30, warmup_steps=0, grad_clip=0, weight_decay=0, progress=False,
                   **options)
    train_task(model, get_method("seqf")(), ctx, 1, cfg, torch.device("cpu"))
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_close(a: dict, b: dict, rtol: float, atol: float):
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=rtol, atol=atol, msg=lambda m, k=k: f"{k}: {m}")


def test_accumulation_gives_the_whole_batchs_gradients_and_loss(data):
    """accum_freq 2 (two micro-batches of 8, features cached) gives the gradients of the plain step's
    batch of 16, the logit scale's included (open_clip's accumulation adds its gradient once per
    micro-batch), and over a few steps the same losses and weights (float tolerance)."""
    batch = data[0][:16], data[1][:16]
    whole = gradients(fresh_model(data), batch)
    parts = gradients(fresh_model(data), batch, accum_freq=2)
    assert "logit_scale" in whole
    assert_close(parts, whole, rtol=1e-4, atol=1e-7)
    (plain, a), (acc, b) = train(data), train(data, accum_freq=2)
    assert acc["loss"] == pytest.approx(plain["loss"], rel=1e-5) and acc["samples"] == plain["samples"]
    assert_close(dict(b.named_parameters()), dict(a.named_parameters()), rtol=1e-4, atol=1e-6)


def test_checkpointed_blocks_give_the_plain_gradients(data):
    """grad_checkpointing recomputes both towers' blocks in the backward: the same gradients, losses
    and weights as keeping the activations."""
    batch = data[0][:16], data[1][:16]
    model = fresh_model(data)
    kept = gradients(fresh_model(data), batch)
    assert_close(gradients(model, batch, grad_checkpointing=True), kept, rtol=1e-5, atol=1e-8)
    assert model.transformer.grad_checkpointing and model.visual.transformer.grad_checkpointing
    (plain, a), (ckpt, b) = train(data), train(data, grad_checkpointing=True)
    assert ckpt["loss"] == pytest.approx(plain["loss"], rel=1e-6)
    assert_close(dict(b.named_parameters()), dict(a.named_parameters()), rtol=1e-5, atol=1e-7)


def test_compiled_step_trains_like_the_eager_one_and_compiles_once(data, monkeypatch):
    """compile=default: the step's forward, loss and backward through torch.compile (AOTAutograd's
    joint graph; the aot_eager backend runs it without inductor's C++ build, too slow on a loaded CPU
    test box) gives the eager step's losses within rel 1e-4; a second task on the same model reuses the
    compiled graphs."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    monkeypatch.setenv("VLCP_COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    counters.clear()
    plain, a = train(data)
    first, b = train(data, compile="default")
    graphs = counters["stats"]["unique_graphs"]
    assert graphs > 0                                     # the step did go through dynamo
    assert first["loss"] == pytest.approx(plain["loss"], rel=1e-4)
    assert_close(dict(b.named_parameters()), dict(a.named_parameters()), rtol=1e-3, atol=1e-5)
    train(data, model=b, compile="default")
    assert counters["stats"]["unique_graphs"] == graphs   # compiled once
    torch._dynamo.reset()


def test_options_a_method_or_model_cannot_serve_are_refused_in_one_line():
    from vlcp.run.requirements import check_config

    def experiment(method="seqf", model="vlcp-tiny", **options):
        return experiment_from_dict({"method": {"name": method}, "model": {"name": model}, "train": options})

    with pytest.raises(ConfigError, match=r"^train.accum_freq: .* method 'lwf' adds its own loss terms"):
        check_config(experiment("lwf", accum_freq=2))
    with pytest.raises(ConfigError, match=r"^train.accum_freq: .* model 'albef-tiny' adds an MLM term"):
        check_config(experiment("seqf", "albef-tiny", accum_freq=2))
    with pytest.raises(ConfigError, match=r"^train.grad_checkpointing: model 'albef-tiny' \(ALBEF\)"):
        check_config(experiment("seqf", "albef-tiny", grad_checkpointing=True))
    check_config(experiment(accum_freq=2, grad_checkpointing=True, compile="reduce-overhead"))
    with pytest.raises(ConfigError, match=r"^train.compile: must be one of none, default, reduce-overhead, "
                                          r"max-autotune \(a torch.compile mode\), got 'inductor'"):
        experiment(compile="inductor")
    with pytest.raises(ConfigError, match=r"^train.accum_freq: batch_size 128 does not split into 3 equal"):
        experiment(accum_freq=3)
