"""vlcp's training step vs open_clip_train's, on the same model, batch and synthetic data.

    .venv/bin/python benchmarks/throughput.py [--model vlcp-tiny] [--batch 128] [--steps 30]
        [--repeats 25] [--threads 2] [--device cpu] [--precision fp32] [--out benchmarks/results/throughput.json]

Both loops get the same pre-made batches (normalised images, token ids), so the data path is
out of the comparison: vlcp runs `vlcp.train.loop.train_task` with SeqF (its per-step schedule,
AdamW, clipping, logit-scale clamp, loss bookkeeping); open_clip runs
`open_clip_train.train.train_one_epoch` with `ClipLoss`, open_clip's AdamW parameter groups and
its cosine schedule. Each repeat times `--steps` steps after a warm-up; the two loops alternate
so drift hits both. A third loop, open_clip with the fused AdamW
vlcp uses, separates the optimiser's share of any gap from the rest of the loop: the like-for-like
comparison. Reports samples/s (median over repeats) and, per repeat, the paired ratio vlcp /
open_clip (the loops of one repeat run back to back, so the machine's drift between repeats
cancels): their geometric mean with a 95% t interval. Then the work itself, which no timing noise
touches: the ATen ops each loop runs (torch.profiler counts) per step and per call, from two
profiled calls of different lengths, and the ops vlcp's loop runs beyond the like-for-like one.
"""
from __future__ import annotations

import argparse
import collections
import logging
import math
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.config import TrainCfg  # noqa: E402
from vlcp.methods import get_method  # noqa: E402
from vlcp.methods.base import Batch, TaskContext  # noqa: E402
from vlcp.models.clip import create_clip  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)


def synthetic_batches(n: int, batch: int, image_size: int, ctx: int, vocab: int = 49408, seed: int = 0,
                      device: torch.device = torch.device("cpu")):
    """`n` (images, token ids) batches, made on `device` (on a GPU: no host-to-device copy in either loop)."""
    g = torch.Generator(device).manual_seed(seed)
    return [(torch.randn(batch, 3, image_size, image_size, generator=g, device=device),
             torch.randint(1, vocab, (batch, ctx), generator=g, device=device)) for _ in range(n)]


def time_vlcp(model, batches, cfg: TrainCfg, device) -> float:
    """Seconds for len(batches) steps of vlcp's loop (SeqF)."""
    from vlcp.train.loop import train_task

    it = iter(batches)

    def materialize(ids):
        x, t = next(it)
        return Batch(x.to(device), t.to(device), ids)
    gen = torch.Generator().manual_seed(0)
    pool = torch.arange(len(batches) * cfg.batch_size)
    ctx = TaskContext(task=0, num_tasks=1, train_set=None, task_ids=[pool], pool=pool,
                      materialize=materialize, generator=gen)
    method = get_method("seqf")()
    sync(device)
    t0 = time.perf_counter()
    train_task(model, method, ctx, len(batches), cfg, device, desc="vlcp")
    sync(device)
    return time.perf_counter() - t0


class _Loader(list):
    """What open_clip_train's loop reads from a dataloader: iteration, num_batches, num_samples."""

    def __init__(self, batches, batch_size):
        super().__init__(batches)
        self.num_batches, self.num_samples = len(batches), len(batches) * batch_size


def time_open_clip(model, batches, cfg: TrainCfg, device, fused: bool = False) -> float:
    """Seconds for len(batches) steps of open_clip_train.train.train_one_epoch (its AdamW is the
    default foreach implementation; `fused=True` swaps in the fused one vlcp uses)."""
    from open_clip import ClipLoss
    from open_clip_train.scheduler import cosine_lr
    from open_clip_train.train import train_one_epoch

    # open_clip_train.main's parameter groups: no decay on gains, biases, logit scale
    excl = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n  # noqa: E731
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW([
        {"params": [p for n, p in named if excl(n, p)], "weight_decay": 0.0},
        {"params": [p for n, p in named if not excl(n, p)], "weight_decay": cfg.weight_decay},
    ], lr=cfg.lr, betas=(0.9, cfg.beta2), eps=1e-6, fused=fused)
    steps = len(batches)
    # "amp_bf16": autocast, as vlcp's bf16 (open_clip_train's "bf16" is a bf16 model: pure bf16 weights)
    args = SimpleNamespace(device=str(device), precision="amp_bf16" if cfg.precision == "bf16" else "fp32",
                           distill=False, accum_freq=1, skip_scheduler=False, grad_clip_norm=cfg.grad_clip,
                           horovod=False, log_every_n_steps=10**9, batch_size=cfg.batch_size, world_size=1,
                           rank=0, local_rank=0, wandb=False, save_logs=False)
    # open_clip_train.data.DataInfo's interface (its module needs webdataset, which vlcp does not pin)
    data = {"train": SimpleNamespace(dataloader=_Loader(batches, cfg.batch_size), set_epoch=lambda epoch: None)}
    sched = cosine_lr(opt, cfg.lr, cfg.warmup_steps, steps)
    sync(device)
    t0 = time.perf_counter()
    train_one_epoch(model, data, ClipLoss(), 0, opt, None, sched, None, args)
    sync(device)
    return time.perf_counter() - t0


def aten_counts(fn, model, batches, cfg: TrainCfg, device) -> collections.Counter:
    """How many times each ATen op runs in one call of a loop (`fn`) over `batches`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(model, batches, cfg, device)
    return collections.Counter({e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")})


def op_work(loops: dict, batches, cfg: TrainCfg, device, short: int = 2, long: int = 6) -> dict:
    """Per step and per call (start and end of a task), the ATen ops each loop runs: counts from a
    `short`- and a `long`-step call, so per step = their difference ÷ (long − short). `loops`:
    name -> (fn, fresh model); the first is compared with each other one (its extra ops)."""
    per_step, per_call = {}, {}
    for name, (fn, model) in loops.items():
        a, b = aten_counts(fn, model, batches[:short], cfg, device), aten_counts(fn, model, batches[:long], cfg, device)
        step = {k: (b[k] - a[k]) / (long - short) for k in a | b}
        per_step[name] = {k: v for k, v in step.items() if v}
        per_call[name] = {k: c for k in a | b if (c := a[k] - short * step[k])}
    first, *others = loops
    diff = lambda d, o: {k: d[first].get(k, 0) - d[o].get(k, 0) for k in d[first].keys() | d[o].keys()  # noqa: E731
                         if d[first].get(k, 0) != d[o].get(k, 0)}
    return {"aten_ops_per_step": {n: sum(v.values()) for n, v in per_step.items()},
            "extra_per_step": {o: diff(per_step, o) for o in others},
            "extra_per_call": {o: diff(per_call, o) for o in others}}


def paired(a: list[float], b: list[float]) -> dict:
    """Per-repeat ratios a/b, their geometric mean and its 95% t interval (on the log ratios)."""
    from scipy import stats

    logs = [math.log(x / y) for x, y in zip(a, b)]
    m, n = statistics.fmean(logs), len(logs)
    half = stats.t.ppf(0.975, n - 1) * statistics.stdev(logs) / math.sqrt(n) if n > 1 else math.inf
    return {"ratios": [math.exp(v) for v in logs], "geometric_mean": math.exp(m),
            "ci95": [math.exp(m - half), math.exp(m + half)]}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="vlcp-tiny")
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "throughput.json"))
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfg = TrainCfg(batch_size=args.batch, lr=1e-3, warmup_steps=2, progress=False, device=args.device,
                   precision=args.precision)

    def fresh(output_dict: bool):
        torch.manual_seed(0)
        model, tok = create_clip(args.model, None, device)
        model.output_dict = output_dict
        return model, tok.context_length

    loops = (("vlcp", time_vlcp, False), ("open_clip", time_open_clip, True),
             ("open_clip_fused_adamw", partial(time_open_clip, fused=True), True))
    runs = {name: [] for name, _, _ in loops}
    for rep in range(args.repeats):
        for name, fn, od in loops[:: 1 if rep % 2 == 0 else -1]:
            model, ctx = fresh(od)
            batches = synthetic_batches(args.warmup + args.steps, args.batch, args.image_size, ctx, seed=rep,
                                        device=device)
            fn(model, batches[:args.warmup], cfg, device)                 # warm-up (allocator, kernels)
            seconds = fn(model, batches[args.warmup:], cfg, device)
            runs[name].append(args.steps * args.batch / seconds)
            print(f"repeat {rep + 1}/{args.repeats} {name:21s} {runs[name][-1]:8.1f} samples/s", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    model, ctx = fresh(False)
    batches = synthetic_batches(6, args.batch, args.image_size, ctx, seed=args.repeats, device=device)
    work = op_work({"vlcp": (time_vlcp, model),
                    "open_clip_fused_adamw": (partial(time_open_clip, fused=True), fresh(True)[0])}, batches, cfg, device)
    out = {
        "what": "training-step throughput, vlcp loop (SeqF) vs open_clip_train.train_one_epoch, same model/batch/data",
        "model": args.model, "image_size": args.image_size, "batch_size": args.batch, "steps": args.steps,
        "repeats": args.repeats, "threads": args.threads, "device": args.device, "precision": args.precision,
        "samples_per_second": med, "all_samples_per_second": runs,
        "ratio_vlcp_over_open_clip": med["vlcp"] / med["open_clip"], "target_ratio": 0.95,
        "ratio_vlcp_over_open_clip_fused_adamw": med["vlcp"] / med["open_clip_fused_adamw"],
        # like for like (the same fused AdamW on both sides), paired by repeat: the loop's target is >= 1.0x,
        # with the interval's lower end within the 0.95 margin
        "paired_over_open_clip": paired(runs["vlcp"], runs["open_clip"]),
        "paired_over_open_clip_fused_adamw": paired(runs["vlcp"], runs["open_clip_fused_adamw"]),
        "loop_target": 1.0, "loop_margin": 0.95,
        "ops": work,
        **provenance(), "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
    write_json(args.out, out)
    like = out["paired_over_open_clip_fused_adamw"]
    print(f"vlcp {med['vlcp']:.1f} / open_clip {med['open_clip']:.1f} samples/s = "
          f"{out['ratio_vlcp_over_open_clip']:.3f}x; like for like (fused AdamW), paired: {like['geometric_mean']:.3f}x "
          f"[{like['ci95'][0]:.3f}, {like['ci95'][1]:.3f}] -> {args.out}")
    print(f"ATen ops per step: {work['aten_ops_per_step']}; vlcp's extra per step: "
          f"{work['extra_per_step']['open_clip_fused_adamw']}")


if __name__ == "__main__":
    main()
