"""The studies' headline numbers and per-task curves as DVC metrics and plots
(`vlcp report metrics [--study NAME]`, run by each study's report stage after its notebook).

- `metrics/<study>.json`: per experiment, the final model's headline numbers (mean over the
  study's seeds, a seed subset's extra seeds left out) and the claims ledger's verdict counts;
- `plots/<study>.csv`: each experiment's per-task curve, and `plots/fomo/<experiment>.csv`:
  FoMo-in-Flux's accumulation–retention trajectory (A_KA, A_ZS after every task, θ0 first).

A headline depends on the run's stream: group/class/instance streams the final cumulative Rm on
the test pool (and mAP@1 with a query set; IncCLIP's zero-shot Average where present), the
language stream AR and F of in-domain text-to-image R@1, the concept stream A_KA, A_ZS and GM.
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path

import numpy as np

from vlcp.errors import VlcpError
from vlcp.report import cllclip, fomo, incclip
from vlcp.report.claims import VERDICTS
from vlcp.report.study import load_study, registered
from vlcp.utils import atomic_dir, read_json, read_results, write_json



def study_sources(params: dict) -> dict[str, dict]:
    """{study: {"runs": folder, "claims": its report's claims file, "experiments": the ones whose
    curves are plotted (None = every run found), "seeds": the seeds its tables report (None = every
    seed found)}} of every registered study (`Study.metric_sources`)."""
    return {name: load_study(name).metric_sources(params) for name in registered()}


def collect_runs(runs_dir: str | Path, seeds=None) -> dict[str, list[dict]]:
    """{experiment: [results, one per seed, by seed]} of every results.json under `runs_dir`
    (only those at `seeds`, when given)."""
    runs: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(Path(runs_dir).rglob("results.json")):
        r = read_results(path)
        if isinstance(r, dict) and "experiment" in r and (seeds is None or r.get("seed", 0) in seeds):
            runs[r["experiment"]].append(r)
    return {e: sorted(rs, key=lambda r: r.get("seed", 0)) for e, rs in sorted(runs.items())}


def headline(r: dict) -> dict[str, float]:
    """The final model's headline numbers of one run (see the module docstring)."""
    if r.get("stream") == "language":
        a = cllclip.accuracy_matrix(r, "in_domain", "IR@1")
        f = cllclip.forgetting(a)
        return {"AR": cllclip.ar(a)} | ({} if f is None else {"F": f})
    if "trajectory" in r:
        return fomo.endpoint(r)
    out = {}
    if r.get("cumulative"):
        last = r["cumulative"][-1]["test"]
        out = {k: last[k] for k in ("Rm", "mAP@1") if k in last}
    if r.get("heldout") and "classification" in r["heldout"][-1]:
        out["Average"] = incclip.classification(r)["Average"]
    return out


def curve(r: dict) -> list[float]:
    """The per-task curve of one run: cumulative Rm (group streams), IncCLIP's held-out Average
    where the run has it, AR after every task (language), GM after every task (concepts)."""
    if r.get("stream") == "language":
        return cllclip.ar_curve(cllclip.accuracy_matrix(r, "in_domain", "IR@1")).tolist()
    if "trajectory" in r:
        return [row["GM"] for row in r["trajectory"]]
    if r.get("heldout") and "classification" in r["heldout"][-1]:
        return [incclip.classification(r, i)["Average"] for i in range(len(r["heldout"]))]
    return [row["test"]["Rm"] for row in r.get("cumulative", [])]


def mean_over_seeds(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k in rows[0] if all(k in row and row[k] is not None for row in rows)]
    return {k: round(float(np.mean([row[k] for row in rows])), 4) for k in keys}


def claims_file(path: str | Path) -> dict | None:
    """A report's claims file, None when the notebook has not written one."""
    path = Path(path)
    return read_json(path) if path.exists() else None


def claim_counts(ledger: dict | None) -> dict[str, int]:
    """{verdict: count} of a claims file's contents (`claims_file`; an empty dict without one)."""
    if ledger is None:
        return {}
    claims = ledger.get("claims", [])
    counts = {v: sum(c.get("verdict") == v for c in claims) for v in VERDICTS}
    counts["other"] = len(claims) - sum(counts.values())
    return counts


POWER_KEYS = ("headroom", "sigma_d", "headroom_over_noise", "tasks_teaching", "tasks", "seeds")


def claim_power(ledger: dict | None) -> dict | None:
    """The study's power table as its claims file carries it (`vlcp.report.power`), rounded; None
    without a file or a table in it."""
    p = (ledger or {}).get("power")
    return {k: round(float(p[k]), 4) for k in POWER_KEYS if k in p} if p else None


def study_metrics(runs: dict[str, list[dict]], claims: dict[str, int], power: dict | None = None) -> dict:
    return {"runs": sum(map(len, runs.values())),
            "experiments": {e: mean_over_seeds([headline(r) for r in rs]) for e, rs in runs.items()},
            "claims": claims, **({"power": power} if power else {})}


def curves_csv(runs: dict[str, list[dict]], experiments: list[str] | None) -> str:
    """task, then one column per experiment (mean over seeds); empty cells past a shorter stream."""
    names = [e for e in (experiments or runs) if e in runs]
    cols = {e: np.mean([curve(r) for r in runs[e]], axis=0).tolist() if runs[e] else [] for e in names}
    length = max((len(c) for c in cols.values()), default=0)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["task"] + names)
    for t in range(length):
        w.writerow([t + 1] + [f"{cols[e][t]:.4f}" if t < len(cols[e]) else "" for e in names])
    return buf.getvalue()


def trajectory_csv(r: dict) -> str:
    """after task (0 = θ0), A_KA, A_ZS, GM of one FoMo run."""
    df = fomo.trajectory(r).round(4)
    return df.to_csv(lineterminator="\n")


def write_metrics(params: dict, root: str | Path = ".", metrics_dir: str = "metrics", plots_dir: str = "plots",
                  studies: list[str] | None = None) -> list[Path]:
    """Write the metrics and plot files of `studies` (default: every study; one without runs gets
    files with none, so DVC's outputs always exist), each file atomically. Returns the metrics files."""
    from vlcp.utils import atomic_path

    root = Path(root)
    sources = study_sources(params)
    unknown = [s for s in studies or [] if s not in sources]
    if unknown:
        raise VlcpError(f"--study: unknown study {unknown[0]!r} ({', '.join(sources)})")
    written = []
    for study in studies or list(sources):
        src = sources[study]
        runs = collect_runs(root / src["runs"], src.get("seeds")) if (root / src["runs"]).exists() else {}
        path = root / metrics_dir / f"{study}.json"
        ledger = claims_file(root / src["claims"])
        write_json(path, study_metrics(runs, claim_counts(ledger), claim_power(ledger)))
        written.append(path)
        with atomic_path(root / plots_dir / f"{study}.csv") as tmp:
            tmp.write_text(curves_csv(runs, src["experiments"]))
        if study == "fomo":
            with atomic_dir(root / plots_dir / "fomo") as traj:
                for e in src["experiments"] or []:
                    if e in runs:
                        (traj / f"{e}.csv").write_text(trajectory_csv(runs[e][0]))
    return written
