"""The studies' headline numbers and per-task curves as DVC metrics and plots (`vlcp report metrics`):
`metrics/<study>.json` (seed-mean headlines, the ledger's verdict counts and power), `plots/<study>.csv` and
`.png` (per-task curves, drawn: DVC shows an image without Vega's CDN) and `plots/<study>/` (a study's `plot_files`).
A study module's `run_headline`, `run_curve` and `metrics_summary` add to (or replace) the defaults."""
from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from vlcp.errors import VlcpError, unknown_name
from vlcp.report.ledger import VERDICTS
from vlcp.report.study import load_study, registered
from vlcp.utils import atomic_dir, atomic_path, read_json, read_results, write_json

POWER_KEYS = ("headroom", "sigma_d", "headroom_over_noise", "tasks_teaching", "tasks", "seeds")


def collect_runs(runs_dir: str | Path, seeds=None) -> dict[str, list[dict]]:
    """{experiment: [results by seed]} of every results.json under `runs_dir` (at `seeds`, when given)."""
    runs: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(Path(runs_dir).rglob("results.json")):
        r = read_results(path)
        if isinstance(r, dict) and "experiment" in r and (seeds is None or r.get("seed", 0) in seeds):
            runs[r["experiment"]].append(r)
    return {e: sorted(rs, key=lambda r: r.get("seed", 0)) for e, rs in sorted(runs.items())}


def headline(r: dict) -> dict[str, float]:
    """A group stream run's final Rm and mAP@1 on the cumulative test pool ({} without one)."""
    last = r["cumulative"][-1]["test"] if r.get("cumulative") else {}
    return {k: last[k] for k in ("Rm", "mAP@1") if k in last}


def curve(r: dict) -> list[float]:
    """A group stream run's cumulative Rm after every task."""
    return [row["test"]["Rm"] for row in r.get("cumulative", [])]


def mean_over_seeds(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k in rows[0] if all(row.get(k) is not None for row in rows)]
    return {k: round(float(np.mean([row[k] for row in rows])), 4) for k in keys}


def study_metrics(runs: dict[str, list[dict]], ledger: dict | None, headline=headline) -> dict:
    """A study's metrics file: its run count, each experiment's `mean_over_seeds` headline, and the verdict
    counts and power of its claims file (`ledger`; None: not written). No top-level key may name a
    dependency (`runs`): `dvc exp show` names a metric's column by its key alone."""
    counts = {}
    if ledger is not None:
        verdicts = [c.get("verdict") for c in ledger.get("claims", [])]
        counts = {v: verdicts.count(v) for v in VERDICTS}
        counts["other"] = len(verdicts) - sum(counts.values())
    p = (ledger or {}).get("power") or {}
    power = {k: round(float(p[k]), 4) for k in POWER_KEYS if k in p}
    return {"run_count": sum(map(len, runs.values())),
            "experiments": {e: mean_over_seeds([headline(r) for r in rs]) for e, rs in runs.items()},
            "claims": counts, **({"power": power} if power else {})}


def curves_csv(runs: dict[str, list[dict]], experiments: list[str] | None, curve=curve) -> str:
    """task, then one column per experiment (mean over seeds); empty cells past a shorter stream."""
    cols = {e: pd.Series([f"{v:.4f}" for v in np.mean([curve(r) for r in runs[e]], axis=0)] if runs[e] else [],
                         dtype=object) for e in (experiments or runs) if e in runs}
    table = pd.DataFrame(cols, columns=list(cols)).rename_axis("task")
    return table.set_axis(table.index + 1).to_csv(lineterminator="\n")


def curves_png(table: str, title: str) -> bytes:
    """`curves_csv`'s table drawn as one line per experiment against the task (PNG)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    curves = pd.read_csv(io.StringIO(table), index_col=0, float_precision="round_trip")
    ax = Figure(figsize=(6, 3.5), layout="constrained").subplots()
    for name, values in curves.items():   # (the empty cells past a shorter stream: NaN, not drawn)
        ax.plot(values.index, values, marker="o", label=name)
    ax.set(title=title, xlabel=curves.index.name)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(curves.columns):
        ax.legend(fontsize="small")
    buf = io.BytesIO()
    ax.figure.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def write_metrics(params: dict, root: str | Path = ".", metrics_dir: str = "metrics", plots_dir: str = "plots",
                  studies: list[str] | None = None) -> list[Path]:
    """Write the metrics and plot files of `studies` (default: every study; one without runs gets
    files with none, so DVC's outputs always exist), each file atomically. Returns the metrics files."""
    root, known = Path(root), registered()
    if unknown := [s for s in studies or [] if s not in known]:
        raise VlcpError("--study: " + unknown_name("study", unknown[0], known, "vlcp/report/studies/ holds them"))
    written = []
    for name in studies or known:
        study = load_study(name)
        src = study.metric_sources(params)
        runs = collect_runs(root / src["runs"], src.get("seeds")) if (root / src["runs"]).exists() else {}
        ledger = read_json(root / src["claims"]) if src["claims"] and (root / src["claims"]).exists() else None
        mine, own_curve, summary = study.own("run_headline"), study.own("run_curve"), study.own("metrics_summary")
        head = (lambda r: headline(r) | mine(r)) if callable(mine) else headline
        write_json(root / metrics_dir / f"{name}.json", study_metrics(runs, ledger, head)
                   | (summary(runs, study.block(params)) if callable(summary) else {}))
        written.append(root / metrics_dir / f"{name}.json")
        table = curves_csv(runs, src["experiments"],
                           (lambda r: own_curve(r) or curve(r)) if callable(own_curve) else curve)
        with atomic_path(root / plots_dir / f"{name}.csv") as tmp:
            tmp.write_text(table)
        with atomic_path(root / plots_dir / f"{name}.png") as tmp:
            tmp.write_bytes(curves_png(table, f"{study.title}: each experiment's curve"))
        plot_files = study.own("plot_files")
        if callable(plot_files):
            with atomic_dir(root / plots_dir / name) as folder:
                for file, text in plot_files(runs, src["experiments"]).items():
                    (folder / file).write_text(text)
    return written
