"""Performance summaries for `notebooks/performance.ipynb`: method overheads from run results,
evaluation-memory scaling and per-paper time budgets from `benchmarks/results/*.json`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from vlcp.report.results import fill_pass_flops, flops_per_step


def step_seconds(r: dict) -> float:
    """Training seconds per optimiser step of one run (evaluation excluded)."""
    return sum(t["seconds"] for t in r["train"]) / sum(t["steps"] for t in r["train"])


def method_overheads(runs: dict[str, list[dict]], reference: str = "seqf", tolerance: float = 1.1) -> pd.DataFrame:
    """Per experiment, relative to `reference`: time per step (mean over seeds), FLOPs per step
    (torch's flop counter, per-task passes included: `report.results.flops_per_step`) and peak memory; `within` = time ratio <= FLOP ratio x tolerance."""
    ref = runs[reference]
    t0 = np.mean([step_seconds(r) for r in ref])
    f0 = flops_per_step(fill_pass_flops(ref)[0])
    m0 = np.mean([max(t["peak_memory_mb"] for t in r["train"]) for r in ref])
    rows = {}
    for exp, rs in runs.items():
        t = [step_seconds(r) for r in rs]
        mem = np.mean([max(x["peak_memory_mb"] for x in r["train"]) for r in rs])
        flops = flops_per_step(fill_pass_flops(rs)[0])
        time_ratio, flop_ratio = np.mean(t) / t0, flops / f0
        rows[exp] = {"ms/step": 1e3 * np.mean(t), "ms/step std": 1e3 * (np.std(t, ddof=1) if len(t) > 1 else 0.0),
                     "GFLOPs/step": flops / 1e9, "time ratio": time_ratio,
                     "FLOP ratio": flop_ratio, "peak MB": mem, "memory ratio": mem / m0,
                     "within": bool(time_ratio <= flop_ratio * tolerance)}
    return pd.DataFrame.from_dict(rows, orient="index")


def loglog_slope(n, y) -> float:
    """Least-squares slope of log(y) against log(n): 1 = linear growth, 2 = quadratic."""
    return float(np.polyfit(np.log(np.asarray(n, float)), np.log(np.asarray(y, float)), 1)[0])


def eval_memory_frame(bench: dict) -> pd.DataFrame:
    """Rows of `eval_memory.json` as a (n x path) table of seconds and peak MB."""
    df = pd.DataFrame([r for r in bench["rows"] if "peak_mb" in r])
    return df.pivot(index="n", columns="path", values=["seconds", "peak_mb"])


def budget_table(pipeline: dict, budgets: dict[str, dict]) -> pd.DataFrame:
    """Measured minutes of each paper's DVC stages (matched by stage-name prefix) against its budget.
    A paper with no measured stage yet shows NaN and `status` "not built"."""
    stages = pipeline["stages"]
    rows = {}
    for paper, b in budgets.items():
        secs = [s for name, s in stages.items() if any(name == p or name.startswith(p + "@") for p in b["stages"])]
        measured = sum(secs) / 60 if secs else float("nan")
        rows[paper] = {"budget min": b["minutes"], "measured min": measured, "stages": len(secs),
                       "status": "not built" if not secs else ("met" if measured <= b["minutes"] else "NOT met")}
    return pd.DataFrame.from_dict(rows, orient="index")
