"""CTP's Fig. 4: each method's curve on the cumulative test pools, and its plot."""
from __future__ import annotations

import numpy as np
import pandas as pd

from vlcp.report.ctp.study import GROUPS, method_label, table1_experiments
from vlcp.report.results import curve


def curves(runs: dict[str, list[dict]], rows: dict[str, str], metric: str = "Rm") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 4: (mean, std) over seeds of `metric` on the cumulative pool after each task; index =
    task number (1-based), columns = row labels (present runs only)."""
    mean, std = {}, {}
    for label, e in rows.items():
        if runs.get(e):
            mean[label], std[label] = curve(runs[e], metric)
    idx = pd.RangeIndex(1, 1 + max((len(v) for v in mean.values()), default=0), name="task")
    return (pd.DataFrame({k: pd.Series(v, index=idx[:len(v)]) for k, v in mean.items()}, index=idx),
            pd.DataFrame({k: pd.Series(v, index=idx[:len(v)]) for k, v in std.items()}, index=idx))


def plot_fig4(runs: dict[str, list[dict]], study: dict, metrics=("Rm", "mAP@1")):
    """Fig. 4: each method's model θ_i on the merged test pools of tasks <= i, mean over seeds
    (band = ± std). Memory-free solid, memory-buffer dashed, the upper bound black."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    styles = {"memory-free": "-", "memory-buffer": "--", "upper bound": ":"}
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.4))
    tasks = next((rs[0]["tasks"] for rs in runs.values() if rs and "tasks" in rs[0]), None)
    labels = [method_label(e) for e in table1_experiments(study)]
    others = [x for x in labels if x not in ("CTP", "CTP+ER", "JointT")]
    palette = dict(zip(others, sns.color_palette("husl", len(others)))) | {"CTP": "crimson", "CTP+ER": "darkred"}
    for ax, metric in zip(np.atleast_1d(axes), metrics):
        for g in GROUPS:
            rows = {method_label(e): e for e in study["table1"].get(g, [])}
            mean, std = curves(runs, rows, metric)
            for label in mean.columns:
                y, s = mean[label].to_numpy(), std[label].to_numpy()
                colour = "k" if g == "upper bound" else palette.get(label)
                width = 2.6 if label in ("CTP", "CTP+ER") else 1.3
                ax.plot(mean.index, y, styles[g], marker="o", ms=3, color=colour, lw=width, label=label)
                ax.fill_between(mean.index, y - s, y + s, color=colour, alpha=0.12)
        ax.set_xlabel("after task i (evaluated on the tasks ≤ i)")
        ax.set_ylabel(f"{metric} (%)")
        if tasks:
            ax.set_xticks(range(1, len(tasks) + 1), [t.split(" ")[0] for t in tasks], rotation=40, ha="right")
        ax.grid(alpha=0.3)
    last = np.atleast_1d(axes)[-1]
    if last.get_legend_handles_labels()[0]:
        last.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        last.text(0.5, 0.5, "no runs", ha="center", transform=last.transAxes)
    fig.tight_layout()
    return fig
