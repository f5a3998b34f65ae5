"""Start-up cost of a run stage (issue 47): `python -c "import vlcp.run"` and a tiny `vlcp run`'s overhead.

- import: the wall time of a fresh interpreter importing `vlcp.run` (median of --repeats), and of
  `import open_clip` alone (what the first model built adds);
- a tiny run (`vlcp run seqf --seed 0 --set train.steps=STEPS`, in a scratch folder): its wall time
  as a process, the training and evaluation seconds it records, and the rest, its overhead (start-up,
  data, model, θ0 evaluation, checkpoints, results); with `--dvc`, the same run as a DVC stage
  (`dvc repro --force --single-item run@seqf-0` in this checkout), whose overhead adds DVC's own;
- the machine's pace: the tiny run's SeqF seconds per training step, against `benchmarks/spine_cost.py`'s
  reference (the overheads are also given at the reference pace, ÷ the slowdown).

Writes benchmarks/results/startup.json. Needs the prepared benchmark (`vlcp data prepare`).
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]   # the checkout measured (`python -m vlcp` imports its vlcp)
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import provenance  # noqa: E402


def timed(cmd: list[str], **kw) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    return time.perf_counter() - t


def run_seconds(results: Path) -> tuple[float, float, int]:
    r = json.loads(results.read_text())
    return (sum(t["seconds"] for t in r["train"]), sum(t["eval_seconds"] for t in r["train"]),
            sum(t["steps"] for t in r["train"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=240, help="the tiny run's steps (240: the tiny profile's)")
    ap.add_argument("--dvc", action="store_true", help="also time run@seqf-0 as a DVC stage in this checkout")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "startup.json"))
    args = ap.parse_args()
    py = sys.executable
    imports = {name: sorted(timed([py, "-c", f"import {name}"], cwd=ROOT) for _ in range(args.repeats))
               for name in ("vlcp.run", "open_clip", "torch")}
    runs = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            wall = timed([py, "-m", "vlcp", "run", "seqf", "--seed", "0", "--out", tmp, "--checkpoints", f"{tmp}/ck",
                          "--set", f"train.steps={args.steps}", "--set", "train.progress=false"], cwd=ROOT)
            train, ev, steps = run_seconds(Path(tmp) / "seqf" / "seed0" / "results.json")
            runs.append({"wall": wall, "train": train, "eval": ev, "overhead": wall - train - ev, "steps": steps})
    spine = json.loads((ROOT / "benchmarks" / "results" / "spine_cost.json").read_text())
    reference = spine["median_seconds_per_step"]["seqf"]
    pace = statistics.median(r["train"] / r["steps"] for r in runs)
    slowdown = pace / reference
    out = {**provenance(), "repeats": args.repeats, "steps": args.steps,
           "import_seconds": {k: {"median": statistics.median(v), "all": v} for k, v in imports.items()},
           "run": runs, "run_overhead_median": statistics.median(r["overhead"] for r in runs),
           "seqf_seconds_per_step": pace, "reference_seconds_per_step": reference, "slowdown": slowdown}
    out["run_overhead_at_reference_pace"] = out["run_overhead_median"] / slowdown
    if args.dvc:
        stage = []
        for _ in range(args.repeats):
            shutil.rmtree(ROOT / "checkpoints" / "seqf" / "seed0", ignore_errors=True)   # else the run resumes, finished
            wall = timed([str(Path(py).parent / "dvc"), "repro", "--force", "--single-item", "run@seqf-0"], cwd=ROOT)
            train, ev, _ = run_seconds(ROOT / "runs" / "seqf" / "seed0" / "results.json")
            stage.append({"wall": wall, "train": train, "eval": ev, "overhead": wall - train - ev})
        out["dvc_stage"] = stage
        out["dvc_stage_overhead_median"] = statistics.median(s["overhead"] for s in stage)
        out["dvc_stage_overhead_at_reference_pace"] = out["dvc_stage_overhead_median"] / slowdown
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("run", "dvc_stage")}, indent=1))


if __name__ == "__main__":
    main()
