"""What the step's GPU options cost on this machine's CPU: seconds per training step of vlcp-tiny (SeqF, random
batches) with the plain step, `train.compile` (inductor, default mode), `train.accum_freq` and
`train.grad_checkpointing`, each from the same weights.

    .venv/bin/python benchmarks/step_paths.py [--batch-size 32] [--steps 6] [--threads 2]

Each path runs one task of `--steps` steps twice on the same model: the first (compile time, warm-up)
and the second, timed. Writes benchmarks/results/step_paths.json, which docs/performance.md quotes. The
options serve a GPU (host overhead, memory); on a CPU they show their cost, not their gain.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.utils import write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)

PATHS = {"plain": {}, "compile=default": {"compile": "default"}, "accum_freq=2": {"accum_freq": 2},
         "grad_checkpointing": {"grad_checkpointing": True}}


def run_path(weights: dict, batches: list, options: dict, batch_size: int) -> dict:
    """One path's first and second task on a fresh copy of the weights: seconds per step and the mean loss."""
    import torch

    from vlcp.config import TrainCfg
    from vlcp.methods import get_method
    from vlcp.methods.base import Batch, TaskContext
    from vlcp.models.clip import create_clip
    from vlcp.train.loop import train_task

    model, _ = create_clip("vlcp-tiny")
    model.load_state_dict(weights)
    cfg = TrainCfg(batch_size=batch_size, warmup_steps=0, progress=False, **options)
    out = {}
    for run in ("first", "second"):
        it = iter(batches)
        pool = torch.arange(len(batches) * batch_size)
        ctx = TaskContext(task=0, num_tasks=1, train_set=None, task_ids=[pool], pool=pool,
                          generator=torch.Generator().manual_seed(0), materialize=lambda ids: Batch(*next(it), ids))
        t0 = time.perf_counter()
        stats = train_task(model, get_method("seqf")(), ctx, len(batches), cfg, torch.device("cpu"))
        out[f"{run}_s_per_step"] = round((time.perf_counter() - t0) / len(batches), 4)
        out[f"{run}_loss"] = round(stats["loss"], 6)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch

    from vlcp.models.clip import create_clip

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tok = create_clip("vlcp-tiny")
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(args.batch_size, 3, 32, 32, generator=g),
                torch.randint(1, 49408, (args.batch_size, tok.context_length), generator=g)) for _ in range(args.steps)]
    rows = {}
    for name, options in PATHS.items():
        rows[name] = run_path(weights, batches, options, args.batch_size)
        print(name, rows[name], flush=True)
    write_json(ROOT / "benchmarks" / "results" / "step_paths.json",
               {"model": "vlcp-tiny", "batch_size": args.batch_size, "steps": args.steps, "threads": args.threads,
                "paths": rows, **provenance()})


if __name__ == "__main__":
    main()
