"""Performance summaries for `notebooks/performance.ipynb`: method overheads from run results,
evaluation-memory scaling and per-paper time budgets from `benchmarks/results/*.json`."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from vlcp.report.results import fill_pass_flops, flops_per_step, run_paths
from vlcp.utils import read_json

# Why a method's step can cost more time than its FLOPs say (torch's flop counter counts matrix
# products, convolutions and attention only): the uncounted work each method adds, by method name.
# Shown beside every row over the target; a method not listed says so.
UNCOUNTED_WORK = {
    "si": "per-step path-integral update over every parameter (elementwise)",
    "rwalk": "per-step path-integral scores and Fisher update over every parameter (elementwise)",
    "ewc": "penalty over every parameter each step (elementwise)",
    "mas": "penalty over every parameter each step (elementwise)",
    "afec": "two penalties (old and expanded model) over every parameter each step (elementwise)",
    "lwf": "distillation targets' softmax over the batch (small ops)",
    "kmeans": "k-means selection of the buffer after each task (scikit-learn, outside torch)",
    "icarl": "herding selection of exemplars after each task (small ops)",
    "lucir": "normalised-feature distillation and margin ranking over the batch (small ops)",
    "mof": "mean-of-features buffer selection after each task (small ops)",
    "er": "sampling and materialising replayed pairs (data path, no FLOPs)",
    "ctp": "momentum update over every parameter each step; queue updates (elementwise)",
    "ctp-er": "momentum update over every parameter each step (elementwise); replay sampling (data path)",
    "incclip": "building pseudo texts each step (sampling and tokenising, outside torch)",
    "ucir": "normalised-feature distillation and margin ranking over the batch (small ops)",
    "geodl": "geodesic interpolation of old and new features (small ops)",
    "co2l": "asymmetric contrastive masks and distillation over the batch (small ops)",
    "galore": "SVD of each projected gradient every few steps (not counted)",
    "dora": "weight norm of every adapted matrix each step (elementwise)",
    "vera": "shared random projections scaled per layer (small ops)",
    "ema-merge": "merging every parameter after each task (elementwise)",
    "ft-merge": "merging every parameter after each task (elementwise)",
    "zs-merge": "merging every parameter after each task (elementwise)",
    "lora": "low-rank adapter products (many small matmuls, far below the large ones' efficiency); freezing drops weight-gradient FLOPs, not the backward's memory traffic",
    "bitfit": "freezing drops weight-gradient FLOPs, not the backward's memory traffic through every layer",
    "lnfit": "freezing drops weight-gradient FLOPs, not the backward's memory traffic through every layer",
    "locked-image": "freezing drops the image tower's weight-gradient FLOPs; its forward activations are still kept",
    "locked-text": "freezing drops the text tower's weight-gradient FLOPs; its forward activations are still kept",
    "cll-joint": "AdamW over every language's embedding rows from the first step (elementwise; the stream grows its rows task by task)",
    "cll-lora": "low-rank adapter products per language (many small matmuls)",
    "cll-ptuning": "the per-language prompt encoder (many small ops)",
    "cll-oewc": "penalty over every trainable parameter each step (elementwise)",
    "cll-er": "sampling and materialising replayed captions (data path)",
    "cll-der": "sampling replayed captions and their stored features (data path)",
    "cll-mla": "per-language adapter routing (small ops)",
    "cll-dualprompt": "prompt-key matching and top-k selection (small ops)",
    "cll-codaprompt": "attention over the prompt components (small ops)",
}
TEIR_WORK = "TEIR's per-row gradient and weight-decay scaling (elementwise)"


def discover_runs(runs_dir: str | Path, experiments: list[str]) -> dict[str, list[dict]]:
    """{experiment: [results of every seed found]} (`report.results.run_paths`); experiments
    without runs are left out."""
    found = {exp: run_paths(runs_dir, exp) for exp in experiments}
    return {exp: [read_json(p) for p in paths] for exp, paths in found.items() if paths}


def study_overheads(runs: dict[str, list[dict]], reference: str, tolerance: float = 1.1) -> pd.DataFrame:
    """`method_overheads` of one study's runs, with each row's method and, for rows over the target,
    the work torch's flop counter does not see (`UNCOUNTED_WORK`). Experiments whose runs lack
    per-task FLOP counts (older results) are left out; a reference without them is an error."""
    usable = {e: rs for e, rs in runs.items() if all(t.get("flops_per_step") for r in rs for t in r["train"])}
    if reference not in usable:
        raise ValueError(f"study reference {reference!r}: no runs with FLOP counts")
    df = method_overheads(usable, reference, tolerance)
    df.insert(0, "method", [usable[e][0]["config"]["method"]["name"] for e in df.index])
    df.insert(1, "seeds", [len(usable[e]) for e in df.index])
    notes = []
    for exp, ok in zip(df.index, df["within"]):
        m = usable[exp][0]["config"]["method"]
        work = [w for w in (UNCOUNTED_WORK.get(m["name"]), TEIR_WORK if m.get("teir") else None) if w]
        notes.append("" if ok else "; ".join(work) or "not analysed")
    df["likely uncounted work (rows over target)"] = notes
    return df


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
