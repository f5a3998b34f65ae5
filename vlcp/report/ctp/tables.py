"""CTP's tables (mean and std over seeds), their formatting, the paper's tables to set beside them, and Fig. 4."""
from __future__ import annotations

import numpy as np
import pandas as pd

from vlcp.report.ctp.study import (ABLATION, COMPONENTS, FINAL, GROUPS, PAPER_SEQF_HOURS, PREFIX, REV_PREFIX,
                                   SWITCH_INDEX, TABLE2_KEYS, final_row, flop_ratios, mean_std, method_label,
                                   reversed_rows, run_bwt, table1_experiments, time_ratios, values)
from vlcp.report.paper import paper_table
from vlcp.report.results import curve


def stats_frame(rows: dict, fn, quantities=()) -> pd.DataFrame:
    """Columns (quantity, "mean" | "std") and ("seeds", "n") from rows {index: [results]} and
    fn(rs) -> {quantity: [value per seed]}; every one of `quantities` gets its columns."""
    cells = [{("seeds", "n"): len(rs or [])} | {(q, st): x for q, vs in (fn(rs) if rs else {}).items()
                                                for st, x in zip(("mean", "std"), mean_std(vs))}
             for rs in rows.values()]
    cols = list(dict.fromkeys([("seeds", "n"), *((q, st) for q in quantities for st in ("mean", "std")),
                               *(c for cell in cells for c in cell)]))
    index = pd.MultiIndex.from_tuples(list(rows)) if isinstance(next(iter(rows), None), tuple) else list(rows)
    df = pd.DataFrame([[cell.get(c, np.nan) for c in cols] for cell in cells], index=index,
                      columns=pd.MultiIndex.from_tuples(cols))
    return df.astype({("seeds", "n"): int})


def _finals(metrics):
    return lambda rs: {m: values(rs, m) for m in metrics if m in final_row(rs[0])}


def table1(runs: dict[str, list[dict]], groups: dict[str, list[str]], reference: str = "ctp-seqf",
           metrics=FINAL) -> pd.DataFrame:
    """Table 1: rows (group, method), time and FLOP ratios to SeqF, final metrics (missing runs: NaN, 0 seeds)."""
    ref = runs.get(reference, [])

    def fn(rs):
        return {"time × SeqF": time_ratios(rs, ref) if ref else [],
                "FLOPs × SeqF": flop_ratios(rs, ref) if ref else []} | _finals(metrics)(rs)

    rows = {(g, method_label(e)): runs.get(e, []) for g in GROUPS for e in groups.get(g, [])}
    return stats_frame(rows, fn, ["time × SeqF", "FLOPs × SeqF", *metrics])


def single_table(runs: dict[str, list[dict]], rows: dict, metrics=ABLATION) -> pd.DataFrame:
    """{row label: experiment} -> the final metrics' stats frame."""
    return stats_frame({k: runs.get(e, []) for k, e in rows.items()}, _finals(metrics), metrics)


def table2(runs: dict[str, list[dict]], experiments: list[str], metrics=ABLATION) -> pd.DataFrame:
    """Table 2: rows keyed by the switches (L_CMC, L_c, L_s, ER), with the run's name."""
    rows = dict(zip(TABLE2_KEYS, experiments))
    df = single_table(runs, rows, metrics).rename_axis(SWITCH_INDEX)
    df.insert(0, ("run", ""), list(rows.values()))
    return df


def bwt_table(runs: dict[str, list[dict]], rows: dict) -> pd.DataFrame:
    """CTP-style BWT (Rm and mAP@1 on cumulative pools; positive = forgetting) per row."""
    def fn(rs):
        return {f"BWT {m}": [run_bwt(r, m) for r in rs if r.get("final_cumulative")] for m in ("Rm", "mAP@1")}
    return stats_frame({k: runs.get(e, []) for k, e in rows.items()}, fn, ["BWT Rm", "BWT mAP@1"])


def start_and_end(runs: dict[str, list[dict]], experiments: list[str], metric: str = "Rm") -> pd.DataFrame:
    """Per task's own test pool, mean over seeds: the initialisation's score, then each present run's final one."""
    has = lambda r: (r.get("zero_shot") or {}).get("test") and (r.get("matrix") or {}).get("test")  # noqa: E731
    present = [e for e in experiments if runs.get(e) and all(has(r) for r in runs[e])]
    if not present:   # runs without task matrices (older formats) have nothing to show here
        return pd.DataFrame()
    first = runs[present[0]]
    cols = {"initialisation": np.mean([r["zero_shot"]["test"][metric] for r in first], axis=0)}
    cols |= {method_label(e): np.mean([r["matrix"]["test"][metric][-1] for r in runs[e]], axis=0) for e in present}
    return pd.DataFrame(cols, index=pd.Index(first[0]["tasks"], name="task"))


def pm(df: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """A `stats_frame` as "mean ± std" strings ("mean" for one seed, "missing" for none, "—" not
    computable); columns without a "mean" pass through."""
    cols, n, out = list(df.columns), df[("seeds", "n")].to_numpy(), {}
    for q in dict.fromkeys(c[0] for c in cols if c[0] != "seeds"):
        if (q, "mean") not in cols:
            out[q] = df[next(c for c in cols if c[0] == q)].tolist()
            continue
        m, sd = df[(q, "mean")].to_numpy(float), df[(q, "std")].to_numpy(float)
        out[q] = ["missing" if k == 0 else "—" if np.isnan(a) else f"{a:.{digits}f}" if k == 1
                  else f"{a:.{digits}f} ± {b:.{digits}f}" for k, a, b in zip(n, m, sd)]
    return pd.DataFrame(out, index=df.index, dtype=object)


def beside(ours: pd.DataFrame, paper: pd.DataFrame, columns) -> pd.DataFrame:
    """Columns (quantity, "ours" | "paper") for each of `columns`, on ours' index (missing cells blank)."""
    paper = paper[[c for c in columns if c in paper.columns]].reindex(ours.index)
    paper = paper.map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    cols = {(c, who): df[c] for c in columns for who, df in (("ours", ours), ("paper", paper)) if c in df.columns}
    return pd.DataFrame(cols, index=ours.index)


def paper_table1(name: str = "ctp_table1") -> pd.DataFrame:
    """The paper's Table 1 (or supp. Table 3) by (group, method), with the hours' ratio to SeqF's."""
    p = paper_table(name).set_index(["group", "method"]).rename(columns={"training_hours": "hours"})
    if "hours" in p.columns:
        p["hours × SeqF"] = p["hours"] / PAPER_SEQF_HOURS
    return p


def paper_table2() -> pd.DataFrame:
    return paper_table("ctp_table2").drop(columns=list(COMPONENTS)).set_axis(pd.Index(TABLE2_KEYS, name=SWITCH_INDEX))


def paper_by_label(name: str) -> pd.DataFrame:
    return paper_table(name).set_index("label")


def ranking(runs_default, runs_reversed, study: dict, metric: str = "Rm") -> pd.DataFrame:
    """Methods run in both orders (not the upper bound): mean `metric` and rank in each, and the paper's."""
    p1, p3 = (paper_table(t).set_index("method")[metric] for t in ("ctp_table1", "ctp_supp_table3"))
    rows = {}
    for (g, label), rev in reversed_rows(study).items():
        default = PREFIX + rev[len(REV_PREFIX):]
        if g == "upper bound" or not runs_default.get(default) or not runs_reversed.get(rev):
            continue
        rows[label] = {"group": g, "default (ours)": np.mean(values(runs_default[default], metric)),
                       "reversed (ours)": np.mean(values(runs_reversed[rev], metric)),
                       "default (paper)": p1.get(label, np.nan), "reversed (paper)": p3.get(label, np.nan)}
    df = pd.DataFrame.from_dict(rows, orient="index")
    return df.assign(**{f"rank {c}": df[c].rank(ascending=False, method="min") for c in df.columns[1:]})


def curves(runs: dict[str, list[dict]], rows: dict[str, str], metric: str = "Rm") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 4's values: (mean, std) over seeds of `metric` after each task (1-based), a column per present row."""
    both = {label: curve(runs[e], metric) for label, e in rows.items() if runs.get(e)}
    idx = pd.RangeIndex(1, 1 + max((len(m) for m, _ in both.values()), default=0), name="task")
    return tuple(pd.DataFrame({k: pd.Series(v[i], index=idx[:len(v[i])]) for k, v in both.items()}, index=idx)
                 for i in (0, 1))


def plot_fig4(runs: dict[str, list[dict]], study: dict, metrics=("Rm", "mAP@1")):
    """Fig. 4: each method's model θ_i on the merged test pools of tasks <= i, mean over seeds
    (band = ± std). Memory-free solid, memory-buffer dashed, the upper bound black."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    styles = {"memory-free": "-", "memory-buffer": "--", "upper bound": ":"}
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.4), squeeze=False)
    tasks = next((rs[0]["tasks"] for rs in runs.values() if rs and "tasks" in rs[0]), None)
    others = [x for x in map(method_label, table1_experiments(study)) if x not in ("CTP", "CTP+ER", "JointT")]
    palette = dict(zip(others, sns.color_palette("husl", len(others)))) | {"CTP": "crimson", "CTP+ER": "darkred"}
    for ax, metric in zip(axes[0], metrics):
        for g in GROUPS:
            mean, std = curves(runs, {method_label(e): e for e in study["table1"].get(g, [])}, metric)
            for label in mean.columns:
                y, s = mean[label].to_numpy(), std[label].to_numpy()
                colour = "k" if g == "upper bound" else palette.get(label)
                width = 2.6 if label in ("CTP", "CTP+ER") else 1.3
                ax.plot(mean.index, y, styles[g], marker="o", ms=3, color=colour, lw=width, label=label)
                ax.fill_between(mean.index, y - s, y + s, color=colour, alpha=0.12)
        ax.set(xlabel="after task i (evaluated on the tasks ≤ i)", ylabel=f"{metric} (%)")
        if tasks:
            ax.set_xticks(range(1, len(tasks) + 1), [t.split(" ")[0] for t in tasks], rotation=40, ha="right")
        ax.grid(alpha=0.3)
    last = axes[0, -1]
    if last.get_legend_handles_labels()[0]:
        last.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        last.text(0.5, 0.5, "no runs", ha="center", transform=last.transAxes)
    fig.tight_layout()
    return fig
