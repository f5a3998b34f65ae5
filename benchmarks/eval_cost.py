"""What a run's evaluations cost, before and after a change to them: seconds and encoded rows per phase.

    .venv/bin/python benchmarks/eval_cost.py [--before REF] [--repeats 3] [--experiments ...]

For each experiment (default: the spine's `seqf`, FoMo-in-Flux's `fomo-ft`, CTP's `ctp-ctp`,
CLL-CLIP's `cll-clip`, tiny profile, seed 0) it times every evaluation of one run: the starting
model's (`zero_shot`), the one after each task (`evaluate`) and the final pools (`final_pools`,
the group stream's), and counts the rows each tower encodes there (images, texts, ALBEF's fused
image+caption rows, CLL-CLIP's captions). Two checkouts run the same experiments: this one
(`after`) and `--before` (a git ref, exported with `git archive`), each in its own process, ABBA
interleaved `--repeats` times; the JSON keeps every repeat and the minimum (the machine is shared).
Training is cut to a few steps per task (`--set` overrides below): an evaluation's work does not
depend on how long the model trained, and the training is not what is measured. `same_results`
says whether both checkouts recorded the same evaluation results (zero_shot, matrix, cumulative,
final_cumulative, trajectory, heldout). Needs the prepared benchmark and the base models
(models/fomo-base.pt, ctp-base.pt, cll-base.pt). About 6 minutes on 2 quiet cores.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import interleaved, provenance  # noqa: E402

EXPERIMENTS = ["seqf", "fomo-ft", "ctp-ctp", "cll-clip"]
SHORT = {"seqf": ["train.steps=18"], "fomo-ft": ["fomo.steps_per_task=1"], "ctp-ctp": ["train.steps=18"],
         "cll-clip": ["train.steps=24"]}   # a step or two per task (9, 20, 9 and 12 tasks)
RECORDED = ("zero_shot", "matrix", "cumulative", "final_cumulative", "trajectory", "heldout")


def child(spec: dict) -> dict:
    """Run `spec["experiments"]` in this process with the `vlcp` on sys.path, timing and counting
    each evaluation phase; {experiment: {"seconds": {phase: s}, "rounds": {phase: n}, "rows": {...},
    "results": the recorded evaluation fields}}."""
    import collections
    import functools

    import open_clip.model as om

    from vlcp.config import load_params, resolve_experiment
    from vlcp.eval.evaluate import Evaluator
    from vlcp.models.albef import ALBEF
    from vlcp.models.token_embedding import CLLText
    from vlcp.registry import load_stream
    from vlcp.run import run_experiment

    phase: list = [None]
    rows: collections.Counter = collections.Counter()

    def count(cls, name, tag):
        orig = getattr(cls, name)

        @functools.wraps(orig)
        def counted(self, x, *a, **k):
            if phase[0] is not None and not (cls is CLLText and self.training):
                rows[tag] += len(x)
            return orig(self, x, *a, **k)
        setattr(cls, name, counted)

    for cls in (om.CLIP, om.CustomTextCLIP, ALBEF):
        count(cls, "encode_image", "image")
        count(cls, "encode_text", "text")
    count(ALBEF, "encode_multimodal", "multimodal")
    count(CLLText, "forward", "text")

    seconds: collections.Counter = collections.Counter()
    rounds: collections.Counter = collections.Counter()

    def timed(owner, name, tag):
        orig = getattr(owner, name)

        @functools.wraps(orig)
        def run(*a, **k):
            outer = phase[0] is None
            if outer:
                phase[0], t = tag, time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                if outer:
                    seconds[tag] += time.perf_counter() - t
                    rounds[tag] += 1
                    phase[0] = None
        setattr(owner, name, run)

    timed(Evaluator, "final_pools", "final_pools")
    params = load_params(spec["params"])
    out = {}
    for exp in spec["experiments"]:
        cfg = resolve_experiment(params, exp, 0, ["train.progress=false", *SHORT.get(exp, [])])
        stream = load_stream(cfg.data.stream)
        for name in ("zero_shot", "evaluate"):
            if name in vars(stream):
                timed(stream, name, name)
        seconds.clear(), rounds.clear(), rows.clear()
        where = Path(spec["work"]) / exp
        t = time.perf_counter()
        r = run_experiment(cfg, where / "run", where / "ckpt", resume=False)
        out[exp] = {"wall": time.perf_counter() - t, "seconds": dict(seconds), "rounds": dict(rounds),
                    "rows": dict(rows), "results": {k: r[k] for k in RECORDED if k in r}}
    return out


def checkout(ref: str, into: Path) -> Path:
    """`vlcp/` of git `ref`, exported under `into` (importable with it first on PYTHONPATH)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", ref, "vlcp"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="the git ref measured as `before` (default: main)")
    ap.add_argument("--experiments", nargs="+", default=EXPERIMENTS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--work", default=None, help="runs, checkpoints and the exported checkout go here (a temp dir)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "eval_cost.json"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="vlcp-eval-cost-"))
    paths = {"before": checkout(args.before, work / "before"), "after": ROOT}
    before_commit = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=ROOT, capture_output=True,
                                   text=True, check=True).stdout.strip()
    runs: dict = {v: [] for v in paths}
    for rep in range(args.repeats):
        for version in interleaved(list(paths), rep):
            spec = {"experiments": args.experiments, "params": args.params, "work": str(work / f"{version}{rep}")}
            env = {**os.environ, "PYTHONPATH": str(paths[version]), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
            done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], cwd=ROOT, env=env,
                                  capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{version} repeat {rep + 1}: the child failed:\n{done.stderr[-3000:]}")
            runs[version].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"repeat {rep + 1}/{args.repeats} {version}: " + ", ".join(
                f"{e} {sum(r['seconds'].values()):.1f} s" for e, r in runs[version][-1].items()), flush=True)
    summary = {}
    for exp in args.experiments:
        row = {}
        for version, reps in runs.items():
            phases = sorted({p for r in reps for p in r[exp]["seconds"]})
            row[version] = {"eval_seconds_min": min(sum(r[exp]["seconds"].values()) for r in reps),
                            "eval_seconds": [sum(r[exp]["seconds"].values()) for r in reps],
                            "phase_seconds_min": {p: min(r[exp]["seconds"].get(p, 0.0) for r in reps) for p in phases},
                            "rounds": reps[0][exp]["rounds"], "rows": reps[0][exp]["rows"],
                            "wall_seconds": [r[exp]["wall"] for r in reps]}
        row["after_over_before"] = row["after"]["eval_seconds_min"] / row["before"]["eval_seconds_min"]
        row["same_results"] = all(r[exp]["results"] == runs["before"][0][exp]["results"]
                                  for reps in runs.values() for r in reps)
        summary[exp] = row
        print(f"{exp}: {row['before']['eval_seconds_min']:.1f} -> {row['after']['eval_seconds_min']:.1f} s "
              f"({row['after_over_before']:.2f} x), rows {row['before']['rows']} -> {row['after']['rows']}, "
              f"same results: {row['same_results']}")
    out = {**provenance(), "before": {"ref": args.before, "commit": before_commit}, "repeats": args.repeats,
           "seed": 0, "overrides": {e: SHORT.get(e, []) for e in args.experiments}, "experiments": summary}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
