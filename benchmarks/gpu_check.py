"""One prepared GPU check: throughput and MFU per model, ops per step, eager against compiled, and
the spine's `small` power row, sized to fit one device call.

    python benchmarks/gpu_check.py [--budget 540] [--out benchmarks/results/gpu_check.json]
    python benchmarks/gpu_check.py --dry [--set data.root=DIR ...]   # the same path on CPU, tiny, a few steps

A short probe times a few training steps of each model (vlcp's loop, SeqF, synthetic batches, bf16
on the GPU) and counts the ATen ops one step dispatches (torch.profiler, as benchmarks/throughput.py);
MFU is samples/s × the model's training FLOPs per sample (benchmarks/study_cost.py) over the H200's
bf16 peak. Where `TrainCfg.compile` takes torch.compile modes ("none" by default), each model is also
timed with compile reduce-overhead. From the probe's step time of the spine's model the check then
picks how many seeds of the `small` profile's JointT − SeqF pair fit the rest of `--budget` (at least
2, with fewer steps if it must), runs each seed's pair as `vlcp run seqf jointt --jobs 2` (the two
share the GPU) and reads the power row (H/σ_d of final Rm, paired by seed) as the reports do.
`--dry` runs it on CPU at the `tiny` profile and writes the same JSON, marked "dry": true (the tests
run it): one unwarmed probe step per distinct stand-in model at batch 4 (compiled: the spine's stand-in
only); 2 seeds of the pair at 2 steps,
batch 8, one thread, one zero-shot template, no unseen-style set and the last task's FLOPs counted
(`DRY_SETS`), run in this process
one after the other (--jobs 1: no worker processes to start).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from study_cost import PEAK_FLOPS, model_cost  # noqa: E402

# the models the issue asks about: name -> image size; --dry: the tiny stand-ins
MODELS = {"vlcp-small": 64, "albef-small": 64, "RN50": 64, "ViT-B-32": 224}
DRY_MODELS = {"vlcp-small": ("vlcp-tiny", 32), "albef-small": ("albef-tiny", 32), "RN50": ("vlcp-tiny-rn", 32),
              "ViT-B-32": ("vlcp-tiny", 32)}
PAIR = ("seqf", "jointt")          # the spine's power pair: H = JointT − SeqF
DRY_SETS = ["train.batch_size=8", 'eval.zeroshot_templates=["{}"]', "train.flops_every=2", "data.unseen_styles=[]",
            "train.num_threads=1"]   # --dry: small runs, one thread


def compile_modes() -> list[str]:
    """The train.compile values to time: eager, and reduce-overhead where TrainCfg.compile takes
    torch.compile modes (its default "none")."""
    from vlcp.config import TrainCfg

    modes = TrainCfg.__dataclass_fields__.get("compile")
    return ["none", "reduce-overhead"] if modes is not None and modes.default == "none" else ["none"]


def probe_modes(models: dict[str, tuple[str, int]], modes: list[str], dry: bool) -> dict[str, list[str]]:
    """{model name: the train.compile modes its probe times}: every mode for every model; with `dry`,
    the compiled modes for the spine's stand-in only (one compile covers the path; an inductor
    compile on CPU costs more than the rest of the dry check)."""
    spine = models["vlcp-small"][0]
    return {name: modes if not dry or name == spine else modes[:1] for name, _ in models.values()}


def probe(name: str, image_size: int, batch: int, steps: int, device: str, precision: str, compile: str,
          warmup: int = 2) -> dict:
    """samples/s of `steps` steps (after `warmup` steps) of vlcp's loop on model `name`, and the ATen
    ops one step dispatches (eager only; from a 1- and a 2-step call); an ALBEF (its own batches) gets
    its ops from the meta count."""
    import torch

    from throughput import op_work, synthetic_batches, time_vlcp
    from vlcp.config import TrainCfg
    from vlcp.models.albef import is_albef
    from vlcp.models.clip import create_clip

    per_sample, meta_ops = model_cost(name, image_size)
    if is_albef(name):
        return {"model": name, "samples_per_second": None, "mfu": None, "ops_per_step": None,
                "meta_ops_per_step": meta_ops, "note": "the probe's loop takes CLIP models; ALBEF: FLOPs and ops from the meta count"}
    dev = torch.device(device)
    extra = {"compile": compile} if compile != "none" else {}
    cfg = TrainCfg(batch_size=batch, lr=1e-3, warmup_steps=1, progress=False, device=device, precision=precision, **extra)
    torch.manual_seed(0)
    model, tok = create_clip(name, None, dev, image_size=image_size)
    batches = synthetic_batches(max(2, warmup + steps), batch, image_size, tok.context_length, device=dev)
    time_vlcp(model, batches[:warmup], cfg, dev)
    seconds = time_vlcp(model, batches[warmup:warmup + steps], cfg, dev)
    sps = steps * batch / seconds
    ops = op_work({"vlcp": (time_vlcp, model)}, batches, cfg, dev, short=1, long=2)["aten_ops_per_step"]["vlcp"] \
        if compile == "none" else None
    return {"model": name, "samples_per_second": sps, "seconds_per_step": seconds / steps,
            "mfu": sps * per_sample / PEAK_FLOPS, "ops_per_step": ops, "meta_ops_per_step": meta_ops}


def plan_seeds(seconds_per_step: float, steps: int, budget: float, jobs: int = 2, min_seeds: int = 2,
               max_seeds: int = 5) -> tuple[int, int]:
    """(seeds, steps per run) of the power pair that fit `budget` seconds: each seed's two runs share
    the device (`jobs` at a time, counted as running one after the other: no overlap assumed), as many
    seeds as fit up to `max_seeds`; if `min_seeds` do not fit at `steps`, the steps shrink to fit them."""
    per_seed = len(PAIR) * steps * seconds_per_step
    seeds = max(min_seeds, min(max_seeds, int(budget // per_seed) if per_seed > 0 else max_seeds))
    if seeds * per_seed > budget:
        steps = max(1, int(budget / (seeds * len(PAIR) * seconds_per_step)))
    return seeds, steps


def final_rm(results: Path) -> float:
    r = json.loads(results.read_text())
    return float(r["cumulative"][-1]["test"]["Rm"])


def power_row(upper: dict[int, float], lower: dict[int, float]) -> dict:
    """H/σ_d of final Rm, JointT − SeqF paired by seed (vlcp.report.power.study_power)."""
    from vlcp.report.power import study_power

    seeds = sorted(set(upper) & set(lower))
    p = study_power("Rm", [upper[s] for s in seeds], [lower[s] for s in seeds], None, headroom_from="jointt − seqf")
    return {"metric": "Rm", "seeds": seeds, "headroom": p.headroom, "sigma_d": p.sigma_d,
            "headroom_over_noise": p.headroom_over_noise, "jointt": upper, "seqf": lower}


def run_pair(params: Path, seeds: int, steps: int, work: Path, device: str, overrides: list[str],
             jobs: int = 2) -> dict:
    """Each seed's `vlcp run seqf jointt --jobs 2` (the two share the device), a process of its own;
    with `jobs` 1 (--dry), in this process, one run after the other. The power row of their results."""
    from vlcp.cli import main as vlcp

    upper, lower = {}, {}
    for seed in range(seeds):
        args = ["run", *PAIR, "--seed", str(seed), "--jobs", str(jobs), "--params", str(params),
                "--out", str(work / "runs"), "--checkpoints", str(work / "ckpt"), "--no-resume",
                "--set", f"train.steps={steps}", "--set", f"train.device={device}", "--set", "train.progress=false"]
        for o in overrides:
            args += ["--set", o]
        if jobs > 1:
            subprocess.run([sys.executable, "-m", "vlcp.cli", *args], check=True, cwd=ROOT)
        elif vlcp(args) != 0:
            raise SystemExit(f"gpu_check: vlcp {' '.join(args)} failed")
        upper[seed] = final_rm(work / "runs" / "jointt" / f"seed{seed}" / "results.json")
        lower[seed] = final_rm(work / "runs" / "seqf" / f"seed{seed}" / "results.json")
    return power_row(upper, lower)


def main() -> None:
    import torch
    import yaml

    from common import provenance
    from vlcp.config import load_params, resolve_experiment
    from vlcp.utils import write_json

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry", action="store_true", help="on CPU, tiny profile, a handful of steps (the tests)")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds for the whole check")
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to the power pair's runs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_check.json"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    device, profile, precision = ("cpu", "tiny", "fp32") if args.dry else ("cuda", "small", "bf16")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no GPU is visible (use --dry on CPU)")
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    else:
        torch.set_num_threads(1)   # --dry: the tests' shared cores
    batch, steps, warmup = (4, 1, 0) if args.dry else (256, 20, 2)
    models = DRY_MODELS if args.dry else {k: (k, v) for k, v in MODELS.items()}
    modes = compile_modes()
    modes_of = probe_modes(models, modes, args.dry)
    probed = {(name, size, mode): probe(name, size, batch, steps, device, precision, mode, warmup)
              for name, size in dict.fromkeys(models.values()) for mode in modes_of[name]}   # a stand-in shared once
    throughput = {key: {mode: probed[name, size, mode] for mode in modes_of[name]} for key, (name, size) in models.items()}
    params = load_params(args.params)
    params["profile"] = profile
    spine = resolve_experiment(params, PAIR[0], 0, args.set)
    spine_key = next(k for k, (n, _) in models.items() if n == spine.model.name) if not args.dry else "vlcp-small"
    step_s = throughput[spine_key]["none"]["seconds_per_step"] * spine.train.batch_size / batch
    left = args.budget - (time.perf_counter() - t0)
    seeds, run_steps = plan_seeds(step_s, 2 if args.dry else spine.train.steps, left, max_seeds=2 if args.dry else 5)
    jobs = 1 if args.dry else 2
    with tempfile.TemporaryDirectory(prefix="vlcp-gpu-check-") as tmp:
        work = Path(tmp)
        (work / "params.yaml").write_text(yaml.safe_dump(params))
        power = run_pair(work / "params.yaml", seeds, run_steps, work, device, [*DRY_SETS * args.dry, *args.set], jobs)
    out = {"what": "one prepared GPU check (benchmarks/gpu_check.py): samples/s and MFU per model, ops per step, "
                   "eager against compiled, the spine's power row", "dry": args.dry, "device": device,
           "profile": profile, "precision": precision, "probe_batch": batch, "probe_steps": steps,
           "compile_modes": modes, "peak_flops": PEAK_FLOPS,
           "models": {k: {"model": n, "image_size": s} for k, (n, s) in models.items()},
           "throughput": throughput,
           "power": {**power, "profile": profile, "steps": run_steps, "planned_seconds_per_step": step_s,
                     "jobs": jobs},
           "seconds": time.perf_counter() - t0,
           **provenance(), "gpu": torch.cuda.get_device_name() if device == "cuda" else None}
    write_json(args.out, out)
    print(json.dumps({k: out[k] for k in ("dry", "device", "seconds")}), f"power H/σ_d {power['headroom_over_noise']:.2f}",
          f"-> {args.out}")


if __name__ == "__main__":
    main()
