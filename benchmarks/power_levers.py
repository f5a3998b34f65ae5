"""Measure a power lever: a study's upper and lower bound runs at calibration seeds under one
setting, recorded so that the study's report can show what the lever buys (issue 48).

    .venv/bin/python benchmarks/power_levers.py --study ctp --label "640 steps" \
        --set train.steps=640 --seeds 10 11 12 13 14 [--jobs 2] [--prepare]

It runs the study's upper and lower experiments (`STUDIES`) with `vlcp run ... --set ...` at each
seed into a scratch folder, then records per seed the headline metric of both, the lower run's
per-task gains on its own test pool (`vlcp.report.teach`: which tasks teach) and its training
seconds, with the command and provenance, in benchmarks/results/power_levers.json (a row with the
same study and label is replaced). The reports turn the rows into H, σ_d, H/σ_d and tasks that teach
(`vlcp.report.power.lever_powers`). Calibration seeds (10 and up) are never the ledger's, so a lever
is judged on power, never on the verdicts it would give.

`--prepare` first renders the benchmark the `--set` describes (e.g. a different `data.split` needs
its own `data.root`): `vlcp data prepare --set ...`; a `data.root` it made is removed afterwards.
"""
from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.utils import read_json, write_json  # noqa: E402

from common import provenance  # noqa: E402  (benchmarks/common.py)

OUT = ROOT / "benchmarks" / "results" / "power_levers.json"


def _final_rm(r: dict) -> float:
    from vlcp.report.results import final_metrics
    return final_metrics(r)["Rm"]


def _ctp_rm(r: dict) -> float:
    from vlcp.report.ctp.study import final_row
    return final_row(r)["Rm"]


def _incclip_average(r: dict) -> float:
    from vlcp.report.incclip import average
    return average(r)


def _incclip_emoji(r: dict) -> float:
    """The held-out Average over the four emoji sets only (the procedural four sit near chance)."""
    from vlcp.report.incclip import classification
    row = classification(r)
    return float(sum(v for k, v in row.items() if "unseen" in k) / sum("unseen" in k for k in row))


def _incclip_r1(r: dict) -> float:
    from vlcp.report.incclip import r1_mean
    return r1_mean(r)


def _cll_ar(r: dict) -> float:
    from vlcp.report.cllclip import summary
    return summary(r)[("in", "T2I", "AR")]


def _fomo_aka(r: dict) -> float:
    from vlcp.report.fomo import endpoint
    return endpoint(r)["A_KA"]


# study: (upper experiment, lower experiment, headline metric, its value from a results dict,
#         the metric the lower run's per-task gains are read on)
STUDIES = {
    "spine": ("jointt", "seqf", "final Rm", _final_rm, "Rm"),
    "ctp": ("ctp-jointt", "ctp-seqf", "final Rm", _ctp_rm, "Rm"),
    "incclip": ("ic4-joint", "ic4-seqf", "held-out Average", _incclip_average, "ZS@1"),
    # the 12-language stream of the ablations (the 36-language Table 2 costs 3 ×)
    "cllclip": ("cll-joint", "cll-clip", "in-domain T2I AR", _cll_ar, "IR@1"),
    # the headroom a continual method has over full fine-tuning (the report's H is joint − θ0)
    "fomo": ("fomo-joint", "fomo-ft", "A_KA", _fomo_aka, "A_KA"),
}
# more metrics recorded beside the headline (candidate headlines: issue 48's levers)
MORE = {"incclip": {"held-out Average, 4 emoji sets": _incclip_emoji, "mean R@1": _incclip_r1}}
# more pools the lower run's per-task gains are read on, beside its own test pool (the spine's
# per-task matrix is also scored on the unseen style: every emoji of a task, 85-385 per group)
MORE_TEACH = {"spine": ("unseen_style",)}
# more metrics the lower run's per-task gains are read on, on its own test pool (IncCLIP's headline is
# zero-shot ZS@1; its stream trains retrieval, which Rm reads: a candidate, recorded before any choice)
MORE_GAINS = {"incclip": ("Rm",)}


def teaches(results: list[dict], metric: str, eval_set: str | None = None) -> list[bool]:
    """Per task, whether the lower run's gain on its own pool (`eval_set`; None: the stream's test
    pool) clears twice its seed noise (`vlcp.report.teach.task_gains`)."""
    from vlcp.report.teach import task_gains

    return [bool(t) for t in task_gains(results, metric, eval_set)["teaches"]]


def set_args(sets: list[str]) -> list[str]:
    """`--set KEY=VALUE` for each override."""
    return [a for s in sets for a in ("--set", s)]


def measure(study: str, label: str, sets: list[str], seeds: list[int], jobs: int, prepare: bool,
            params: str = "params.yaml") -> dict:
    venv = Path(sys.executable).parent
    roots = [ROOT / s.split("=", 1)[1] for s in sets if s.startswith("data.root=")]
    made = [r for r in roots if prepare and not r.exists()]   # a benchmark rendered here goes again after
    if prepare:
        data_sets = set_args([s for s in sets if s.startswith("data.")])   # prepare takes data.* only
        subprocess.run([str(venv / "vlcp"), "data", "prepare", "--params", params, *data_sets], cwd=ROOT, check=True)
    try:
        return _runs(study, label, sets, seeds, jobs, params, venv)
    finally:
        for r in made:
            shutil.rmtree(r, ignore_errors=True)


def _runs(study: str, label: str, sets: list[str], seeds: list[int], jobs: int, params: str, venv: Path) -> dict:
    upper, lower = STUDIES[study][:2]
    with tempfile.TemporaryDirectory(prefix="levers-") as tmp:
        out = Path(tmp)
        started = time.time()
        for seed in seeds:
            cmd = [str(venv / "vlcp"), "run", upper, lower, "--seed", str(seed), "--params", params, "--jobs", str(jobs),
                   "--out", str(out / "runs"), "--checkpoints", str(out / "checkpoints"), "--no-resume", *set_args(sets)]
            print("[levers]", shlex.join(cmd[1:]), flush=True)
            subprocess.run(cmd, cwd=ROOT, check=True)
        wall = time.time() - started
        runs = {e: [read_json(out / "runs" / e / f"seed{s}" / "results.json") for s in seeds] for e in (upper, lower)}
    return {**summarize(study, label, sets, seeds, runs), "wall_seconds": round(wall, 1), "jobs": jobs, **provenance()}


def summarize(study: str, label: str, sets: list[str], seeds: list[int], runs: dict[str, list[dict]]) -> dict:
    """A lever's row from its runs ({experiment: [results per seed]}): per seed the headline of the
    upper and the lower run (`values`; other candidate metrics under `more_values`), which tasks
    the lower run teaches, and its training seconds."""
    upper, lower, metric, value, gain_metric = STUDIES[study]
    pair = lambda fn: {str(s): [fn(u), fn(lo)] for s, u, lo in zip(seeds, runs[upper], runs[lower])}  # noqa: E731
    return {"study": study, "label": label, "set": sets, "seeds": seeds, "upper": upper, "lower": lower,
            "metric": metric, "values": pair(value),
            "more_values": {m: pair(fn) for m, fn in MORE.get(study, {}).items()},
            "teaches": teaches(runs[lower], gain_metric), "gain_metric": gain_metric,
            "more_teaches": {e: teaches(runs[lower], gain_metric, e) for e in MORE_TEACH.get(study, ())},
            "more_gain_teaches": {m: teaches(runs[lower], m) for m in MORE_GAINS.get(study, ())},
            "lower_train_seconds": [round(sum(t["seconds"] for t in r["train"]), 2) for r in runs[lower]],
            "command": shlex.join(["python", "benchmarks/power_levers.py", "--study", study, "--label", label,
                                   *set_args(sets), "--seeds", *map(str, seeds)])}


def record(row: dict, path: Path = OUT) -> None:
    """Replace the row with the same study and label (or append), atomically."""
    data = read_json(path) if path.exists() else {"what": __doc__.split("\n\n")[0], "rows": []}
    data["rows"] = [r for r in data["rows"] if (r["study"], r["label"]) != (row["study"], row["label"])] + [row]
    write_json(path, data)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", required=True, choices=sorted(STUDIES))
    ap.add_argument("--label", required=True, help="the setting's name in the reports")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[10, 11, 12, 13, 14])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--prepare", action="store_true", help="first render the benchmark the --set describes")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    if min(a.seeds) < 10:
        ap.error("--seeds: calibration seeds are 10 and up (0-9 are the ledger's)")
    row = measure(a.study, a.label, a.set, a.seeds, a.jobs, a.prepare, a.params)
    record(row, a.out)
    print(f"[levers] {a.study} / {a.label}: recorded in {a.out}")


if __name__ == "__main__":
    main()
