"""2-process DDP (gloo, CPU) trains exactly like one process on the same global batch: CLIP with
SeqF, and ALBEF with CTP over two tasks (momentum contrast with queues, MLM and its distillation,
topology preservation against the previous-task model)."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vlcp.config import TrainCfg
from vlcp.methods import get_method
from vlcp.methods.base import TaskContext
from vlcp.models import create_model
from vlcp.train.loop import Materializer, train_task

STEPS, BATCH = 3, 16
CASES = {  # name: (model, method, method args, tasks)
    "clip-seqf": ("vlcp-tiny", "seqf", {}, 1),
    "albef-ctp": ("albef-tiny", "ctp", {"queue_size": 32}, 2),
}
CAPTIONS = [f"caption {i} variant {k}" for i in range(64) for k in range(2)]


def train(case, out_path):
    model_name, method_name, args, tasks = CASES[case]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, tok = create_model(model_name, corpus=CAPTIONS)
    if dist.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model)
    module = model.module if hasattr(model, "module") else model
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (64, 32, 32, 3), generator=g, dtype=torch.uint8)
    tokens = tok(CAPTIONS).view(64, 2, -1)
    mask = tok.masker() if hasattr(tok, "masker") else None
    mat = Materializer(images, torch.arange(64), tokens, torch.device("cpu"), augment=True, mask=mask)
    cls = get_method(method_name)
    method = cls(cls.Config(**args), seed=3)
    task_ids = list(torch.arange(64).chunk(tasks))
    cfg = TrainCfg(steps=STEPS, batch_size=BATCH, lr=1e-3, warmup_steps=1, progress=False)
    losses = []
    for t in range(tasks):
        gen = torch.Generator().manual_seed(2 + t)
        ctx = TaskContext(task=t, num_tasks=tasks, train_set=None, task_ids=task_ids, pool=task_ids[t],
                          materialize=lambda ids, g=gen: mat(ids, g), generator=gen)
        stats = train_task(model, method, ctx, STEPS, cfg, torch.device("cpu"))
        method.after_task(module, ctx)
        losses.append(stats["terms"])
    if not dist.is_initialized() or dist.get_rank() == 0:
        torch.save({"terms": losses, "state": module.state_dict(), "method": method.state_dict()}, out_path)


def worker(rank, world, case, init_file, out_path):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        train(case, out_path)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_two_process_ddp_matches_one_process(case, tmp_path):
    train(case, tmp_path / "single.pt")
    mp.spawn(worker, args=(2, case, str(tmp_path / "init"), str(tmp_path / "ddp.pt")), nprocs=2, join=True)
    single, ddp = torch.load(tmp_path / "single.pt"), torch.load(tmp_path / "ddp.pt")
    for s_terms, d_terms in zip(single["terms"], ddp["terms"]):   # every loss term, every task
        assert d_terms.keys() == s_terms.keys() and d_terms == pytest.approx(s_terms, rel=1e-4, abs=1e-6)
    for k, v in single["state"].items():
        torch.testing.assert_close(ddp["state"][k], v, rtol=1e-4, atol=1e-5, msg=k)
    if case == "albef-ctp":   # the queues are filled with the same (gathered) momentum features
        assert {"cmc", "topo_cross", "topo_same", "mlm_distill"} <= set(single["terms"][-1])
        for q_single, q_ddp in zip(single["method"]["queues"], ddp["method"]["queues"]):
            torch.testing.assert_close(q_ddp, q_single, rtol=1e-4, atol=1e-5)
    # and training moved the weights (the comparison is not vacuous)
    torch.manual_seed(0)
    init, _ = create_model(CASES[case][0], corpus=CAPTIONS)
    moved = [k for k, v in init.state_dict().items() if v.dtype.is_floating_point and not torch.allclose(v, single["state"][k])]
    assert moved
