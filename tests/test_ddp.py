"""2-process DDP (gloo, CPU) trains exactly like one process on the same global batch: CLIP with
SeqF, and ALBEF with CTP over two tasks (momentum contrast with queues, MLM and its distillation,
topology preservation against the previous-task model), in the loop; and whole runs of each
runner under a torchrun-like environment: a CTP run, a CLL-CLIP + TEIR run (expandable
embeddings, gradients averaged without the DDP wrapper, vocabs from rank 0) and a FoMo-in-Flux
run (easy-to-hard order from the base model, EMA merging) give the same weights, losses and
metrics; so does CLL-CLIP's DER (replay with stored features)."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vlcp.config import TrainCfg
from vlcp.methods import get_method
from vlcp.methods.base import TaskContext
from vlcp.models import create_model
from vlcp.train.distributed import wrap_ddp
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
        model = wrap_ddp(model)   # the token embeddings outside DDP's buckets: their used rows averaged
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


def run_worker(rank, world, cfg, out, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from vlcp.run import run_experiment

    try:
        run_experiment(cfg, out)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runner_case(case, root):
    from conftest import cll_experiment, tiny_experiment
    from test_fomo_run import fomo_experiment

    if case == "ctp":
        cfg = tiny_experiment(root, "ctp", steps=6, model="albef-tiny", queue_size=32)
    elif case == "cllclip-teir":
        cfg = cll_experiment(root, "cllclip", steps=6, teir=True)
    elif case == "cll-der":   # replayed rows told apart by global position, stored features gathered
        cfg = cll_experiment(root, "cll-der", steps=6, buffer_size=32, replay_fraction=0.5)
    elif case == "cll-oewc":  # the Fisher reduced over ranks; the penalty over its support rows of the growing table
        cfg = cll_experiment(root, "cll-oewc", steps=6, fisher_batches=2)
    else:
        cfg = fomo_experiment(root, "ema-merge", ordering="easy-to-hard", num_tasks=2, steps_per_task=3)
    cfg.train.num_threads = 1
    return cfg


def metrics_of(r: dict) -> dict:
    """Every evaluation number of a results dict, flattened: path -> value."""
    out = {}

    def walk(x, path):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}/{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            out[path] = x
    for key in ("zero_shot", "matrix", "cumulative", "final_cumulative", "trajectory", "convergence"):
        walk(r.get(key), key)
    for i, t in enumerate(r["train"]):
        walk({"loss": t["loss"], "terms": t["terms"], "steps": t["steps"]}, f"train[{i}]")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", ["ctp", "cllclip-teir", "cll-der", "cll-oewc", "fomo"])
def test_two_process_run_matches_one_process(case, emoji_root, tmp_path):
    from vlcp.run import run_experiment
    from vlcp.utils import read_json

    cfg = runner_case(case, emoji_root)
    single = run_experiment(cfg, tmp_path / "single")
    mp.spawn(run_worker, args=(2, cfg, str(tmp_path / "ddp"), free_port()), nprocs=2, join=True)
    ddp = read_json(tmp_path / "ddp" / "results.json")
    assert ddp["world_size"] == 2 and single["world_size"] == 1
    weights = [torch.load(tmp_path / d / "checkpoint.pt", weights_only=True)["model"] for d in ("single", "ddp")]
    weights = [w if isinstance(w, dict) else w.state_dict() for w in weights]   # CLL checkpoints the module
    for k, v in weights[0].items():   # (Adam's normalised steps amplify float noise on tiny gradients: 1e-4)
        torch.testing.assert_close(weights[1][k], v, rtol=1e-3, atol=1e-4, msg=k)
    a, b = metrics_of(single), metrics_of(ddp)
    assert a.keys() == b.keys() and len(a) > 50
    # ALBEF's mAP ranks galleries by the fusion [CLS] score, whose near-ties in the tiny model
    # flip with 1e-7 weight differences (measured: up to 1.5 points); every other number is tight
    loose = lambda k: "/mAP" in k   # noqa: E731
    bad = {k: (a[k], b[k]) for k in a
           if b[k] != pytest.approx(a[k], rel=1e-4, abs=2.0 if loose(k) else 1e-4)}
    assert not bad


def test_lookup_tables_are_the_untied_trainable_embeddings():
    from vlcp.models.token_embedding import ExpandableEmbedding
    from vlcp.train.distributed import lookup_tables

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.words = torch.nn.Embedding(50, 4)
            self.tied = torch.nn.Embedding(50, 4)
            self.head = torch.nn.Linear(4, 50)
            self.head.weight = self.tied.weight        # BERT's MLM decoder: a dense gradient
            self.frozen = torch.nn.Embedding(50, 4).requires_grad_(False)
            self.grown = ExpandableEmbedding(torch.zeros(50, 4))

    net = Net()
    assert set(lookup_tables(net)) == {"words.weight", "grown.weight"}
    assert lookup_tables(net)["words.weight"] is net.words.weight


def table_worker(rank, world, init_file, out_path):
    """Rank r's gradient: rows {r, 7} of table a (row 9 an exact zero), none at all for table b on rank 1."""
    from vlcp.train.distributed import average_table_gradients

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        a, b = torch.nn.Parameter(torch.zeros(10, 3)), torch.nn.Parameter(torch.zeros(6, 2))
        a.grad = torch.zeros(10, 3)
        a.grad[rank] = rank + 1.0
        a.grad[7] = 10.0 * (rank + 1)
        if rank == 0:
            b.grad = torch.ones(6, 2)
        average_table_gradients([a, b])
        if rank == 1:
            torch.save({"a": a.grad, "b": b.grad}, out_path)
    finally:
        dist.destroy_process_group()


def test_table_gradients_average_over_ranks_by_their_used_rows(tmp_path):
    mp.spawn(table_worker, args=(2, str(tmp_path / "init"), str(tmp_path / "g.pt")), nprocs=2, join=True)
    got = torch.load(tmp_path / "g.pt")
    want = torch.zeros(10, 3)
    want[0], want[1], want[7] = 0.5, 1.0, 15.0     # (rank 0's + rank 1's) / 2
    torch.testing.assert_close(got["a"], want)
    torch.testing.assert_close(got["b"], torch.full((6, 2), 0.5))   # rank 1 had none: zeros, and now has one
