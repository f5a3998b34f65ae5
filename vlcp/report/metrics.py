"""The studies' headline numbers and per-task curves as DVC metrics and plots
(`vlcp report metrics [--study NAME]`, run by each study's report stage after its notebook).

- `metrics/<study>.json`: per experiment, the final model's headline numbers (mean over the
  study's seeds, a seed subset's extra seeds left out) and the claims ledger's verdict counts;
- `plots/<study>.csv`: each experiment's per-task curve, and `plots/<study>/<name>` where the
  study module has `plot_files` (FoMo-in-Flux's accumulation–retention trajectories).

A headline is a group stream's final cumulative Rm on the test pool (and mAP@1 with a query set),
plus what the study module's `run_headline(r)` adds; its `run_curve(r)` replaces the per-task Rm curve.
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path

import numpy as np

from vlcp.errors import VlcpError
from vlcp.report.ledger import VERDICTS
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
    """The final model's headline numbers of one run of a group stream: Rm and mAP@1 on the
    cumulative test pool ({} for a run without one). A study module's own `run_headline(r)` adds its
    numbers for its runs (e.g. IncCLIP's zero-shot Average)."""
    last = r["cumulative"][-1]["test"] if r.get("cumulative") else {}
    return {k: last[k] for k in ("Rm", "mAP@1") if k in last}


def curve(r: dict) -> list[float]:
    """The per-task curve of one run of a group stream: cumulative Rm after every task. A study
    module's own `run_curve(r)` replaces it where it gives one (None: not one of its kind of run)."""
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


def study_metrics(runs: dict[str, list[dict]], claims: dict[str, int], power: dict | None = None,
                  headline=headline) -> dict:
    return {"runs": sum(map(len, runs.values())),
            "experiments": {e: mean_over_seeds([headline(r) for r in rs]) for e, rs in runs.items()},
            "claims": claims, **({"power": power} if power else {})}


def curves_csv(runs: dict[str, list[dict]], experiments: list[str] | None, curve=curve) -> str:
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


def study_headline(mine):
    """A study's headline of one run: the group stream's, plus its module's own `run_headline` (if any)."""
    return (lambda r: headline(r) | mine(r)) if callable(mine) else headline


def study_curve(mine):
    """A study's curve of one run: its module's own `run_curve` where it gives one, else the group stream's."""
    return (lambda r: mine(r) or curve(r)) if callable(mine) else curve


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
        own = load_study(study).own
        write_json(path, study_metrics(runs, claim_counts(ledger), claim_power(ledger), study_headline(own("run_headline"))))
        written.append(path)
        with atomic_path(root / plots_dir / f"{study}.csv") as tmp:
            tmp.write_text(curves_csv(runs, src["experiments"], study_curve(own("run_curve"))))
        plot_files = own("plot_files")   # a study's own plot files, plots/<study>/<name>
        if callable(plot_files):
            with atomic_dir(root / plots_dir / study) as folder:
                for name, text in plot_files(runs, src["experiments"]).items():
                    (folder / name).write_text(text)
    return written
