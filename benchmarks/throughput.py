"""vlcp's training step vs open_clip_train's, on the same model, batch and synthetic data.

    .venv/bin/python benchmarks/throughput.py [--model vlcp-tiny] [--batch 128] [--steps 30]
        [--repeats 20] [--turn 1] [--threads 2] [--device cpu] [--precision fp32]
        [--out benchmarks/results/throughput.json]

Both loops get the same pre-made batches (normalised images, token ids), so the data path is
out of the comparison: vlcp runs `vlcp.train.loop.train_task` with SeqF (its per-step schedule,
AdamW, clipping, logit-scale clamp, loss bookkeeping); open_clip runs
`open_clip_train.train.train_one_epoch` with `ClipLoss`, open_clip's AdamW parameter groups and
its cosine schedule. Three pairs of loops per repeat: vlcp against open_clip as it ships (its
default foreach AdamW); vlcp against open_clip with the fused AdamW vlcp uses (the like-for-like
comparison, the loops alone); and that open_clip loop against a second copy of itself (the A/A
control: what the protocol reads for two identical loops, its bias and resolution).

The two loops of a pair take turns (`Turns`): each runs in its own thread and hands over to the
other every `--turn` steps (at the batch it draws), so a loop's time is the sum of its turns and
the machine's drift, seconds long on a shared VM, falls alike on both; alternate repeats start
with the other loop. Each loop first warms up alone on a fresh model (allocator, kernels).
Reports samples/s (median over repeats) and, per repeat, the paired ratio (e.g. vlcp / open_clip):
their geometric mean with a 95% t interval. Then the work itself, which no timing noise touches:
the ATen ops each loop runs (torch.profiler counts) per step and per call, from two profiled calls
of different lengths, and the ops vlcp's loop runs beyond the like-for-like one.
"""
from __future__ import annotations

import argparse
import collections
import logging
import math
import statistics
import sys
import threading
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


# the pairs of loops timed against each other: as shipped, like for like (the same fused AdamW), and the
# A/A control (one loop against a copy of itself: the protocol's bias and resolution)
PAIRS = {"shipped": ("vlcp", "open_clip"), "like_for_like": ("vlcp", "open_clip_fused_adamw"),
         "a_a": ("open_clip_fused_adamw", "open_clip_fused_adamw_again")}


def synthetic_batches(n: int, batch: int, image_size: int, ctx: int, vocab: int = 49408, seed: int = 0,
                      device: torch.device = torch.device("cpu")):
    """`n` (images, token ids) batches, made on `device` (on a GPU: no host-to-device copy in either loop)."""
    g = torch.Generator(device).manual_seed(seed)
    return [(torch.randn(batch, 3, image_size, image_size, generator=g, device=device),
             torch.randint(1, vocab, (batch, ctx), generator=g, device=device)) for _ in range(n)]


def time_vlcp(model, batches, cfg: TrainCfg, device, turn=None) -> float:
    """Seconds for len(batches) steps of vlcp's loop (SeqF); `turn()` is called at each batch drawn."""
    from vlcp.train.loop import train_task

    it = iter(batches)

    def materialize(ids):
        x, t = next(it)
        if turn is not None:
            turn()
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
    """What open_clip_train's loop reads from a dataloader: iteration, num_batches, num_samples;
    `turn()` is called at each batch drawn."""

    def __init__(self, batches, batch_size, turn=None):
        super().__init__(batches)
        self.num_batches, self.num_samples, self.turn = len(batches), len(batches) * batch_size, turn

    def __iter__(self):
        for b in super().__iter__():
            if self.turn is not None:
                self.turn()
            yield b


def time_open_clip(model, batches, cfg: TrainCfg, device, fused: bool = False, turn=None) -> float:
    """Seconds for len(batches) steps of open_clip_train.train.train_one_epoch (its AdamW is the
    default foreach implementation; `fused=True` swaps in the fused one vlcp uses); `turn()` is
    called at each batch drawn."""
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
    data = {"train": SimpleNamespace(dataloader=_Loader(batches, cfg.batch_size, turn), set_epoch=lambda epoch: None)}
    sched = cosine_lr(opt, cfg.lr, cfg.warmup_steps, steps)
    sync(device)
    t0 = time.perf_counter()
    train_one_epoch(model, data, ClipLoss(), 0, opt, None, sched, None, args)
    sync(device)
    return time.perf_counter() - t0


class Turns:
    """Runs loops in turns: each loop (a function of its `turn` callback) in its own thread, one at a
    time, handing over to the next every `every` calls of `turn` (one call per batch drawn). A loop's
    seconds are the sum of its turns (on CUDA each turn ends with a synchronize), so the machine's
    drift between turns falls alike on every loop. The first loop named starts."""

    def __init__(self, every: int, device: torch.device):
        self.every, self.device = every, device

    def run(self, loops: dict) -> dict[str, float]:
        names = list(loops)
        go = {n: threading.Semaphore(0) for n in names}
        seconds, calls, started = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0), {}
        done, errors = set(), []

        def hand_over(name):
            sync(self.device)
            seconds[name] += time.perf_counter() - started[name]
            i = names.index(name)
            nxt = next((n for n in names[i + 1:] + names[:i + 1] if n not in done), None)
            if nxt is not None:
                go[nxt].release()

        def wait(name):
            go[name].acquire()
            started[name] = time.perf_counter()

        def turn(name):
            calls[name] += 1
            if calls[name] % self.every == 0:
                hand_over(name)
                wait(name)

        def body(name):
            wait(name)
            try:
                loops[name](partial(turn, name))
            except BaseException as e:   # re-raised below, after every loop has stopped
                errors.append(e)
            finally:
                done.add(name)
                hand_over(name)

        threads = [threading.Thread(target=body, args=(n,), name=n) for n in names]
        for t in threads:
            t.start()
        go[names[0]].release()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return seconds


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
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--turn", type=int, default=1, help="steps per turn of a pair of loops")
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

    loops = {"vlcp": (time_vlcp, False), "open_clip": (time_open_clip, True),
             "open_clip_fused_adamw": (partial(time_open_clip, fused=True), True),
             "open_clip_fused_adamw_again": (partial(time_open_clip, fused=True), True)}
    runs = {pair: {name: [] for name in names} for pair, names in PAIRS.items()}
    turns = Turns(args.turn, device)
    for rep in range(args.repeats):
        for pair, names in PAIRS.items():
            timed = {}
            for name in names[:: 1 if rep % 2 == 0 else -1]:   # alternate repeats: the other loop starts
                fn, od = loops[name]
                model, ctx = fresh(od)
                batches = synthetic_batches(args.warmup + args.steps, args.batch, args.image_size, ctx, seed=rep,
                                            device=device)
                fn(model, batches[:args.warmup], cfg, device)                 # warm-up alone (allocator, kernels)
                timed[name] = partial(fn, model, batches[args.warmup:], cfg, device)
            seconds = turns.run({name: (lambda turn, f=f: f(turn=turn)) for name, f in timed.items()})
            for name in names:
                runs[pair][name].append(args.steps * args.batch / seconds[name])
            print(f"repeat {rep + 1}/{args.repeats} {pair:13s} " + "  ".join(
                f"{name} {runs[pair][name][-1]:.1f}" for name in names) + " samples/s", flush=True)
    med = {pair: {name: statistics.median(v) for name, v in r.items()} for pair, r in runs.items()}
    pairs = {pair: {"loops": list(names), "samples_per_second": med[pair], "all_samples_per_second": runs[pair],
                    "paired": paired(runs[pair][names[0]], runs[pair][names[1]])} for pair, names in PAIRS.items()}
    model, ctx = fresh(False)
    batches = synthetic_batches(6, args.batch, args.image_size, ctx, seed=args.repeats, device=device)
    work = op_work({"vlcp": (time_vlcp, model),
                    "open_clip_fused_adamw": (partial(time_open_clip, fused=True), fresh(True)[0])}, batches, cfg, device)
    shipped, like = med["shipped"], med["like_for_like"]
    out = {
        "what": "training-step throughput, vlcp loop (SeqF) vs open_clip_train.train_one_epoch, same model/batch/data",
        "model": args.model, "image_size": args.image_size, "batch_size": args.batch, "steps": args.steps,
        "repeats": args.repeats, "threads": args.threads, "device": args.device, "precision": args.precision,
        "protocol": f"pairs of loops taking turns of {args.turn} step{'s' if args.turn > 1 else ''} (Turns), "
                    "each loop warmed up alone first; alternate repeats start with the other loop",
        "turn_steps": args.turn, "pairs": pairs,
        "samples_per_second": {"vlcp": like["vlcp"], "open_clip": shipped["open_clip"],
                               "open_clip_fused_adamw": like["open_clip_fused_adamw"]},
        "ratio_vlcp_over_open_clip": shipped["vlcp"] / shipped["open_clip"], "target_ratio": 0.95,
        "ratio_vlcp_over_open_clip_fused_adamw": like["vlcp"] / like["open_clip_fused_adamw"],
        # like for like (the same fused AdamW on both sides), paired by repeat: the loop's target is >= 1.0x,
        # with the interval's lower end within the 0.95 margin; the A/A control is the protocol's own reading
        "paired_over_open_clip": pairs["shipped"]["paired"],
        "paired_over_open_clip_fused_adamw": pairs["like_for_like"]["paired"],
        "paired_a_a": pairs["a_a"]["paired"],
        "loop_target": 1.0, "loop_margin": 0.95,
        "ops": work,
        **provenance(), "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
    write_json(args.out, out)
    for pair in PAIRS:
        p = pairs[pair]["paired"]
        print(f"{pair}: {' / '.join(PAIRS[pair])}, paired {p['geometric_mean']:.3f}x [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}]")
    print(f"-> {args.out}")
    print(f"ATen ops per step: {work['aten_ops_per_step']}; vlcp's extra per step: "
          f"{work['extra_per_step']['open_clip_fused_adamw']}")


if __name__ == "__main__":
    main()
