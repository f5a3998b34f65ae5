"""What each profile's whole study costs: FLOPs and GPU-hours, from the resolved configs.

    .venv/bin/python benchmarks/study_cost.py [--params params.yaml] [--profiles tiny small paper]
        [--out benchmarks/results/study_cost.json] [--doc docs/paper-scale.md]
    .venv/bin/python benchmarks/study_cost.py --check seqf --profile tiny   # one run's row, printed

Every experiment of every profile is resolved with vlcp's own config functions; a run costs its
training steps × batch × the training FLOPs per sample of its model (a full forward and backward,
counted with torch's FlopCounterMode on the meta device, so no weights are made; cached per model
and input size), times the seeds its study runs. The sums per study and profile are converted to
H200 GPU-hours at stated MFUs of the bf16 peak and at the host-bound rate (seconds per dispatched
op × the ATen ops a step dispatches, counted on the same meta forward and backward). Evaluation,
the methods' per-task passes, frozen towers (counted as trained) and MAFs budgets are left out:
the table is the training's order of magnitude, not a bill. The markdown table goes between the
markers in `--doc`.
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEAK_FLOPS = 790e12          # the H200's dense bf16 peak the issue states (FLOP/s)
MFUS = (0.30, 0.40)
SECONDS_PER_OP = 21e-6       # the host's cost per dispatched op on the H200 readings (#77)
BEGIN, END = "<!-- study_cost: begin -->", "<!-- study_cost: end -->"


@functools.lru_cache(maxsize=None)
def model_cost(name: str, image_size: int) -> tuple[float, int]:
    """(training FLOPs per sample, ATen ops dispatched) of one forward and backward of model `name`
    built for `image_size`, on the meta device: image and text towers, a contrastive loss over a
    batch of 2 (ALBEF: also its fusion encoder on the matched pairs)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    from vlcp.models.albef import ALBEF, PRESETS, is_albef

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    batch = 2
    with torch.device("meta"):
        if is_albef(name):
            from dataclasses import replace
            cfg = replace(PRESETS[name], image_size=image_size)
            model, ctx, vocab = ALBEF(cfg, cfg.vocab_size, 0, None), cfg.context_length, cfg.vocab_size
        else:
            import open_clip
            from vlcp.models.clip import register_configs, without_random_init_warning
            register_configs()
            with without_random_init_warning():
                model = open_clip.create_model(name, device="meta", force_image_size=image_size)
            ctx, vocab = model.context_length, model.vocab_size
        images = torch.empty(batch, 3, image_size, image_size)
        tokens = torch.zeros(batch, ctx, dtype=torch.long)
    ops, flops = Ops(), FlopCounterMode(display=False)
    with flops, ops:
        img, txt = model.encode_image(images, normalize=True), model.encode_text(tokens, normalize=True)
        loss = (img @ txt.T).logsumexp(1).sum()
        if is_albef(name):
            loss = loss + model.encode_multimodal(images, tokens).sum()
        loss.backward()
    del vocab
    return flops.get_total_flops() / batch, ops.n


def run_steps(cfg) -> int:
    """A run's training steps: train.steps over the stream, or on the concept stream (FoMo-in-Flux)
    fomo.steps_per_task × compute_scale per task."""
    if cfg.data.stream == "concepts":
        tasks = cfg.fomo.num_tasks or max(1, len(cfg.fomo.datasets))
        return tasks * round(cfg.fomo.steps_per_task * cfg.fomo.compute_scale)
    return cfg.train.steps


def run_cost(cfg) -> dict:
    """One run's row: model, input size, steps, batch, training FLOPs per sample and in all, ops per step."""
    per_sample, ops = model_cost(cfg.model.name, cfg.data.image_size)
    steps = run_steps(cfg)
    return {"model": cfg.model.name, "image_size": cfg.data.image_size, "steps": steps,
            "batch_size": cfg.train.batch_size, "flops_per_sample": per_sample, "ops_per_step": ops,
            "flops": steps * cfg.train.batch_size * per_sample}


def study_seeds(params: dict, study: str) -> dict[str, list[int]]:
    """{experiment: the seeds its study runs} (the study's `seeds`, CTP's ablations at
    `ablation_seeds`; else params.yaml's `seeds`): the main runs, not the seed subsets or the long profile."""
    from vlcp.cli import study_experiments

    rep, default = params.get("report") or {}, list(params.get("seeds") or [0])
    node = rep.get(study.split()[0]) or {}
    seeds = list(node.get("seeds") or default)
    names = study_experiments(params)[study]
    ablation = set(node.get("ablation_experiments") or []) if study == "ctp" else set()
    return {e: list(node.get("ablation_seeds") or seeds) if e in ablation else seeds for e in names}


def profile_cost(params: dict, profile: str) -> dict:
    """Per study of `profile`: its runs (experiment × seeds), training FLOPs, and GPU-hours at each
    MFU and host-bound."""
    from vlcp.cli import study_experiments
    from vlcp.config import resolve_experiment

    params = {**params, "profile": profile}
    out = {}
    for study in study_experiments(params):
        rows = {}
        for exp, seeds in study_seeds(params, study).items():
            if "arch_of" in ((params["experiments"].get(exp) or {}).get("model") or {}):
                continue          # a pretraining stage naming an architecture only (its profile's base)
            rows[exp] = {**run_cost(resolve_experiment(params, exp)), "seeds": seeds}
        out[study] = summary(rows)
    return out


def summary(rows: dict) -> dict:
    """A study's totals from its runs' rows."""
    flops = sum(r["flops"] * len(r["seeds"]) for r in rows.values())
    host = sum(r["steps"] * r["ops_per_step"] * SECONDS_PER_OP * len(r["seeds"]) for r in rows.values())
    return {"runs": sum(len(r["seeds"]) for r in rows.values()), "flops": flops,
            "gpu_hours": {f"mfu_{round(100 * m)}": flops / (m * PEAK_FLOPS) / 3600 for m in MFUS},
            "host_bound_hours": host / 3600, "experiments": rows}


def table(cost: dict) -> str:
    """The markdown table of `cost` (the JSON's "profiles"): one row per profile and study."""
    head = ("| profile | study | runs | training FLOPs | GPU-h at 30 % MFU | GPU-h at 40 % MFU | host-bound h |\n"
            "|---|---|---:|---:|---:|---:|---:|")
    lines = [head]
    for profile, studies in cost.items():
        for study, s in studies.items():
            if s["runs"]:
                lines.append(f"| `{profile}` | {study} | {s['runs']} | {s['flops']:.2e} | {s['gpu_hours']['mfu_30']:.3g} | "
                             f"{s['gpu_hours']['mfu_40']:.3g} | {s['host_bound_hours']:.3g} |")
    return "\n".join(lines)


def with_table(doc: str, tbl: str) -> str:
    """`doc` with the text between the study-cost markers replaced by `tbl`."""
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"study_cost: the doc has no {BEGIN} ... {END} markers")
    head, rest = doc.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{tbl}\n{END}{rest.split(END, 1)[1]}"


def main() -> None:
    import json

    from vlcp.config import load_params, resolve_experiment
    from vlcp.utils import write_json

    from common import provenance  # noqa: E402  (benchmarks/common.py)

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--profiles", nargs="+", default=["tiny", "small", "paper"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "study_cost.json"))
    ap.add_argument("--doc", default=str(ROOT / "docs" / "paper-scale.md"))
    ap.add_argument("--check", metavar="EXPERIMENT", help="print one run's row (with --profile) and stop")
    ap.add_argument("--profile", default="tiny")
    args = ap.parse_args()
    params = load_params(args.params)
    if args.check:
        print(json.dumps(run_cost(resolve_experiment({**params, "profile": args.profile}, args.check)), indent=1))
        return
    cost = {p: profile_cost(params, p) for p in args.profiles}
    write_json(args.out, {"what": "training FLOPs and H200 GPU-hours of each profile's whole study, from the resolved "
                                  "configs (benchmarks/study_cost.py)",
                          "peak_flops": PEAK_FLOPS, "mfus": list(MFUS), "seconds_per_op": SECONDS_PER_OP,
                          "profiles": cost, **provenance()})
    doc = Path(args.doc)
    doc.write_text(with_table(doc.read_text(), table(cost)))
    print(table(cost))
    print(f"-> {args.out}, {args.doc}")


if __name__ == "__main__":
    main()
