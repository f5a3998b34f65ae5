"""2-process DDP (gloo, CPU) trains exactly like one process on the same global batch."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vlcp.config import TrainCfg
from vlcp.methods import get_method
from vlcp.methods.base import TaskContext
from vlcp.models import create_clip
from vlcp.train.loop import Materializer, train_task

STEPS, BATCH = 3, 16


def train(out_path):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, tok = create_clip("vlcp-tiny")
    if dist.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model)
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (64, 32, 32, 3), generator=g, dtype=torch.uint8)
    tokens = tok([f"caption {i} variant {k}" for i in range(64) for k in range(2)]).view(64, 2, -1)
    mat = Materializer(images, torch.arange(64), tokens, torch.device("cpu"), augment=True)
    gen = torch.Generator().manual_seed(2)
    ctx = TaskContext(task=0, num_tasks=1, train_set=None, task_ids=[torch.arange(64)], pool=torch.arange(64),
                      materialize=lambda ids: mat(ids, gen), generator=gen)
    cfg = TrainCfg(steps=STEPS, batch_size=BATCH, lr=1e-3, warmup_steps=1, progress=False)
    stats = train_task(model, get_method("seqf")(), ctx, STEPS, cfg, torch.device("cpu"))
    module = model.module if hasattr(model, "module") else model
    if not dist.is_initialized() or dist.get_rank() == 0:
        torch.save({"loss": stats["loss"], "state": module.state_dict()}, out_path)


def worker(rank, world, init_file, out_path):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        train(out_path)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_process_ddp_matches_one_process(tmp_path):
    train(tmp_path / "single.pt")
    mp.spawn(worker, args=(2, str(tmp_path / "init"), str(tmp_path / "ddp.pt")), nprocs=2, join=True)
    single, ddp = torch.load(tmp_path / "single.pt"), torch.load(tmp_path / "ddp.pt")
    assert ddp["loss"] == pytest.approx(single["loss"], rel=1e-5)
    for k, v in single["state"].items():
        torch.testing.assert_close(ddp["state"][k], v, rtol=1e-4, atol=1e-5, msg=k)
    # and training moved the weights (the comparison is not vacuous)
    torch.manual_seed(0)
    init, _ = create_clip("vlcp-tiny")
    assert not torch.allclose(init.state_dict()["text_projection"], single["state"]["text_projection"])
