"""Provenance every benchmark JSON carries: where, when and on which commit it was measured."""
from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit(root: Path = ROOT) -> str:
    """Short HEAD of `root`, with "-dirty" when tracked files other than the benchmarks' own
    outputs differ from it ("" outside git)."""
    def git(*a):
        return subprocess.run(["git", *a], cwd=root, text=True, capture_output=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":!benchmarks/results", ":!benchmarks/dvc.lock")
    return head + ("-dirty" if head and dirty else "")


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; platform.processor() is empty there)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


def provenance() -> dict:
    import torch

    return {"machine": platform.machine(), "processor": cpu_model(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"), "commit": git_commit()}


def paired_cost_args(doc: str, reference: str, experiments: list[str], out: str, **extra_args):
    """The command line both paired-cost benchmarks share: --experiments (the first must be
    `reference`), --repeats, --seed, --params, --work, --out, plus `extra_args` as
    {name: add_argument kwargs}. Returns (parsed args, the params, the work directory)."""
    import argparse
    import tempfile

    from vlcp.config import load_params

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--experiments", nargs="+", default=experiments)
    ap.add_argument("--repeats", type=int, default=5)
    for name, kwargs in extra_args.items():
        ap.add_argument(f"--{name}", **kwargs)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--work", default=None, help="runs and checkpoints go here (default: a temp dir)")
    ap.add_argument("--out", default=str(ROOT / out))
    args = ap.parse_args()
    if args.experiments[0] != reference:
        ap.error(f"--experiments: the first must be the reference {reference}")
    work = Path(args.work or tempfile.mkdtemp(prefix=f"vlcp-{Path(out).stem}-"))
    return args, load_params(args.params), work


def interleaved(names: list[str], rep: int) -> list[str]:
    """The run order of repeat `rep`: as given, reversed every other repeat (ABBA: none always runs first)."""
    return list(names) if rep % 2 == 0 else list(names)[::-1]


def paired(values: dict[str, list[float]], reference: str) -> tuple[dict, dict, dict]:
    """Each repeat's value over the same repeat's `reference` value (paired, so slow drift
    cancels): (the paired ratios, their medians, their [min, max]) per name."""
    import statistics

    ratios = {n: [a / b for a, b in zip(v, values[reference])] for n, v in values.items()}
    return (ratios, {n: statistics.median(v) for n, v in ratios.items()},
            {n: [min(v), max(v)] for n, v in ratios.items()})


def paired_step_times(params: dict, experiments: list[str], repeats: int, seed: int, work: Path,
                      step_time, extra=None, overrides: list[str] = (), warmup: bool = False) -> dict:
    """Run `experiments` interleaved, `repeats` times each in this process (so a shared VM's slow
    drift hits every one alike; the order flips every repeat, so none always runs first), and time them with `step_time(results) -> seconds per step`.
    The first experiment is the reference: each run's ratio is paired with the same repeat's
    reference run. `extra(results) -> dict` records what else a run measured (e.g. its accuracy).
    `overrides`: `--set`-style config overrides for every run (e.g. a longer run). `warmup`: run
    the reference once, untimed, first: what a process memoises for its runs (the language
    stream's inputs, vocabs and token ids) is then made before the first timed run, not inside it.
    Returns the JSON-ready summary: per-run seconds, medians, paired ratios, their median and range."""
    import statistics

    from vlcp.config import resolve_experiment
    from vlcp.run import run_experiment

    reference = experiments[0]
    step = {e: [] for e in experiments}
    extras = {e: [] for e in experiments}
    if warmup:
        cfg = resolve_experiment(params, reference, seed, ["train.progress=false", *overrides])
        run_experiment(cfg, work / "warmup" / "run", work / "warmup" / "ckpt", resume=False)
    for rep in range(repeats):
        for exp in interleaved(experiments, rep):
            cfg = resolve_experiment(params, exp, seed, ["train.progress=false", *overrides])
            where = work / f"rep{rep}" / exp
            r = run_experiment(cfg, where / "run", where / "ckpt", resume=False)
            step[exp].append(step_time(r))
            if extra is not None:
                extras[exp].append(extra(r))
            print(f"repeat {rep + 1}/{repeats} {exp}: {1000 * step[exp][-1]:.1f} ms/step", flush=True)
    ratios, medians, ranges = paired(step, reference)
    out = {"reference": reference, "seed": seed, "repeats": repeats, "overrides": list(overrides),
           "seconds_per_step": step, "median_seconds_per_step": {e: statistics.median(v) for e, v in step.items()},
           "paired_ratios": ratios, "ratio_to_reference": medians, "ratio_range": ranges}
    if extra is not None:
        out["extra"] = extras
    for e in experiments:
        lo, hi = out["ratio_range"][e]
        print(f"{e}: {1000 * out['median_seconds_per_step'][e]:.1f} ms/step, {out['ratio_to_reference'][e]:.3f} × "
              f"{reference} (paired, {lo:.3f}–{hi:.3f})")
    return out


def flop_paired_cost(doc: str, reference: str, experiments: list[str], out: str, steps: int, steps_help: str,
                     what: str, skip_first: bool = True) -> None:
    """A paired-cost benchmark's whole command: `experiments` (the first the reference) at
    `--steps` (default `steps`), interleaved repeats timed by `step_time` (over the tasks after the
    first when `skip_first`), beside each one's FLOP ratio; the JSON (with `what`) goes to `--out`."""
    from vlcp.report.results import flops_per_step, step_time
    from vlcp.utils import write_json

    args, params, work = paired_cost_args(doc, reference, experiments, out,
                                          steps={"type": int, "default": steps, "help": steps_help})
    res = paired_step_times(params, args.experiments, args.repeats, args.seed, work,
                            lambda r: step_time(r, skip_first), lambda r: {"flops_per_step": flops_per_step(r)},
                            [f"train.steps={args.steps}"])
    write_json(args.out, {"what": what, **with_flop_ratio(res)} | provenance())


def with_flop_ratio(out: dict) -> dict:
    """`paired_step_times`' summary of runs measured with `extra=lambda r: {"flops_per_step": ...}`,
    its "extra" replaced by each experiment's median FLOPs per step and its ratio to the reference."""
    import statistics

    flops = {e: statistics.median(x["flops_per_step"] for x in v) for e, v in out.pop("extra").items()}
    flop_ratio = {e: f / flops[out["reference"]] for e, f in flops.items()}
    for e, f in flop_ratio.items():
        print(f"{e}: time {out['ratio_to_reference'][e]:.3f} x, FLOPs {f:.3f} x (x 1.1 = {1.1 * f:.3f})")
    return {**out, "flops_per_step": flops, "flop_ratio": flop_ratio}
