"""FoMo-in-Flux's figures and tables from our runs (pure functions of results dicts; the
notebook `fomo_figures` lays them out beside the paper's numbers).

A run's trajectory is the zero-shot point θ0 followed by (A_KA, A_ZS) after every task.
Trajectory plots carry the paper's furniture: the zero-shot start (star), the joint-training
upper bound (star), the straight line between them (the "linear trade-off") and contours of
GM = √(A_KA·A_ZS).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from vlcp.eval import continual
from vlcp.utils import read_json


def load_study(runs_dir: str | Path, studies: dict[str, list[str]], seed: int = 0) -> dict[str, dict]:
    """{experiment: results} over every study (runs_dir/<study>/<experiment>/seed<S>/results.json);
    missing runs are left out (the notebook says which)."""
    out = {}
    for study, exps in studies.items():
        for e in exps:
            p = Path(runs_dir) / study / e / f"seed{seed}" / "results.json"
            if p.exists():
                out[e] = read_json(p)
    return out


def trajectory(r: dict) -> pd.DataFrame:
    """Rows: after task 0 (= θ0, zero-shot), 1, …, T; columns A_KA, A_ZS, GM."""
    rows = [r["zero_shot"]] + r["trajectory"]
    return pd.DataFrame([{k: row[k] for k in ("A_KA", "A_ZS", "GM")} for row in rows],
                        index=pd.RangeIndex(len(rows), name="after task"))


def endpoint(r: dict) -> dict[str, float]:
    last = r["trajectory"][-1]
    return {k: last[k] for k in ("A_KA", "A_ZS", "GM")}


def macro_floor(r: dict, role: str, row: dict | None = None) -> float:
    """Single-seed noise floor of a difference of two dataset-macro averages: 2·√2 × the
    binomial standard error of the macro mean (datasets independent, each score a proportion
    over its `n` test images or texts). An approximation: one seed, no measured spread."""
    row = row or r["trajectory"][-1]
    var = []
    for name, info in r["datasets"].items():
        if info["role"] == role:
            p = row["datasets"][name] / 100
            var.append(p * (1 - p) / info["n"])
    return float(2 * np.sqrt(2) * np.sqrt(np.sum(var)) / len(var) * 100)


def summary(runs: dict[str, dict], zero_shot: dict, joint: dict | None) -> pd.DataFrame:
    """Endpoint A_KA, A_ZS, GM per run, their change from θ0, the distance above the
    zero-shot–joint line, the budget (steps per task, memory multiplier) and training time."""
    rows = {}
    for e, r in runs.items():
        end = endpoint(r)
        row = dict(end)
        row["ΔA_KA"] = end["A_KA"] - zero_shot["A_KA"]
        row["ΔA_ZS"] = end["A_ZS"] - zero_shot["A_ZS"]
        if joint is not None and joint["A_KA"] != zero_shot["A_KA"]:
            row["above line"] = continual.above_trade_off_line((end["A_KA"], end["A_ZS"]),
                                                               (zero_shot["A_KA"], zero_shot["A_ZS"]),
                                                               (joint["A_KA"], joint["A_ZS"]))
        row["steps/task"] = r["steps_per_task"][0]
        row["memory ×"] = r["budget"]["memory_multiplier"]
        row["train s"] = sum(t["seconds"] for t in r["train"])
        rows[e] = row
    return pd.DataFrame(rows).T


def budget_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Table 4's analogue: per method, FLOPs per step (forward + backward, torch's counter),
    per-task FLOPs (Fisher passes), training memory by tensor accounting, the multiplier
    relative to full fine-tuning, MAFs per step, and the steps per task it buys."""
    rows = {}
    for e, r in runs.items():
        b = r["budget"]
        m = b["method"]["memory"]
        rows[e] = {"MFLOPs/step": b["method"]["flops"] / 1e6, "MFLOPs/task": b["method"].get("task_flops", 0) / 1e6,
                   "memory MB": m["total"] / 2**20, "params MB": m["parameters"] / 2**20,
                   "grads MB": m["gradients"] / 2**20, "optimizer MB": m["optimizer"] / 2**20,
                   "activations MB": m["activations"] / 2**20, "method state MB": m["method"] / 2**20,
                   "memory multiplier": b["memory_multiplier"], "MAFs/step (M)": b["mafs"] / 1e6,
                   "steps/task": r["steps_per_task"][0]}
    return pd.DataFrame(rows).T


# Table 4's memory order: locked-image < LNFit/BitFit < LoRA < full FT ≤ EWC/SI (keys: Table 4's rows)
MEMORY_ORDER = ("locked-image", "LNFit", "BitFit", "LoRA, r=4", "full-ft", "EWC", "SI")


def memory_order_holds(mult: dict[str, float]) -> bool:
    """Whether memory multipliers keyed by Table 4's row names keep the paper's order:
    locked-image below LNFit and BitFit, both below LoRA r=4, LoRA below full fine-tuning,
    full fine-tuning at most EWC and SI."""
    li, ln, bf, lora, ft, ewc, si = (mult[k] for k in MEMORY_ORDER)
    return li < min(ln, bf) and max(ln, bf) < lora < ft <= min(ewc, si)


def paper_scale_budget(bench: dict, table4: pd.DataFrame) -> pd.DataFrame:
    """`benchmarks/fomo_memory.py`'s measurement at the paper's architecture and batch beside
    the paper's Table 4 (`table4` indexed by Table 4's row names)."""
    rows = {}
    for name, r in bench["methods"].items():
        rows[name] = {"GFLOPs/step (ours)": r["flops_per_step_at_target"] / 1e9,
                      "GFLOPs/step (paper)": table4.loc[name, "per_task_gflops"] if name in table4.index else np.nan,
                      "memory GiB (ours, fp32 accounting)": r["memory_at_target"]["total"] / 2**30,
                      "memory GB (paper, GPU peak)": table4.loc[name, "max_memory_gb"] if name in table4.index else np.nan,
                      "multiplier (ours)": r["memory_multiplier"],
                      "multiplier (paper)": table4.loc[name, "memory_multiplier"] if name in table4.index else np.nan}
    return pd.DataFrame(rows).T


def gm_contours(ax, xlim, ylim, levels=None):
    x = np.linspace(*xlim, 100)
    y = np.linspace(*ylim, 100)
    xx, yy = np.meshgrid(x, y)
    cs = ax.contour(xx, yy, np.sqrt(np.clip(xx, 0, None) * np.clip(yy, 0, None)), levels=levels or 8,
                    colors="grey", linewidths=0.5, alpha=0.5)
    ax.clabel(cs, fontsize=6, fmt="%.0f")


def trajectory_plot(ax, runs: dict[str, dict], zero_shot: dict, joint: dict | None, title: str = "",
                    labels: dict[str, str] | None = None):
    """A_KA (x) vs A_ZS (y) per task for each run, with θ0, the joint point, the linear
    trade-off line and GM contours."""
    labels = labels or {}
    xs, ys = [zero_shot["A_KA"]], [zero_shot["A_ZS"]]
    for e, r in runs.items():
        t = trajectory(r)
        ax.plot(t["A_KA"], t["A_ZS"], marker="o", ms=2.5, lw=1.2, label=labels.get(e, e))
        ax.plot(t["A_KA"].iloc[-1], t["A_ZS"].iloc[-1], marker="s", ms=5, color=ax.lines[-1].get_color())
        xs += list(t["A_KA"])
        ys += list(t["A_ZS"])
    ax.plot(zero_shot["A_KA"], zero_shot["A_ZS"], marker="*", ms=14, color="gold", mec="k", ls="", label="zero-shot θ0")
    if joint is not None:
        ax.plot(joint["A_KA"], joint["A_ZS"], marker="*", ms=14, color="crimson", mec="k", ls="", label="joint")
        ax.plot([zero_shot["A_KA"], joint["A_KA"]], [zero_shot["A_ZS"], joint["A_ZS"]], ls=":", color="k", lw=1)
        xs.append(joint["A_KA"])
        ys.append(joint["A_ZS"])
    pad = 2.0
    xlim, ylim = (min(xs) - pad, max(xs) + pad), (min(ys) - pad, max(ys) + pad)
    gm_contours(ax, xlim, ylim)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel("A_KA (knowledge accumulation, %)")
    ax.set_ylabel("A_ZS (zero-shot retention, %)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2)


def schedule_curves(schedules: list[str], tasks: int = 5, steps: int = 100, base_lr: float = 1.0,
                    min_lr: float = 0.0, warmup_frac: float = 0.1, cooldown_frac: float = 0.1) -> pd.DataFrame:
    """Fig. 10's curves: the LR at every global step of `tasks` equal tasks, per schedule."""
    from vlcp.train.schedules import SCHEDULES, Plan

    plan = Plan.from_fractions([steps] * tasks, base_lr, min_lr, warmup_frac, cooldown_frac)
    return pd.DataFrame({name: [SCHEDULES[name](plan, t, s) for t in range(tasks) for s in range(steps)]
                         for name in schedules})


def trajectory_area(r: dict) -> float:
    """Mean GM over the trajectory's points after θ0 (how favourable a whole trajectory is,
    not just its end)."""
    return float(np.mean([row["GM"] for row in r["trajectory"]]))
