"""2-process DDP on CPU against one process, at the same per-rank batch (the scale-path issue's target: ≥ 1.6×).

    .venv/bin/python benchmarks/ddp_scaling.py [--repeats 5] [--steps 480] [--batch 128] [--work DIR]
    .venv/bin/python benchmarks/ddp_scaling.py --sweep-only [--sweep 64 128 256] [--sweep-repeats 3]

Runs the spine's SeqF (`vlcp run seqf`, the default tiny CLIP on the emoji benchmark) as
- `1 process`: batch `--batch`, 1 thread;
- `2 processes`: `torchrun --standalone --nproc_per_node=2`, global batch 2 × `--batch` (each rank
  keeps its slice of the same global batch: `vlcp.train.distributed`), 1 thread per rank;
- `1 process, 2 threads`: batch `--batch`, 2 threads (the other way to spend the second core);
- `2 independent processes`: two 1-thread `1 process` runs at the same time, their samples/s
  summed: what two workers reach on this machine with no communication at all (the ceiling DDP
  is measured against: on a VM, cores share caches and memory bandwidth),
interleaved (the order flips every repeat), each a fresh `vlcp run --no-resume` in its own
processes. Then the gradient average of one embedding table between 2 gloo processes, all rows
(what DDP and a flat all-reduce send) against the rows some rank's batch used
(`vlcp.train.distributed.average_table_gradients`), at the tiny CLIP's 49,408 × 64 and at the
size CLL-CLIP's expandable embedding reaches at paper scale (`--table-rows` × 512: CLIP's
49,408 tokens + new tokens of 35 languages), a batch of 128 captions of ~20 tokens.
Samples/s = global batch × steps / training seconds (the runs' `train[*].seconds`: training and
after-task passes, not evaluation). The ratio of each repeat's `2 processes` to the
same repeat's `1 process` is paired (slow drift cancels); the median and range are reported.
Then the ratio by per-rank batch (`--sweep`): `1 process` against `2 processes` only, each run
the same samples (`--sweep-steps` × 128 / batch steps), paired per repeat: a step's communication
(the gradients of every parameter outside the tables, the tables' used rows, the feature gather)
grows slower than its compute with the batch. `--sweep-only` measures just that and keeps the
rest of the results file (each part carries its own provenance).
Needs the prepared benchmark (`dvc repro prepare`). About 20 minutes on 2 cores at the defaults (5
repeats: on a shared 2-core VM one repeat's ratio can swing by ±0.2), the sweep another 10.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.utils import write_json  # noqa: E402

from common import interleaved, paired, provenance  # noqa: E402  (benchmarks/common.py)

TARGET = 1.6
TABLE_BATCH_TOKENS = 128 * 20   # a batch of 128 captions of ~20 tokens: the rows a step's gradient touches (at most)


def configs(batch: int) -> dict[str, tuple[list[str], int, int, int]]:
    """name -> (launcher, global batch, threads per process, independent copies at once)."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    return {"1 process": ([sys.executable], batch, 1, 1),
            "2 processes": (torchrun, 2 * batch, 1, 1),
            "1 process, 2 threads": ([sys.executable], batch, 2, 1),
            "2 independent processes": ([sys.executable], batch, 1, 2)}


def run(launcher: list[str], batch: int, threads: int, copies: int, steps: int, params: str, where: Path
        ) -> tuple[float, dict[str, float]]:
    """Samples per second of `copies` simultaneous `vlcp run seqf` (training seconds only), summed,
    and the first copy's milliseconds per step by loop phase (its `phase_seconds`)."""
    procs = []
    for c in range(copies):
        cmd = [*launcher, "-m", "vlcp", "run", "seqf", "--seed", "0", "--params", params, "--no-resume",
               "--out", str(where / f"runs{c}"), "--checkpoints", str(where / f"ckpt{c}"),
               *(a for kv in (f"train.batch_size={batch}", f"train.num_threads={threads}", f"train.steps={steps}",
                              "train.progress=false") for a in ("--set", kv))]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL))
    if any(p.wait() for p in procs):
        raise SystemExit(f"{where}: a vlcp run failed")
    rate, phases = 0.0, {}
    for c in range(copies):
        r = json.loads((where / f"runs{c}" / "seqf" / "seed0" / "results.json").read_text())
        steps = sum(t["steps"] for t in r["train"])
        rate += steps * batch / sum(t["seconds"] for t in r["train"])
        if c == 0:
            for t in r["train"]:
                for k, v in t["phase_seconds"].items():
                    phases[k] = phases.get(k, 0.0) + 1000 * v / steps
    return rate, phases


def _table_worker(rank: int, world: int, rows: int, width: int, repeats: int, init: str, out: str) -> None:
    import time

    import torch
    import torch.distributed as dist

    from vlcp.train.distributed import average_table_gradients

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    gen = torch.Generator().manual_seed(rank)
    table = torch.nn.Parameter(torch.zeros(rows, width))
    ids = torch.randint(0, min(rows, 60000), (TABLE_BATCH_TOKENS,), generator=gen)   # a batch's tokens
    ms = {"all rows": [], "used rows": []}
    used = 0
    for r in range(repeats + 1):   # the first of each is a warm-up
        for name in ("all rows", "used rows"):
            table.grad = torch.zeros(rows, width).index_add_(0, ids, torch.ones(len(ids), width))
            dist.barrier()
            t0 = time.perf_counter()
            if name == "all rows":
                dist.all_reduce(table.grad)
                table.grad /= world
            else:
                average_table_gradients([table])
            if r:
                ms[name].append(1000 * (time.perf_counter() - t0))
        used = int(table.grad.abs().amax(1).ne(0).sum())
    if rank == 0:
        Path(out).write_text(json.dumps({"rows": rows, "width": width, "rows_used": used, "ms": ms}))
    dist.destroy_process_group()


def table_average(rows: int, width: int, repeats: int, work: Path) -> dict:
    """Median ms of one embedding table's gradient average over 2 gloo processes: all rows vs the used ones."""
    import torch.multiprocessing as mp

    work.mkdir(parents=True, exist_ok=True)
    out, init = work / f"table_{rows}x{width}.json", work / f"init_{rows}x{width}"
    init.unlink(missing_ok=True)   # a file rendezvous left by an earlier run would hang this one
    mp.spawn(_table_worker, args=(2, rows, width, repeats, str(init), str(out)), nprocs=2, join=True)
    r = json.loads(out.read_text())
    med = {k: round(statistics.median(v), 2) for k, v in r.pop("ms").items()}
    return r | {"median_ms": med, "speedup": round(med["all rows"] / med["used rows"], 1)}


def sweep(batches: list[int], repeats: int, steps: int, params: str, work: Path) -> dict:
    """{per-rank batch: its paired ratio of `2 processes` to `1 process`}, each run the same samples."""
    out = {}
    for b in batches:
        cfgs = {n: c for n, c in configs(b).items() if n in ("1 process", "2 processes")}
        n_steps = max(1, steps * 128 // b)
        rate = {name: [] for name in cfgs}
        for rep in range(repeats):
            for name in interleaved(list(cfgs), rep):
                launcher, batch, threads, copies = cfgs[name]
                r, _ = run(launcher, batch, threads, copies, n_steps, params,
                           work / f"sweep{b}" / f"rep{rep}" / name.replace(" ", "_"))
                rate[name].append(r)
                print(f"batch {b} repeat {rep + 1}/{repeats} {name}: {r:.0f} samples/s", flush=True)
        ratios, medians, ranges = paired(rate, "1 process")
        out[str(b)] = {"steps": n_steps, "samples_per_second": rate, "paired_ratio": ratios["2 processes"],
                       "ratio": medians["2 processes"], "ratio_range": ranges["2 processes"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=480, help="train.steps of each run (the study's 240)")
    ap.add_argument("--batch", type=int, default=128, help="per-rank batch (the study's 128)")
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--table-rows", type=int, default=400_000,
                    help="rows of the paper-scale table (CLIP's 49,408 + up to 10K new tokens for each of 35 languages)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/ddp_scaling.json"))
    ap.add_argument("--sweep", type=int, nargs="*", default=[64, 128, 256], help="per-rank batches of the sweep")
    ap.add_argument("--sweep-repeats", type=int, default=3)
    ap.add_argument("--sweep-steps", type=int, default=240, help="steps at batch 128 (the same samples at every batch)")
    ap.add_argument("--sweep-only", action="store_true", help="measure the sweep only; keep the file's other results")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="vlcp-ddp-"))
    by_batch = {"by_batch": sweep(args.sweep, args.sweep_repeats, args.sweep_steps, args.params, work),
                "sweep_repeats": args.sweep_repeats, "sweep_provenance": provenance()} if args.sweep else {}
    for b, r in by_batch.get("by_batch", {}).items():
        lo, hi = r["ratio_range"]
        print(f"per-rank batch {b}: 2 processes {r['ratio']:.2f} x 1 process (paired {lo:.2f}-{hi:.2f})")
    if args.sweep_only:
        write_json(args.out, json.loads(Path(args.out).read_text()) | by_batch)
        return
    cfgs = configs(args.batch)
    rate = {name: [] for name in cfgs}
    phase_ms = {name: [] for name in cfgs}
    for rep in range(args.repeats):
        for name in interleaved(list(cfgs), rep):
            launcher, batch, threads, copies = cfgs[name]
            r, ph = run(launcher, batch, threads, copies, args.steps, args.params,
                        work / f"rep{rep}" / name.replace(" ", "_").replace(",", ""))
            rate[name].append(r)
            phase_ms[name].append(ph)
            print(f"repeat {rep + 1}/{args.repeats} {name}: {rate[name][-1]:.0f} samples/s", flush=True)
    ratios, medians, ranges = paired(rate, "1 process")
    out = {"what": "SeqF samples/s: 2 DDP processes (gloo, 1 thread each) vs 1 process at the same per-rank batch",
           "experiment": "seqf", "per_rank_batch": args.batch, "steps": args.steps, "repeats": args.repeats,
           "samples_per_second": rate, "median_samples_per_second": {n: statistics.median(v) for n, v in rate.items()},
           "paired_ratio_to_one_process": ratios, "ratio_to_one_process": medians, "ratio_range": ranges,
           "target_ratio": TARGET,
           # where each configuration's step time goes (median over repeats, ms per step of one process / rank 0)
           "phase_ms_per_step": {n: {k: round(statistics.median(p[k] for p in v), 2) for k in v[0]}
                                 for n, v in phase_ms.items()},
           # DDP's share of what two workers reach here without communicating (paired per repeat)
           "ddp_over_independent": paired(rate, "2 independent processes")[1]["2 processes"]}
    out["table_average"] = [table_average(49408, 64, 5, work / "tables"),
                            table_average(args.table_rows, 512, 3, work / "tables")]
    for t in out["table_average"]:
        print(f"table {t['rows']} x {t['width']} ({t['rows_used']} rows used): all rows {t['median_ms']['all rows']} ms, "
              f"used rows {t['median_ms']['used rows']} ms ({t['speedup']} x)")
    for n in cfgs:
        lo, hi = out["ratio_range"][n]
        print(f"{n}: {out['median_samples_per_second'][n]:.0f} samples/s, {out['ratio_to_one_process'][n]:.2f} x "
              f"1 process (paired {lo:.2f}-{hi:.2f})")
    print(f"2 processes / 2 independent processes: {out['ddp_over_independent']:.2f}")
    write_json(args.out, out | provenance() | by_batch)


if __name__ == "__main__":
    main()
