"""Where each method's step time goes, by op: torch.profiler over whole runs, split by loop phase.

    .venv/bin/python benchmarks/method_profile.py [--study CLL-CLIP ...] [--experiments E ...] [--all]

Every run records the seconds of each loop phase (`vlcp.train.loop.PhaseClock`), and the
performance report shows where a method over its FLOPs × 1.1 target spends its extra time. This
goes one level down: each experiment runs once, whole, under torch.profiler, and
`vlcp.train.budget.phase_profile` records per phase its milliseconds per step and the ops with the
most self time (the Python between ops included). Default: per study of `report.performance.studies`
(`--study` picks some) its reference and the experiments its runs show over the target (all of
them with `--all` or when the study has no runs; `--experiments` names them). Each profile runs in
its own process (a profiled run's events take gigabytes). Profiling slows small ops: read the
shares, not the milliseconds. Needs the studies' initialisations (`dvc repro ctp_base cll_base
fomo_base`).
"""
from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from vlcp.config import load_params, resolve_experiment  # noqa: E402
from vlcp.report.results import step_time  # noqa: E402
from vlcp.run import run_experiment  # noqa: E402
from vlcp.train.budget import phase_profile  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)


def profile_run(params_file: str, exp: str, seed: int, work: Path) -> dict:
    """One whole run of `exp` under torch.profiler: its `phase_profile`, steps and own step time."""
    cfg = resolve_experiment(load_params(params_file), exp, seed, ["train.progress=false"])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        r = run_experiment(cfg, work / exp / "run", work / exp / "ckpt", resume=False)
    steps = sum(t["steps"] for t in r["train"])
    out = phase_profile(prof.events(), steps)
    out["steps"] = steps
    out["ms_per_step_timed"] = round(1e3 * step_time(r, False), 4)   # the run's own timing (under the profiler)
    return out


def over_target(spec: dict) -> list[str] | None:
    """The study's experiments over the target in its runs (`study_overheads`); None without runs."""
    from vlcp.report.performance import discover_runs, study_overheads

    runs = discover_runs(ROOT / spec["runs"], spec["experiments"])
    if spec["reference"] not in runs:
        return None
    t = study_overheads(runs, spec["reference"])
    return list(t.index[~t["within"]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", nargs="+", default=None, help="keys of report.performance.studies (default: all)")
    ap.add_argument("--experiments", nargs="+", default=None, help="only these (and each study's reference)")
    ap.add_argument("--all", action="store_true", help="every experiment of the studies")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--work", default=None, help="runs and checkpoints go here (default: a temp dir)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/method_profile.json"))
    args = ap.parse_args()
    params = load_params(args.params)
    studies = params["report"]["performance"]["studies"]
    for s in args.study or []:
        if s not in studies:
            ap.error(f"--study {s!r}: not in report.performance.studies ({', '.join(studies)})")
    work = Path(args.work or tempfile.mkdtemp(prefix="vlcp-method-profile-"))
    out = {"what": "milliseconds per training step of each loop phase under torch.profiler (one whole run each); "
                   "per phase the ops with the most self time", "argv": sys.argv[1:], "seed": args.seed, "studies": {}}
    todo = []
    for name in args.study or studies:
        s = studies[name]
        chosen = args.experiments or (None if args.all else over_target(s))
        chosen = s["experiments"] if chosen is None else chosen
        exps = [e for e in s["experiments"] if e in chosen]
        out["studies"][name] = {"reference": s["reference"], "experiments": {}}
        todo += [(name, e) for e in dict.fromkeys([s["reference"], *exps])]
    pool = multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1)   # a fresh process per profile
    for name, exp in tqdm(todo, desc="profile", unit="run"):
        t0 = time.time()
        prof = pool.apply(profile_run, (args.params, exp, args.seed, work))
        out["studies"][name]["experiments"][exp] = prof
        tqdm.write(f"{name} {exp} ({time.time() - t0:.0f} s): "
                   + ", ".join(f"{p} {v:.1f}" for p, v in prof["ms_per_step"].items() if v >= 0.05))
        write_json(args.out, out | provenance())      # after every run: an interrupted profile keeps what it has
    pool.close()


if __name__ == "__main__":
    main()
