"""Figures from results and prepared data (matplotlib/seaborn; each returns its Figure)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from vlcp.report.results import curve, matrix


def contact_sheet(meta: dict, images: dict[str, np.ndarray], per_group: int = 6, seed: int = 0):
    """Rows = groups (tasks), columns = `per_group` emoji in each style."""
    rng = np.random.default_rng(seed)
    styles, groups = meta["styles"], meta["groups"]
    fig, axes = plt.subplots(len(groups), 1, figsize=(1.1 * per_group * len(styles), 1.3 * len(groups)))
    for ax, g in zip(np.atleast_1d(axes), groups):
        idx = [i for i, it in enumerate(meta["items"]) if it["group"] == g]
        pick = sorted(rng.choice(idx, size=min(per_group, len(idx)), replace=False))
        row = np.concatenate([np.concatenate([images[s][i] for i in pick], axis=1) for s in styles], axis=1)
        ax.imshow(row)
        ax.set_xticks([(k + 0.5) * per_group * images[styles[0]].shape[1] for k in range(len(styles))],
                      styles if g == groups[0] else [""] * len(styles))
        ax.xaxis.set_ticks_position("top")
        ax.set_yticks([])
        ax.set_ylabel(g, rotation=0, ha="right", va="center")
    fig.tight_layout()
    return fig


def group_sizes(meta: dict):
    """Items per group (stacked by split) and subgroup sizes (long tail)."""
    df = pd.DataFrame(meta["items"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4))
    df.groupby(["group", "split"]).size().unstack(fill_value=0).loc[meta["groups"]].plot.barh(
        stacked=True, ax=a)
    a.invert_yaxis()
    a.set(xlabel="emoji (items)", title="items per task (Unicode group), by split")
    sizes = df.groupby("subgroup").size().sort_values(ascending=False)
    b.bar(range(len(sizes)), sizes.values)
    b.set(yscale="log", xlabel=f"{len(sizes)} subgroups (classes), by size", ylabel="items", title="class sizes")
    fig.tight_layout()
    return fig


def cumulative_curves(runs: dict[str, list[dict]], metrics=("Rm", "mAP@10"), tasks: list[str] | None = None):
    """CTP Fig. 4: each model θ_i on the merged test pools of tasks 0..i (mean ± std over seeds)."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4))
    for ax, m in zip(np.atleast_1d(axes), metrics):
        for exp, rs in runs.items():
            mu, sd = curve(rs, m)
            x = np.arange(1, len(mu) + 1)
            ax.plot(x, mu, marker="o", label=exp)
            ax.fill_between(x, mu - sd, mu + sd, alpha=0.2)
        ax.set(xlabel="task", ylabel=f"{m} on tasks ≤ i (%)")
        ax.set_xticks(range(1, len(mu) + 1))
        if tasks:
            ax.set_xticklabels([t.split(" ")[0] for t in tasks], rotation=45, ha="right")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return fig


def task_curves(runs: dict[str, list[dict]], eval_set: str = "unseen_style", metric: str = "Rm",
                tasks_to_show=(0, 1, 2)):
    """How the score on early tasks evolves as later tasks train (forgetting made visible)."""
    fig, axes = plt.subplots(1, len(tasks_to_show), figsize=(5 * len(tasks_to_show), 3.6), sharey=True)
    for ax, j in zip(np.atleast_1d(axes), tasks_to_show):
        for exp, rs in runs.items():
            v = np.asarray([matrix(r, eval_set, metric)[:, j] for r in rs])
            x = np.arange(1, v.shape[1] + 1)
            ax.plot(x, v.mean(0), marker=".", label=exp)
            ax.fill_between(x, v.mean(0) - v.std(0), v.mean(0) + v.std(0), alpha=0.2)
        ax.axvline(j + 1, color="grey", ls=":")
        ax.set(title=f"task {j + 1}: {rs[0]['tasks'][j]}", xlabel="after training task")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel(f"{metric} ({eval_set}) %")
    np.atleast_1d(axes)[0].legend()
    fig.tight_layout()
    return fig


def matrices(runs: dict[str, list[dict]], eval_set: str = "unseen_style", metric: str = "Rm"):
    """Seed-mean accuracy matrix a[i][j] per method."""
    fig, axes = plt.subplots(1, len(runs), figsize=(5.2 * len(runs), 4.4))
    means = {exp: np.mean([matrix(r, eval_set, metric) for r in rs], 0) for exp, rs in runs.items()}
    vmax = max(a.max() for a in means.values())
    for ax, (exp, a) in zip(np.atleast_1d(axes), means.items()):
        sns.heatmap(a, ax=ax, annot=True, fmt=".0f", vmin=0, vmax=vmax, cbar=False, cmap="viridis",
                    annot_kws={"size": 7})
        ax.set(title=f"{exp}: {metric} on {eval_set}", xlabel="eval task j", ylabel="after task i")
    fig.tight_layout()
    return fig


def task_gain_bars(gains: dict, ylabel: str = "gain on the task's own pool (points)", title: str = ""):
    """Each task's gain on its own pool per run (`vlcp.report.teach.task_gains` frames, {label: frame})
    with ± noise error bars over a grey ± 2 × noise band; hatched: does not teach."""
    labels = list(gains)
    tasks = list(next(iter(gains.values()))["task"]) if gains else []
    x, width = np.arange(len(tasks)), 0.8 / max(len(labels), 1)
    fig, ax = plt.subplots(figsize=(min(18.0, max(6.0, 0.35 * len(tasks) * max(len(labels), 1) + 2)), 3.8))
    colours = sns.color_palette("tab10", len(labels))
    for k, (label, g) in enumerate(gains.items()):
        pos = x - 0.4 + width * (k + 0.5)
        band = 2 * g["noise"].fillna(0).to_numpy()
        ax.bar(pos, 2 * band, width * 0.95, bottom=-band, color="grey", alpha=0.18, lw=0,
               label="± 2 × noise" if k == 0 else None)
        ax.bar(pos, g["gain_mean"], width * 0.8, color=colours[k], label=label,
               hatch=[None if t else "//" for t in g["teaches"]], edgecolor="white", lw=0)
        ax.errorbar(pos, g["gain_mean"], yerr=g["noise"], fmt="none", ecolor="k", elinewidth=0.8, capsize=2)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(x, [str(t) if len(str(t)) <= 18 else str(t)[:17] + "…" for t in tasks], rotation=45, ha="right",
                  fontsize=7 if len(tasks) > 12 else 9)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=min(len(labels) + 1, 4))
    sources = "; ".join(sorted({s.split(" (n = ")[0] for g in gains.values() for s in g["noise_source"]}))
    fig.text(0.01, -0.02, f"noise: {sources}. Hatched: gain ≤ 2 × noise.", fontsize=8, ha="left", va="top")
    fig.tight_layout()
    return fig
