"""What the step's options cost over a short run's training on the tiny models, and whether they keep the numbers.

    .venv/bin/python benchmarks/step_options.py [--experiments seqf fomo-ft] [--variants ...] [--repeats 3]
        [--set train.steps=45 ...]

A variant (`VARIANTS`) is torch.compile with inductor, a thread setting, AdamW's foreach or
single-tensor path beside the default fused one, or torch's own attention beside
`vlcp.models.attention.PackedSelfAttention`. Each run trains every task of the experiment's short
run (`SHORT`, or `--set`) as `vlcp run` does, with no evaluation between tasks. It records the
training seconds of its first task and of the later ones, the process's CPU seconds over its
training (every thread's: a steadier measure than the wall clock on a shared machine, for variants
with the same threads), and a digest of its losses and final
weights. The in-process variants share one process per experiment: the stream is built once, and
every run starts from the same weights and random state. `FRESH` variants get a new process for
every run, the reference too: compile time counts in full, with an empty inductor cache, and
interop threads are set before any work. Runs alternate and the order flips every repeat. Per
variant the JSON keeps every run, the minimum over repeats, its ratio to the reference's, and
whether its numbers are the reference's bit for bit. Writes benchmarks/results/step_options.json,
one key per experiment and variant, so that several calls fill one file.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import interleaved, provenance  # noqa: E402  (benchmarks/common.py)

# a variant: train-config fields (`train`), intra-op threads (`threads`), AdamW's implementation flags
# (`adamw`), interop threads (`interop`, fresh process), torch's own attention (`torch_attention`)
VARIANTS = {
    "default": {},
    "torch-attention": {"torch_attention": True},
    "adamw-foreach": {"adamw": {"fused": False, "foreach": True}},
    "adamw-single-tensor": {"adamw": {"fused": False, "foreach": False}},
    "threads=1": {"threads": 1},
    "compile": {"train": {"compile": "default"}},
    "interop=1": {"interop": 1},
}
FRESH = ("compile", "interop=1")   # a new process for every run (and for the reference's runs beside them)
SHORT = {"seqf": ["train.steps=45"], "fomo-ft": ["fomo.num_tasks=5"]}   # the default short runs


def digest(losses: list[float], model) -> str:
    """What a run computed: its per-task losses and the bytes of its final weights."""
    import torch

    h = hashlib.sha256(json.dumps(losses).encode())
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def build(spec: dict):
    """The experiment's stream, method, step budget and plan, as `vlcp.run.loop.run_stream` builds them."""
    import torch

    from vlcp.config import load_params, resolve_experiment
    from vlcp.methods import get_method
    from vlcp.registry import load_stream
    from vlcp.run.state import cuda_math, pick_device
    from vlcp.train.schedules import plan_for
    from vlcp.utils import derive_seed, seed_everything

    cfg = resolve_experiment(load_params(spec["params"]), spec["experiment"], spec["seed"],
                             ["train.progress=false", *spec["overrides"]])
    device = pick_device(cfg.train.device)
    cuda_math(device, cfg.train.precision)
    torch.set_num_threads(cfg.train.num_threads)
    seed_everything(derive_seed(cfg.seed, "init"))
    method_cls = get_method(cfg.method.name)
    method = method_cls(method_cls.Config(**cfg.method.args), seed=derive_seed(cfg.seed, "method"))
    stream = load_stream(cfg.data.stream)(cfg, device)
    stream.build(method)
    stream.reference_cost()
    method.prepare_model(stream.model)
    steps = stream.budget(method)
    prior = stream.prior_steps()
    stream.ready()
    return cfg, device, stream, method, steps, prior, plan_for(cfg.train, prior + steps)


@contextlib.contextmanager
def applied(variant: dict, model):
    """The in-process parts of `variant` in force: threads, AdamW's flags, torch's attention."""
    import torch
    from torch import nn

    from vlcp.models.attention import PackedSelfAttention

    threads, adamw = torch.get_num_threads(), torch.optim.AdamW
    switched = [m for m in model.modules() if type(m) is PackedSelfAttention] if variant.get("torch_attention") else []
    if variant.get("threads"):
        torch.set_num_threads(variant["threads"])
    if variant.get("adamw"):
        flags = variant["adamw"]

        class AdamW(adamw):
            def __init__(self, params, *args, **kwargs):
                super().__init__(params, *args, **{**kwargs, **flags})

        torch.optim.AdamW = AdamW   # the loop's make_optimizer reads it at every task
    for m in switched:
        m.__class__ = nn.MultiheadAttention
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.optim.AdamW = adamw
        for m in switched:
            m.__class__ = PackedSelfAttention


def train_run(built, variant: dict) -> dict:
    """Every task's training of the built run under `variant` (no evaluation): seconds and digest."""
    from vlcp.train.distributed import seed_rank
    from vlcp.train.loop import train_task
    from vlcp.train.schedules import lr_fn

    cfg, device, stream, method, steps, prior, plan = built
    train_cfg = dataclasses.replace(cfg.train, **variant.get("train", {}))
    seconds, losses, cpu = [], [], time.process_time()
    with applied(variant, stream.model):
        for t in range(stream.num_tasks):
            ctx = stream.context(t)
            ctx.steps = steps[t]
            if t == 0:
                stream.before_training(stream.model, method, ctx, sum(steps))
            seed_rank(cfg.seed, t)
            t0 = time.perf_counter()
            stats = train_task(stream.model, method, ctx, steps[t], train_cfg, device,
                               lr_at=lr_fn(cfg.train.schedule, plan, len(prior) + t))
            method.after_task(stream.model, ctx)
            seconds.append(time.perf_counter() - t0)
            losses.append(stats["loss"])
    first, later, cpu = seconds[0], sum(seconds[1:]), time.process_time() - cpu
    return {"train_s": round(sum(seconds), 3), "train_cpu_s": round(cpu, 3), "first_task_s": round(first, 3), "later_tasks_s": round(later, 3),
            "first_task_steps": steps[0], "later_steps": sum(steps[1:]), "numbers": digest(losses, stream.model)}


def child(spec: dict) -> dict:
    """In this process: build the run once, then each of `spec["runs"]` (variant names, in order)
    from the same weights and random state. Returns {"setup_s", "runs": [...]}."""
    t0 = time.perf_counter()
    import torch

    interop = {VARIANTS[v].get("interop") for v in spec["runs"]} - {None}
    if interop:
        torch.set_num_interop_threads(interop.pop())
    built = build(spec)
    model = built[2].model
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    setup = time.perf_counter() - t0
    runs = []
    for v in spec["runs"]:
        model.load_state_dict(weights)
        torch.set_rng_state(rng)
        runs.append({"variant": v, **train_run(built, VARIANTS[v])})
    return {"setup_s": round(setup, 3), "runs": runs}


def in_process(spec: dict) -> dict:
    """`child(spec)` in a fresh Python process with its own empty inductor cache; adds its wall seconds."""
    work = Path(tempfile.mkdtemp(prefix="vlcp-step-options-"))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(work / "inductor"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, text=True,
                       capture_output=True, cwd=ROOT)
    if p.returncode:
        raise RuntimeError(f"{spec['experiment']} {spec['runs']}: the process failed:\n{p.stderr[-3000:]}")
    return {"process_s": round(time.perf_counter() - t0, 3), **json.loads(p.stdout.strip().splitlines()[-1])}


def summary(runs: dict[str, list[dict]], reference: str) -> dict:
    """Per variant: the minimum over repeats of each timing, its ratio to the reference's minimum (a
    FRESH variant's: the reference's runs in fresh processes), and whether every run's numbers are
    those of the reference's runs (which must agree among themselves)."""
    keys = ("train_s", "train_cpu_s", "first_task_s", "later_tasks_s")
    mins = {v: {k: min(r[k] for r in rs) for k in keys} for v, rs in runs.items()}
    out = {}
    for v, rs in runs.items():
        ref = fresh_key(reference) if v in FRESH else reference
        numbers = {r["numbers"] for r in runs[reference] + runs.get(fresh_key(reference), [])}
        out[v] = {"reference": ref, "min": mins[v], "min_ratio": {k: round(mins[v][k] / mins[ref][k], 4) for k in keys},
                  "identical_numbers": len(numbers) == 1 and all(r["numbers"] in numbers for r in rs)}
    return out


def measure(base: dict, variants: list[str], repeats: int) -> tuple[dict, dict]:
    """The in-process variants in one process, interleaved; the FRESH variants beside the reference,
    a process per run (the reference's own such runs under "<reference> (fresh)"). Returns
    {variant: [run, ...]} and {variant: [seconds of setup per process]}."""
    shared = [v for v in variants if v not in FRESH]
    runs, setups = {v: [] for v in shared}, {v: [] for v in shared}
    order = [v for rep in range(repeats) for v in interleaved(shared, rep)]
    if shared:
        out = in_process({**base, "runs": order})
        for r in out["runs"]:
            runs[r["variant"]].append(r)
        for v in shared:
            setups[v].append(out["setup_s"])
    fresh = [v for v in variants if v in FRESH]
    for rep in range(repeats if fresh else 0):
        for v in interleaved([variants[0], *fresh], rep):
            out = in_process({**base, "runs": [v]})
            key = fresh_key(variants[0]) if v == variants[0] else v
            runs.setdefault(key, []).append(out["runs"][0])
            setups.setdefault(key, []).append(out["setup_s"])
    return runs, setups


def fresh_key(reference: str) -> str:
    return f"{reference} (fresh)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", nargs="+", default=list(SHORT))
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), help="the first is the reference")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", nargs="*", default=None, dest="overrides",
                    help="config overrides for every run (default: the experiment's short run, SHORT)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/step_options.json"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    for v in args.variants:
        if v not in VARIANTS:
            ap.error(f"--variants {v!r}: not one of {', '.join(VARIANTS)}")
    if args.variants[0] in FRESH:
        ap.error(f"--variants: the reference (first) must run in-process, not {args.variants[0]!r}")
    from vlcp.utils import write_json

    out = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    for exp in args.experiments:
        overrides = SHORT.get(exp, []) if args.overrides is None else args.overrides
        base = {"experiment": exp, "seed": args.seed, "params": args.params, "overrides": overrides}
        t0 = time.time()
        runs, setups = measure(base, args.variants, args.repeats)
        s = summary(runs, args.variants[0])
        entry = out.setdefault("experiments", {}).setdefault(exp, {})
        entry.update({"overrides": overrides, "reference": args.variants[0], "repeats": args.repeats})
        for v in runs:
            entry.setdefault("variants", {})[v] = {"variant": VARIANTS.get(v, VARIANTS[args.variants[0]]),
                                                   "runs": runs[v], "setup_s": setups[v],
                                                   "reference_runs": runs[s[v]["reference"]], **s[v], **provenance()}
            print(f"{exp} {v}: min train {s[v]['min']['train_s']:.1f} s ({s[v]['min_ratio']['train_s']:.3f} x "
                  f"{s[v]['reference']}; first task {s[v]['min']['first_task_s']:.1f} s, later "
                  f"{s[v]['min']['later_tasks_s']:.1f} s), identical numbers: {s[v]['identical_numbers']}", flush=True)
        print(f"{exp}: {time.time() - t0:.0f} s", flush=True)
        out["what"] = ("training seconds of the tiny models' short runs under each step option (minimum over "
                       "interleaved repeats, ratio to the reference's) and whether the numbers stay bit for bit")
        write_json(args.out, out | provenance())


if __name__ == "__main__":
    main()
