"""CTP's tables, Fig. 4 and claims ledger from our runs (pure functions of results dicts; the
notebook `ctp_tables` lays them out beside the paper's numbers, from `refs/ctp_*.csv`).

What is read from a run's `results.json`:
- `cumulative[i]["test"]`: the model after task i on the merged test pools of tasks <= i (CTP's
  protocol): TR@K, IR@K, Rm and mAP@N with CTP's "hits" normaliser (`mAP@N`) and the standard
  min(N, |relevant|) one (`mAP_std@N`). The final row of a run is `cumulative[-1]["test"]`.
- `final_cumulative[i]`: the final model on the pool of tasks <= i (CTP's eval.py "BWT":
  sum_i (m(θ_i, D<=i) - m(θ_T, D<=i)) / (T - 1), positive = forgetting).
- `train[i]["seconds"]` (training wall time, evaluation excluded) and `flops_per_step` (per task,
  with the method's per-task passes: `report.results.flops_per_step`).

Definitions used by the tables and the ledger (all stated again in the notebook):
- Mean ± std over seeds: sample std (ddof = 1); one seed shows no ±.
- Time column: per seed, a method's total training seconds / SeqF's of the same seed (the same
  run environment), then mean ± std over seeds; FLOPs column: FLOPs per step / SeqF's.
- Verdicts (`vlcp.report.claims`): each claim is an effect (a − b with its 95 % interval, paired
  by seed for Table 1's seeds; one run each with sd = √2 × the pooled Table 1 seed std of Rm for
  the single-seed tables) judged by `greater_verdict`, an equivalence within a stated margin
  (`equivalent_verdict`), a cost target (`target_verdict`), or `not_testable` with the reason; the
  reversed-order ranking by a permutation test (`null_verdict`, here).
"""
from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from vlcp.eval.continual import ctp_bwt
from vlcp.report.claims import (Claim, Effect, claim_from, combine, effect, equivalent_verdict, greater_verdict,
                                not_testable, target_verdict)
from vlcp.report.refs import paper_table
from vlcp.report.results import MAP, MAP_STD, RETRIEVAL, fill_pass_flops, find_run, flops_per_step
from vlcp.utils import read_json

FINAL = RETRIEVAL + MAP + MAP_STD          # the final row: TR/IR@1/5/10, Rm, mAP@1/5/10 (hits and standard)
ABLATION = ["TR@1", "IR@1", "Rm", "mAP@1"]  # the columns of Tables 2-3 and supp. Table 2
GROUPS = ("memory-free", "memory-buffer", "upper bound")

# method key (experiment = "ctp-<key>", reversed order "ctp-rev-<key>") -> the paper's row name
LABELS = {"jointt": "JointT", "seqf": "SeqF", "si": "SI", "mas": "MAS", "ewc": "EWC", "afec": "AFEC",
          "lwf": "LWF", "rwalk": "RWalk", "ctp": "CTP", "mof": "MoF", "lucir": "LUCIR", "er": "ER",
          "kmeans": "Kmeans", "icarl": "ICARL", "ctp-er": "CTP+ER"}
PREFIX, REV_PREFIX = "ctp-", "ctp-rev-"

# Table 2's rows in the paper's order: switches (L_CMC, L_c, L_s, ER)
SWITCHES = [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0), (1, 0, 1, 0), (1, 1, 1, 0), (1, 1, 1, 1)]
COMPONENTS = ("L_CMC", "L_c", "L_s", "ER")
TABLE3_ROWS = ("only_prev", "only_cur", "no_queue", "no_selfmask", "ctp")

# the paper's numbers the ledger's thresholds are anchored to (ctp.md §5.1-5.2, Table 1)
PAPER_SEQF_HOURS, PAPER_CTP_HOURS = 3.4, 4.0
PAPER_TIME_TARGET = round(PAPER_CTP_HOURS / PAPER_SEQF_HOURS, 2)   # 1.18
# two hours the paper prints equal (CTP 4.0 = LwF 4.0) may differ by up to 0.1 h: 0.03 of SeqF's 3.4 h
PAPER_HOURS_RESOLUTION = round(0.1 / PAPER_SEQF_HOURS, 2)
PAPER_GAP = {"Rm": 23.22, "mAP@1": 1.65}                          # JointT - SeqF, §5.2
PAPER_JOINTT = {"Rm": 80.08, "mAP@1": 63.79}                      # Table 1

DEFAULT_STUDY = {
    "runs": "runs-ctp",
    "seeds": [0, 1, 2],
    "ablation_seeds": [0],
    "noise_floor": "auto",
    "noise_floor_default": 1.0,
    "time_tolerance": 1.1,
    "time_target": PAPER_TIME_TARGET,
    "time_margin": PAPER_HOURS_RESOLUTION,   # "CTP costs no more than": 0.1 h (the paper's resolution) / 3.4 h
    "momentum_margin": "auto",    # Rm points, or auto: the paper's range over m (0.30 of 64.87) × our CTP Rm
    "rank_alpha": 0.05,           # reversed order: τ must lie in the top 5 % of τ under random within-group orders
    "gap": {"rm_min_frac": 0.5, "map_max_frac": 2.0},
    "table1": {
        "memory-free": ["ctp-seqf", "ctp-si", "ctp-mas", "ctp-ewc", "ctp-afec", "ctp-lwf", "ctp-rwalk", "ctp-ctp"],
        "memory-buffer": ["ctp-mof", "ctp-lucir", "ctp-er", "ctp-kmeans", "ctp-icarl", "ctp-ctp-er"],
        "upper bound": ["ctp-jointt"],
    },
    "reference": "ctp-seqf",
    "ctp": "ctp-ctp",
    "ctp_er": "ctp-ctp-er",
    "table2": ["ctp-seqf", "ctp-abl-cmc", "ctp-abl-lc", "ctp-abl-cmc-lc", "ctp-abl-cmc-ls", "ctp-ctp", "ctp-ctp-er"],
    "table3": {"only_prev": "ctp-only-prev", "only_cur": "ctp-only-cur", "no_queue": "ctp-no-queue",
               "no_selfmask": "ctp-no-selfmask", "ctp": "ctp-ctp"},
    "momentum": {0.7: "ctp-m07", 0.8: "ctp-m08", 0.9: "ctp-ctp", 0.99: "ctp-m099", 0.995: "ctp-m0995"},
    "reversed": ["seqf", "lwf", "ewc", "ctp", "er", "icarl", "ctp-er"],
}


# ----------------------------------------------------------------------------------------------
# configuration and loading

def study_config(params_file: str | Path | None = "params.yaml", **overrides) -> dict:
    """DEFAULT_STUDY, updated by `report.ctp` of `params_file` (when the file and block exist),
    then by the non-None `overrides` (the notebook's papermill parameters)."""
    study = copy.deepcopy(DEFAULT_STUDY)
    if params_file and Path(params_file).exists():
        from vlcp.config import load_params

        study.update((load_params(params_file).get("report") or {}).get("ctp") or {})
    study.update({k: v for k, v in overrides.items() if v is not None})
    study["momentum"] = {float(k): v for k, v in study["momentum"].items()}
    return study


def table1_experiments(study: dict) -> list[str]:
    return [e for g in GROUPS for e in study["table1"].get(g, [])]


def single_seed_experiments(study: dict) -> list[str]:
    """Every experiment of Tables 2-3 and supp. Tables 2-3 (run with `ablation_seeds`)."""
    exps = list(study["table2"]) + list(study["table3"].values()) + list(study["momentum"].values())
    exps += [REV_PREFIX + m for m in study["reversed"]]
    return list(dict.fromkeys(exps))


def list_mismatch(study: dict) -> str:
    """When params.yaml also lists the experiments flat for DVC's run matrices (`experiments`,
    `ablation_experiments`), what those lists lack or add compared with the tables' ("" if none)."""
    out = []
    for key, want in (("experiments", table1_experiments(study)), ("ablation_experiments", single_seed_experiments(study))):
        if key not in study:
            continue
        have = list(study[key])
        if key == "ablation_experiments":   # Table 1's runs also serve the single-seed tables
            want = [e for e in want if e not in table1_experiments(study)]
        lack, extra = [e for e in want if e not in have], [e for e in have if e not in want]
        if lack or extra:
            out.append(f"`{key}` lacks {', '.join(lack) or 'nothing'} and adds {', '.join(extra) or 'nothing'}")
    return "; ".join(out)


def load_available(runs_dir: str | Path, experiments, seeds) -> tuple[dict[str, list[dict]], dict[str, list[int]]]:
    """({experiment: [results of each seed found]}, {experiment: [missing seeds]}). Experiments
    with no seed at all are left out of the first dict; nothing here raises for a missing run."""
    runs, missing = {}, {}
    for exp in dict.fromkeys(experiments):
        found = []
        for s in seeds:
            path = find_run(runs_dir, exp, s)
            if path is not None:
                found.append(read_json(path))
            else:
                missing.setdefault(exp, []).append(s)
        if found:
            runs[exp] = found
    return runs, missing


def describe_missing(missing: dict[str, list[int]], experiments=None) -> str:
    """'a (seeds 1, 2); b (seed 0)' for the experiments of `experiments` (all when None)."""
    keep = [e for e in (experiments if experiments is not None else missing) if e in missing]
    return "; ".join(f"{e} (seed{'s' if len(missing[e]) > 1 else ''} {', '.join(map(str, missing[e]))})"
                     for e in dict.fromkeys(keep))


def method_label(exp: str) -> str:
    """'ctp-ctp-er' -> 'CTP+ER', 'ctp-rev-lwf' -> 'LWF'; other names are returned unchanged."""
    for prefix in (REV_PREFIX, PREFIX):
        if exp.startswith(prefix) and exp[len(prefix):] in LABELS:
            return LABELS[exp[len(prefix):]]
    return exp


def group_of(study: dict, exp: str) -> str | None:
    return next((g for g, exps in study["table1"].items() if exp in exps), None)


# ----------------------------------------------------------------------------------------------
# per-run quantities

def final_row(r: dict, metrics=FINAL) -> dict[str, float]:
    """The model after the last task on the whole stream's pools (the last cumulative row)."""
    cell = r["cumulative"][-1]["test"]
    return {m: float(cell[m]) for m in metrics if m in cell}


def mean_std(values) -> tuple[float, float]:
    """Mean and sample std (ddof 1; 0 for one value; NaN, NaN for none)."""
    v = np.asarray([x for x in values if x is not None and not np.isnan(x)], float)
    if len(v) == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def values(rs: list[dict], metric: str) -> list[float]:
    """The final `metric` of every seed."""
    return [final_row(r)[metric] for r in rs]


def train_seconds(r: dict) -> float:
    return float(sum(t["seconds"] for t in r["train"]))


def _by_seed(rs: list[dict]) -> dict:
    return {r.get("seed", i): r for i, r in enumerate(rs)}


def time_ratios(rs: list[dict], ref: list[dict]) -> list[float]:
    """Per seed present in both: total training seconds / the reference's (same seed)."""
    a, b = _by_seed(rs), _by_seed(ref)
    return [train_seconds(a[s]) / train_seconds(b[s]) for s in a if s in b and train_seconds(b[s]) > 0]


def flop_ratios(rs: list[dict], ref: list[dict]) -> list[float]:
    a, b = _by_seed(fill_pass_flops(rs)), _by_seed(fill_pass_flops(ref))
    return [flops_per_step(a[s]) / flops_per_step(b[s]) for s in a if s in b]


def run_bwt(r: dict, metric: str = "Rm") -> float:
    """CTP's eval.py "BWT" on cumulative pools (positive = forgetting)."""
    return ctp_bwt([c["test"][metric] for c in r["cumulative"]], [c[metric] for c in r["final_cumulative"]])


# ----------------------------------------------------------------------------------------------
# tables (numeric frames: columns (quantity, "mean" | "std"), plus ("seeds", "n"))

def stats_frame(rows: dict, fn, quantities=()) -> pd.DataFrame:
    """rows: {index: list of results (empty = missing)}; fn(rs) -> {quantity: [value per seed]}.
    Every quantity of `quantities` gets its columns even when no row has it (NaN)."""
    out = {}
    for key, rs in rows.items():
        cells = {("seeds", "n"): len(rs or [])}
        for q, vs in (fn(rs) if rs else {}).items():
            m, s = mean_std(vs)
            cells[(q, "mean")], cells[(q, "std")] = m, s
        out[key] = cells
    cols = [("seeds", "n")] + [(q, st) for q in quantities for st in ("mean", "std")]
    cols += [c for cells in out.values() for c in cells if c not in cols]
    cols = list(dict.fromkeys(cols))
    index = pd.MultiIndex.from_tuples(list(rows)) if isinstance(next(iter(rows), None), tuple) else list(rows)
    df = pd.DataFrame([[out[k].get(c, np.nan) for c in cols] for k in rows], index=index,
                      columns=pd.MultiIndex.from_tuples(cols))
    df[("seeds", "n")] = df[("seeds", "n")].astype(int)
    return df


def _finals(metrics):
    return lambda rs: {m: values(rs, m) for m in metrics if m in final_row(rs[0])}


def table1(runs: dict[str, list[dict]], groups: dict[str, list[str]], reference: str = "ctp-seqf",
           metrics=FINAL) -> pd.DataFrame:
    """Table 1 (paper layout): rows (group, method), the time and FLOP ratios to SeqF, and the final
    retrieval metrics, mean and std over seeds. Missing runs keep their row (NaN, 0 seeds)."""
    ref = runs.get(reference, [])

    def fn(rs):
        out = {"time × SeqF": time_ratios(rs, ref) if ref else [],
               "FLOPs × SeqF": flop_ratios(rs, ref) if ref else []}
        return out | _finals(metrics)(rs)

    rows = {(g, method_label(e)): runs.get(e, []) for g in GROUPS for e in groups.get(g, [])}
    return stats_frame(rows, fn, ["time × SeqF", "FLOPs × SeqF", *metrics])


def single_table(runs: dict[str, list[dict]], rows: dict, metrics=ABLATION) -> pd.DataFrame:
    """rows: {row label: experiment}; mean (and std) of the final metrics."""
    return stats_frame({k: runs.get(e, []) for k, e in rows.items()}, _finals(metrics), metrics)


SWITCH_INDEX = " ".join(COMPONENTS)   # the name of Table 2's index: "L_CMC L_c L_s ER"


def switch_label(switches) -> str:
    """(1, 1, 0, 0) or ("yes", "yes", "no", "no") -> "✓ ✓ × ×" (Table 2's row key)."""
    return " ".join("✓" if s in (1, True, "yes", "✓") else "×" for s in switches)


def table2_rows(experiments: list[str]) -> dict[str, str]:
    """{"✓ × × ×" (L_CMC, L_c, L_s, ER): experiment}, paper row order."""
    return {switch_label(sw): e for sw, e in zip(SWITCHES, experiments)}


def table2(runs: dict[str, list[dict]], experiments: list[str], metrics=ABLATION) -> pd.DataFrame:
    """Table 2: rows keyed by the switches (L_CMC, L_c, L_s, ER), with the run's name."""
    rows = table2_rows(experiments)
    df = single_table(runs, rows, metrics)
    df.index.name = SWITCH_INDEX
    df.insert(0, ("run", ""), list(rows.values()))
    return df


def table3_rows(table3: dict[str, str]) -> dict[str, str]:
    labels = paper_table("ctp_table3").set_index("row")["label"]
    return {labels[k]: table3[k] for k in TABLE3_ROWS if k in table3}


def momentum_rows(momentum: dict[float, str], table3: dict[str, str]) -> dict[str, str]:
    """supp. Table 2's rows: the single-way updates, then m = ... (0.9 is CTP's default)."""
    rows = {"only θ(t-1)": table3.get("only_prev"), "only θt": table3.get("only_cur")}
    rows |= {f"m={m:g}": e for m, e in sorted(momentum.items())}
    return {k: v for k, v in rows.items() if v}


def reversed_rows(study: dict) -> dict[tuple, str]:
    """{(group, label): ctp-rev-<m>} in Table 1's order."""
    out = {}
    for g in GROUPS:
        for e in study["table1"].get(g, []):
            key = e[len(PREFIX):] if e.startswith(PREFIX) else e
            if key in study["reversed"]:
                out[(g, method_label(e))] = REV_PREFIX + key
    return out


def bwt_table(runs: dict[str, list[dict]], rows: dict) -> pd.DataFrame:
    """CTP-style BWT (Rm and mAP@1 on cumulative pools; positive = forgetting) per row."""
    def fn(rs):
        rs = [r for r in rs if r.get("final_cumulative")]
        return {"BWT Rm": [run_bwt(r, "Rm") for r in rs], "BWT mAP@1": [run_bwt(r, "mAP@1") for r in rs]}
    return stats_frame({k: runs.get(e, []) for k, e in rows.items()}, fn, ["BWT Rm", "BWT mAP@1"])


def curves(runs: dict[str, list[dict]], rows: dict[str, str], metric: str = "Rm") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 4: (mean, std) over seeds of `metric` on the cumulative pool after each task; index =
    task number (1-based), columns = row labels (present runs only)."""
    mean, std = {}, {}
    for label, e in rows.items():
        rs = runs.get(e)
        if not rs:
            continue
        v = np.asarray([[c["test"][metric] for c in r["cumulative"]] for r in rs], float)
        mean[label] = v.mean(0)
        std[label] = v.std(0, ddof=1) if len(v) > 1 else np.zeros(v.shape[1])
    idx = pd.RangeIndex(1, 1 + max((len(v) for v in mean.values()), default=0), name="task")
    return (pd.DataFrame({k: pd.Series(v, index=idx[:len(v)]) for k, v in mean.items()}, index=idx),
            pd.DataFrame({k: pd.Series(v, index=idx[:len(v)]) for k, v in std.items()}, index=idx))


def start_and_end(runs: dict[str, list[dict]], experiments: list[str], metric: str = "Rm") -> pd.DataFrame:
    """Each task's own test pool: the initialisation's score (`zero_shot`, the model before any
    task) and each experiment's final score (the last row of its task matrix), mean over seeds;
    index = task names, columns = "initialisation" then the method labels (present runs only)."""
    has = lambda r: (r.get("zero_shot") or {}).get("test") and (r.get("matrix") or {}).get("test")  # noqa: E731
    present = [e for e in experiments if runs.get(e) and all(has(r) for r in runs[e])]
    if not present:   # runs without task matrices (older formats) have nothing to show here
        return pd.DataFrame()
    first = runs[present[0]]
    cols = {"initialisation": np.mean([r["zero_shot"]["test"][metric] for r in first], axis=0)}
    for e in present:
        cols[method_label(e)] = np.mean([r["matrix"]["test"][metric][-1] for r in runs[e]], axis=0)
    return pd.DataFrame(cols, index=pd.Index(first[0]["tasks"], name="task"))


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


# ----------------------------------------------------------------------------------------------
# formatting: ours beside the paper's

def pm(df: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """Numeric stats frame -> strings "mean ± std" ("mean" for one seed, "missing" for none, "—"
    for a value that cannot be computed); columns without a "mean" (e.g. a run's name) pass through."""
    cols = list(df.columns)
    qs = [q for q in dict.fromkeys(c[0] for c in cols) if q != "seeds"]
    n = df[("seeds", "n")].to_numpy() if ("seeds", "n") in cols else np.ones(len(df), int)
    out = {}
    for q in qs:
        if (q, "mean") not in cols:
            out[q] = df[next(c for c in cols if c[0] == q)].tolist()
            continue
        m = df[(q, "mean")].to_numpy(float)
        sd = df[(q, "std")].to_numpy(float) if (q, "std") in cols else np.full(len(df), np.nan)
        out[q] = ["missing" if k == 0 else "—" if np.isnan(a) else f"{a:.{digits}f}" if k == 1
                  else f"{a:.{digits}f} ± {b:.{digits}f}" for k, a, b in zip(n, m, sd)]
    return pd.DataFrame(out, index=df.index, dtype=object)


def beside(ours: pd.DataFrame, paper: pd.DataFrame, columns) -> pd.DataFrame:
    """Columns (quantity, "ours" | "paper") for each of `columns`; rows = ours' index; the paper's
    frame must share that index (missing paper cells are blank)."""
    cols = {}
    for c in columns:
        if c in ours.columns:
            cols[(c, "ours")] = ours[c]
        if c in paper.columns:
            cols[(c, "paper")] = paper[c].reindex(ours.index).map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    return pd.DataFrame(cols, index=ours.index)


def paper_table1(name: str = "ctp_table1") -> pd.DataFrame:
    """The paper's Table 1 (or supp. Table 3) indexed (group, method); Table 1 adds the hours'
    ratio to SeqF's 3.4 h."""
    p = paper_table(name)
    src = p.attrs["source"]
    p = p.set_index(["group", "method"])
    if "training_hours" in p.columns:
        p = p.rename(columns={"training_hours": "hours"})
        p["hours × SeqF"] = p["hours"] / PAPER_SEQF_HOURS
    p.attrs["source"] = src
    return p


def paper_table2() -> pd.DataFrame:
    p = paper_table("ctp_table2")
    out = p.drop(columns=list(COMPONENTS))
    out.index = pd.Index([switch_label(row) for row in p[list(COMPONENTS)].itertuples(index=False)], name=SWITCH_INDEX)
    out.attrs["source"] = p.attrs["source"]
    return out


def paper_by_label(name: str) -> pd.DataFrame:
    p = paper_table(name)
    out = p.set_index("label")
    out.attrs["source"] = p.attrs["source"]
    return out


# ----------------------------------------------------------------------------------------------
# noise, ranking

def noise_floor(runs: dict[str, list[dict]], experiments, metric: str = "Rm", setting="auto",
                default: float = 1.0) -> tuple[float, str]:
    """The floor for single-seed verdicts. A number in `setting` is used as is; "auto" measures it:
    √2 × the pooled seed std of `metric` over the `experiments` with >= 2 seeds (the spread of a
    difference of two single-seed values); `default` when no experiment has 2 seeds."""
    if setting not in (None, "auto"):
        return float(setting), "set in params (report.ctp.noise_floor)"
    var = [np.var(values(runs[e], metric), ddof=1) for e in experiments if len(runs.get(e, [])) >= 2]
    if not var:
        return float(default), "default (no experiment with 2 seeds to measure it)"
    return float(math.sqrt(2 * np.mean(var))), f"measured: √2 × pooled seed std of {metric} over {len(var)} Table 1 runs"


def kendall_tau(x, y) -> float:
    """Kendall's τ-b between two score lists over the same items (scipy; NaN if undefined)."""
    from scipy.stats import kendalltau
    if len(x) < 2:
        return float("nan")
    return float(kendalltau(x, y).statistic)


# ----------------------------------------------------------------------------------------------
# claims: each returns a Claim whose verdict comes from vlcp.report.claims (effect + greater_verdict /
# equivalent_verdict / target_verdict / not_testable), or, for the reversed-order ranking, from
# `null_verdict` below (a permutation test: claims.py has no such primitive). Missing runs ->
# "inconclusive" with "missing runs: ..." (unless the runs present already refute the claim).
# Effects pair runs by seed where both sides have >= 2 seeds in common (Table 1: the seed spread
# measures itself); otherwise they use `sd`, the std of ONE difference of single-seed values:
# √2 × the pooled Table 1 seed std of Rm (`noise_floor`, "auto"), named by `sd_source`.

def _ev(label: str, v: list[float]) -> str:
    m, s = mean_std(v)
    return f"{label} {m:.2f}" + (f" ± {s:.2f}" if len(v) > 1 else "")


def _with_missing(verdict: str, evidence: str, missing: list[str]) -> tuple[str, str]:
    if not missing:
        return verdict, evidence
    note = f"missing runs: {', '.join(missing)}"
    return (verdict if verdict == "not confirmed" else "inconclusive"), (note + ("; " + evidence if evidence else ""))


def _claim(text: str, verdict: str, e: Effect | None, evidence: str, source: str, missing=()) -> Claim:
    """A Claim with its effect (when there is one), downgraded to inconclusive by missing runs."""
    verdict, evidence = _with_missing(verdict, evidence, list(dict.fromkeys(missing)))
    return claim_from(text, verdict, e, evidence, source) if e is not None else Claim(text, verdict, evidence, source)


def seed_values(rs: list[dict], metric: str) -> dict:
    """{seed: final `metric`}."""
    return {s: final_row(r)[metric] for s, r in _by_seed(rs).items()}


def paired_effect(a: dict, b: dict, sd: float | None = None, sd_source: str = "given sd") -> Effect:
    """a − b from {seed: value} dicts: paired by seed over the seeds both have when there are >= 2
    (no floor: the seed spread is measured); otherwise every value of each side, with `sd` (the std
    of one difference) where a side has a single value (`effect`'s one-run interval)."""
    common = [s for s in a if s in b]
    if len(common) >= 2:
        return effect([a[s] for s in common], [b[s] for s in common], paired=True)
    va, vb = list(a.values()), list(b.values())
    single = min(len(va), len(vb)) < 2
    return effect(va, vb, sd=sd if single else None, paired=False, sd_source=sd_source)


def weakest(effects: list[Effect]) -> Effect | None:
    """The effect a "beats every one" claim hangs on: the smallest difference."""
    return min(effects, key=lambda e: e.diff) if effects else None


def claim_beats_all(runs, winner: str, others: list[str], metric: str = "Rm", sd: float | None = None,
                    text: str = "", source: str = "", names: dict[str, str] | None = None,
                    sd_source: str = "Table 1 seed spread") -> Claim:
    """`winner` beats every one of `others` on `metric`: each pair's effect (winner − other, paired
    by seed, or one run each with `sd`) judged by `greater_verdict`, combined; the claim carries the
    effect over the closest one. `names`: display names (default: the paper's method names)."""
    def label(e):
        return (names or {}).get(e) or method_label(e)

    text = text or f"{label(winner)} beats every one of {', '.join(map(label, others))} on {metric}"
    missing = [e for e in [winner, *others] if not runs.get(e)]
    if not runs.get(winner):
        return _claim(text, "inconclusive", None, "", source, missing)
    w = seed_values(runs[winner], metric)
    present = [e for e in others if runs.get(e)]
    effects = [paired_effect(w, seed_values(runs[e], metric), sd, sd_source) for e in present]
    verdicts = [greater_verdict(e) for e in effects]
    lost = [label(e) for e, v in zip(present, verdicts) if v == "not confirmed"]
    within = [label(e) for e, v in zip(present, verdicts) if v == "inconclusive"]
    ev = ", ".join([_ev(label(winner), list(w.values()))] + [_ev(label(e), values(runs[e], metric)) for e in present])
    ev += (f"; not beaten by: {', '.join(lost)}" if lost else "") + (f"; within the noise: {', '.join(within)}" if within else "")
    if present:
        closest = present[effects.index(weakest(effects))]
        ev += f"; closest: {label(closest)}"
    return _claim(text, combine(verdicts) if verdicts else "inconclusive", weakest(effects), ev, source, missing)


def group_means(runs, experiments: list[str], metric: str = "Rm", seeds=None) -> list[float]:
    """Per seed (present in every experiment, or `seeds`): the mean of `metric` over the experiments."""
    by = [_by_seed(runs[e]) for e in experiments]
    if seeds is None:
        seeds = [s for s in by[0] if all(s in b for b in by)] if by else []
    return [float(np.mean([final_row(b[s])[metric] for b in by])) for s in seeds]


def claim_groups(runs, buffer: list[str], free: list[str], metric: str = "Rm", sd: float | None = None,
                 sd_source: str = "Table 1 seed spread") -> Claim:
    """Memory-buffer methods beat memory-free ones: per seed (common to every run of both groups)
    the memory-buffer group's mean `metric` minus the memory-free group's, paired by seed
    (`greater_verdict`; one seed: `sd`, conservative for a difference of group means); the evidence
    also counts the pairs of seed means with the memory-buffer method ahead."""
    text = f"memory-buffer methods beat memory-free ones on {metric} (group means)"
    src = "Table 1, §5.2"
    missing = [e for e in buffer + free if not runs.get(e)]
    b, f = [e for e in buffer if runs.get(e)], [e for e in free if runs.get(e)]
    if not b or not f:
        return _claim(text, "inconclusive", None, "", src, missing)
    by = [_by_seed(runs[e]) for e in b + f]
    seeds = [s for s in by[0] if all(s in x for x in by)]
    if not seeds:
        return _claim(text, "inconclusive", None, "no seed common to every run of both groups", src, missing)
    gb, gf = group_means(runs, b, metric, seeds), group_means(runs, f, metric, seeds)
    e = paired_effect(dict(zip(seeds, gb)), dict(zip(seeds, gf)), sd, sd_source)
    mb = {x: np.mean(values(runs[x], metric)) for x in b}
    mf = {x: np.mean(values(runs[x], metric)) for x in f}
    wins = sum(mb[x] > mf[y] for x in b for y in f)
    ev = (f"{_ev('memory-buffer mean', gb)} ({len(b)} methods) vs {_ev('memory-free mean', gf)} ({len(f)} methods); "
          f"{wins}/{len(b) * len(f)} pairs of seed means have the memory-buffer method ahead")
    return _claim(text, greater_verdict(e), e, ev, src, missing)


def claim_gap(runs, jointt: str, seqf: str, rm_min_frac: float = 0.5, map_max_frac: float = 2.0,
              sd: float | None = None, sd_source: str = "Table 1 seed spread") -> Claim:
    """JointT - SeqF is large on Rm and small on mAP@1, relative to JointT's own score and anchored to
    the paper's gaps (23.22 of 80.08 Rm = 29 %, 1.65 of 63.79 mAP@1 = 2.6 %): large = the Rm gap
    >= rm_min_frac × 29 % of our JointT Rm; small = the mAP@1 gap <= map_max_frac × 2.6 % of our
    JointT mAP@1. Per-seed gaps pair JointT and SeqF runs of the same seed; each side is an effect
    of the gaps against the threshold (`greater_verdict`; one seed: `sd`, Rm's, for both metrics)."""
    rel = {m: PAPER_GAP[m] / PAPER_JOINTT[m] for m in PAPER_GAP}
    text = (f"the JointT–SeqF gap is large on Rm (≥ {rm_min_frac:g} × the paper's {100 * rel['Rm']:.0f} % of JointT) and "
            f"small on mAP@1 (≤ {map_max_frac:g} × the paper's {100 * rel['mAP@1']:.1f} % of JointT)")
    missing = [e for e in (jointt, seqf) if not runs.get(e)]
    if missing:
        return _claim(text, "inconclusive", None, "", "§5.2, Fig. 4", missing)
    a, b = _by_seed(runs[jointt]), _by_seed(runs[seqf])
    seeds = [s for s in a if s in b]
    if not seeds:
        return _claim(text, "inconclusive", None, "no seed common to JointT and SeqF", "§5.2, Fig. 4")
    gaps = {m: {s: final_row(a[s])[m] - final_row(b[s])[m] for s in seeds} for m in PAPER_GAP}
    top = {m: float(np.mean(values(runs[jointt], m))) for m in PAPER_GAP}
    thr_rm = rm_min_frac * rel["Rm"] * top["Rm"]
    thr_map = map_max_frac * rel["mAP@1"] * top["mAP@1"]
    e_rm = paired_effect(gaps["Rm"], {s: thr_rm for s in seeds}, sd, sd_source)
    e_map = paired_effect({s: thr_map for s in seeds}, gaps["mAP@1"], sd, sd_source)
    v_rm, v_map = greater_verdict(e_rm), greater_verdict(e_map)
    ev = (f"Rm gap {_ev('', list(gaps['Rm'].values())).strip()} (threshold ≥ {thr_rm:.2f}: {v_rm}), "
          f"mAP@1 gap {_ev('', list(gaps['mAP@1'].values())).strip()} (threshold ≤ {thr_map:.2f}: {v_map}; "
          f"margin {e_map}); JointT Rm {top['Rm']:.2f}, mAP@1 {top['mAP@1']:.2f}; paper: 23.22 and 1.65; "
          "the effect shown: Rm gap − its threshold")
    return _claim(text, combine([v_rm, v_map]), e_rm, ev, "§5.2, Fig. 4")


def component_pairs(component: str) -> list[tuple[int, int]]:
    """Table 2's row pairs (without, with) that differ only in `component`'s switch."""
    k = COMPONENTS.index(component)
    return [(i, j) for i, a in enumerate(SWITCHES) for j, b in enumerate(SWITCHES)
            if a[k] == 0 and b[k] == 1 and all(a[x] == b[x] for x in range(4) if x != k)]


def claim_component(runs, experiments: list[str], component: str, metric: str = "Rm", sd: float | None = None,
                    sd_source: str = "Table 1 seed spread") -> Claim:
    """Adding `component` improves `metric` in every pair of Table 2 rows that differ only in it:
    each pair's effect (with − without) by `greater_verdict`, combined; the claim carries the
    smallest one."""
    text = f"adding {component} improves {metric} (every Table 2 row pair differing only in {component})"
    paper = paper_table("ctp_table2")[metric].tolist()
    effects, verdicts, ev, missing = [], [], [], []
    for i, j in component_pairs(component):
        a, b = experiments[i], experiments[j]
        miss = [e for e in (a, b) if not runs.get(e)]
        if miss:
            missing += miss
            continue
        e = paired_effect(seed_values(runs[b], metric), seed_values(runs[a], metric), sd, sd_source)
        effects.append(e)
        verdicts.append(greater_verdict(e))
        p = "" if pd.isna(paper[i]) or pd.isna(paper[j]) else f"; paper {paper[i]:.2f} → {paper[j]:.2f}"
        ev.append(f"{a} {np.mean(values(runs[a], metric)):.2f} → {b} {np.mean(values(runs[b], metric)):.2f} "
                  f"({verdicts[-1]}{p})")
    return _claim(text, combine(verdicts) if verdicts else "inconclusive", weakest(effects), "; ".join(ev), "Table 2",
                  missing)


# the paper's spread of Rm over the compatible momentum m (supp. Table 2, m = 0.7 ... 0.995: 64.74 to
# 65.04), as a fraction of CTP's own Rm there (m = 0.9: 64.87)
PAPER_M_RANGE, PAPER_M_DEFAULT_RM = 65.04 - 64.74, 64.87


def momentum_margin(runs, momentum: dict[float, str], setting="auto", metric: str = "Rm",
                    default_m: float = 0.9) -> tuple[float | None, str]:
    """The equivalence margin of "not sensitive to m", in `metric` points, and how it was set. A
    number in `setting` is used as is; "auto": the paper's own spread over m (0.30 Rm of CTP's
    64.87 = 0.46 %) as the same fraction of our CTP's Rm at m = `default_m` (differences between
    m values are read on the scale of the score they change). None when that run is missing."""
    if setting not in (None, "auto"):
        return float(setting), "set in params (report.ctp.momentum_margin)"
    e = momentum.get(default_m)
    if not runs.get(e):
        return None, f"no m = {default_m:g} run to scale the paper's spread to"
    rm = float(np.mean(values(runs[e], metric)))
    frac = PAPER_M_RANGE / PAPER_M_DEFAULT_RM
    return frac * rm, (f"the paper's range over m ({PAPER_M_RANGE:.2f} of CTP's {PAPER_M_DEFAULT_RM:.2f} {metric}, "
                       f"supp. Table 2) = {100 * frac:.2f} % of our m = {default_m:g} {metric} {rm:.2f}")


def claim_momentum_insensitive(runs, momentum: dict[float, str], metric: str = "Rm", margin: float | None = None,
                               margin_how: str = "given", sd: float | None = None,
                               sd_source: str = "Table 1 seed spread", default_m: float = 0.9) -> Claim:
    """Not sensitive to m: every m's `metric` is equivalent to the default m's within ±`margin`
    (`equivalent_verdict`, two one-sided tests on a 90 % interval; one run each: `sd`), combined.
    "Within the noise" alone is inconclusive; confirmation needs the interval inside the margin."""
    text = (f"CTP is not sensitive to the compatible momentum m (every m's {metric} within ± a stated margin of "
            f"m = {default_m:g}'s)")
    src = "supp. Table 2, supp. §E.1"
    missing = [e for e in momentum.values() if not runs.get(e)]
    ref = momentum.get(default_m)
    if ref is None:
        return not_testable(text, f"no m = {default_m:g} (CTP's default) in report.ctp.momentum", src)
    if not runs.get(ref) or margin is None:
        return _claim(text, "inconclusive", None, "" if margin is not None else f"no margin: {margin_how}", src, missing)
    r = seed_values(runs[ref], metric)
    verdicts, effects, ev = [], [], []
    for m, e in sorted(momentum.items()):
        if m == default_m or not runs.get(e):
            continue
        a = seed_values(runs[e], metric)
        common = [s for s in a if s in r]
        xa, xb = ([a[s] for s in common], [r[s] for s in common]) if len(common) >= 2 else (list(a.values()), list(r.values()))
        single = min(len(xa), len(xb)) < 2
        v, eff = equivalent_verdict(xa, xb, margin, sd=sd if single else None, sd_source=sd_source)
        verdicts.append(v)
        effects.append(eff)
        ev.append(f"m={m:g}: {np.mean(xa):.2f} ({v}, {eff.diff:+.2f} [{eff.low:+.2f}, {eff.high:+.2f}])")
    if not verdicts:
        return _claim(text, "inconclusive", None, "no other m than the default", src, missing)
    widest = max(effects, key=lambda x: max(abs(x.low), abs(x.high)))
    note = ""
    if sd is not None and margin <= stats.norm.ppf(0.95) * sd:
        note = f"; the margin is within 1.645 × sd ({stats.norm.ppf(0.95) * sd:.2f}): one seed cannot confirm it"
    ev_text = (f"m={default_m:g}: {np.mean(list(r.values())):.2f}; " + "; ".join(ev) +
               f"; margin ±{margin:.2f} ({margin_how}); 90 % intervals (TOST){note}; paper: range 0.30 over m, "
               "vs 1.30 / 2.55 for the single-way updates; the effect shown: the widest interval")
    return _claim(text, combine(verdicts), widest, ev_text, src, missing)


def overhead(runs, ctp: str, reference: str, tolerance: float = 1.1, target: float = PAPER_TIME_TARGET) -> dict:
    """CTP's training-time ratio to SeqF (per seed), its FLOP ratio, and the two targets."""
    if not runs.get(ctp) or not runs.get(reference):
        return {}
    ratios = time_ratios(runs[ctp], runs[reference])
    flops = flop_ratios(runs[ctp], runs[reference])
    m, s = mean_std(ratios)
    f = float(np.mean(flops)) if flops else float("nan")
    return {"time ratios": ratios, "time ratio": m, "time ratio std": s, "FLOP ratio": f,
            "FLOP target": f * tolerance, "tolerance": tolerance, "paper target": target,
            "paper ratio": PAPER_CTP_HOURS / PAPER_SEQF_HOURS}


def paired_cost(bench: dict | None, ctp: str, tolerance: float = 1.1) -> dict:
    """CTP's paired step-time ratio to SeqF from `benchmarks/results/ctp_cost.json` (interleaved
    repeats at 3 × the study's steps): median, range, FLOP ratio and its × `tolerance` target;
    {} when the file or the experiment is absent."""
    if not bench or ctp not in bench.get("paired_ratios", {}):
        return {}
    ratios = bench["paired_ratios"][ctp]
    return {"median": bench["ratio_to_reference"][ctp], "slowest": max(ratios), "fastest": min(ratios),
            "repeats": len(ratios), "FLOP ratio": bench["flop_ratio"][ctp],
            "FLOP target": bench["flop_ratio"][ctp] * tolerance, "steps": bench.get("overrides", []),
            "commit": bench.get("commit", "?"), "date": bench.get("date", "?")}


def time_ratio_by_seed(rs: list[dict], ref: list[dict]) -> dict:
    """{seed: total training seconds / the reference's of the same seed} (seeds in both)."""
    a, b = _by_seed(rs), _by_seed(ref)
    return {s: train_seconds(a[s]) / train_seconds(b[s]) for s in a if s in b and train_seconds(b[s]) > 0}


def claim_time_overhead(runs, ctp: str, reference: str, baselines: list[str],
                        margin: float = PAPER_HOURS_RESOLUTION) -> Claim:
    """The paper's cost claim (§5.2, Table 1 hours: CTP 4.0 = LwF 4.0 < MAS 4.1 < EWC 4.6 < SI 4.9 <
    RWalk 6.2 < AFEC 8.7): CTP's training time is no more than every regularisation baseline's.
    From the study's time column: per seed, each method's time / SeqF's of the same seed; per
    baseline the effect baseline − CTP (paired by seed) must clear −`margin` (`greater_verdict`
    with min_gap −margin: "CTP ≤ baseline" up to the resolution of the paper's hours, as CTP and
    LwF tie there). One seed: no spread, so the interval is unbounded (inconclusive)."""
    text = f"CTP's training time is no more than every regularisation baseline's (time × SeqF, within {margin:g})"
    src = "Table 1 hours, §5.2"
    missing = [e for e in (ctp, reference, *baselines) if not runs.get(e)]
    if not runs.get(ctp) or not runs.get(reference):
        return _claim(text, "inconclusive", None, "", src, missing)
    c = time_ratio_by_seed(runs[ctp], runs[reference])
    hours = paper_table1()["hours"].droplevel(0)
    present = [e for e in baselines if runs.get(e)]
    effects = [paired_effect(time_ratio_by_seed(runs[e], runs[reference]), c) for e in present]
    verdicts = [greater_verdict(e, -margin) for e in effects]
    ev = ", ".join([_ev("CTP", list(c.values()))] +
                   [_ev(method_label(e), list(time_ratio_by_seed(runs[e], runs[reference]).values())) +
                    f" ({v})" for e, v in zip(present, verdicts)])
    ev += ("; paper hours: " + ", ".join(f"{method_label(e)} {hours.get(method_label(e), float('nan')):.1f}"
                                         for e in [ctp, *baselines]) +
           f"; margin {margin:g} = 0.1 h (the paper's resolution) / SeqF's 3.4 h; the effect shown: the cheapest "
           "baseline − CTP")
    return _claim(text, combine(verdicts) if verdicts else "inconclusive", weakest(effects), ev, src, missing)


def claim_time_target(runs, ctp: str, reference: str, target: float = PAPER_TIME_TARGET,
                      bench: dict | None = None) -> Claim:
    """The paper's figure, CTP's time ≤ `target` × SeqF's (4.0 h / 3.4 h = 1.18). "Not testable" when
    CTP's FLOP ratio alone exceeds `target` (its extra forwards already cost more arithmetic than
    the paper's whole overhead: the paper's ViT-B/16 + BERT-base balance of costs is not ours).
    Otherwise judged on the paired benchmark's repeats (`target_verdict`) when there is one, else
    on the study's per-seed ratios (effect target − ratio, `greater_verdict`)."""
    text = f"CTP's training time over SeqF is ≤ {target:.2f}× (the paper's 4.0 h / 3.4 h)"
    src = "Table 1 hours, §5.2"
    missing = [e for e in (ctp, reference) if not runs.get(e)]
    if missing:
        return _claim(text, "inconclusive", None, "", src, missing)
    o, p = overhead(runs, ctp, reference, target=target), paired_cost(bench, ctp)
    flop_ratio = p["FLOP ratio"] if p else o["FLOP ratio"]
    if flop_ratio > target:
        return not_testable(text, f"CTP's FLOP ratio alone is {flop_ratio:.2f} > {target:.2f} on this model (its "
                                  "extra forwards of the momentum and previous-task models): the paper's figure, for "
                                  "ViT-B/16 + BERT-base, cannot be met by any implementation here", src)
    r = time_ratio_by_seed(runs[ctp], runs[reference])
    study_ev = f"study: time ratio {_ev('', list(r.values())).strip()} over {len(r)} seed(s)" if r else "study: no common seed"
    if p:
        v = target_verdict(p["median"], p["slowest"], target)
        ev = (f"paired benchmark ({p['repeats']} repeats): median {p['median']:.3f} ({p['fastest']:.3f}–"
              f"{p['slowest']:.3f}); {study_ev}; FLOP ratio {flop_ratio:.3f}")
        return _claim(text, v, None, ev, src)
    if not r:
        return _claim(text, "inconclusive", None, study_ev, src)
    e = paired_effect({s: target for s in r}, r)
    return _claim(text, greater_verdict(e), e, f"{study_ev}; FLOP ratio {flop_ratio:.3f}; the effect shown: "
                  f"{target:.2f} − the time ratio", src)


def claim_time_flops(runs, ctp: str, reference: str, tolerance: float = 1.1, bench: dict | None = None) -> Claim:
    """This study's cost check (not a sentence of the paper): CTP's extra time is its extra
    arithmetic, time ratio ≤ FLOP ratio × `tolerance`; on the paired benchmark's repeats
    (`target_verdict`) when there is one, else on the study's per-seed ratios (`greater_verdict`)."""
    text = f"CTP's extra training time over SeqF is its extra arithmetic (time ratio ≤ FLOP ratio × {tolerance:g})"
    src = "Table 1 hours, §5.2 (this study's cost check)"
    missing = [e for e in (ctp, reference) if not runs.get(e)]
    if missing:
        return _claim(text, "inconclusive", None, "", src, missing)
    o, p = overhead(runs, ctp, reference, tolerance), paired_cost(bench, ctp, tolerance)
    r = time_ratio_by_seed(runs[ctp], runs[reference])
    study_ev = f"study: time ratio {_ev('', list(r.values())).strip()} over {len(r)} seed(s)" if r else "study: no common seed"
    if p:
        ev = (f"paired benchmark ({p['repeats']} repeats): median {p['median']:.3f} ({p['fastest']:.3f}–"
              f"{p['slowest']:.3f}); FLOP ratio {p['FLOP ratio']:.3f} × {tolerance:g} = {p['FLOP target']:.3f}; {study_ev}")
        return _claim(text, target_verdict(p["median"], p["slowest"], p["FLOP target"]), None, ev, src)
    if np.isnan(o["FLOP target"]):
        return not_testable(text, "no FLOP count common to CTP's and SeqF's runs", src)
    if not r:
        return _claim(text, "inconclusive", None, study_ev, src)
    e = paired_effect({s: o["FLOP target"] for s in r}, r)
    ev = (f"{study_ev}; FLOP ratio {o['FLOP ratio']:.3f} × {tolerance:g} = {o['FLOP target']:.3f}; "
          "the effect shown: that target − the time ratio")
    return _claim(text, greater_verdict(e), e, ev, src)


def ranking(runs_default, runs_reversed, study: dict, metric: str = "Rm") -> pd.DataFrame:
    """Methods run in both orders (the upper bound excluded): mean `metric` and rank in each order,
    with the paper's for the same methods."""
    p1 = paper_table1("ctp_table1").reset_index().set_index("method")[metric]
    p3 = paper_table1("ctp_supp_table3").reset_index().set_index("method")[metric]
    rows = {}
    for (g, label), rev in reversed_rows(study).items():
        default = PREFIX + rev[len(REV_PREFIX):]
        if g == "upper bound" or not runs_default.get(default) or not runs_reversed.get(rev):
            continue
        rows[label] = {"group": g, "default (ours)": np.mean(values(runs_default[default], metric)),
                       "reversed (ours)": np.mean(values(runs_reversed[rev], metric)),
                       "default (paper)": p1.get(label, np.nan), "reversed (paper)": p3.get(label, np.nan)}
    df = pd.DataFrame.from_dict(rows, orient="index")
    for c in ("default (ours)", "reversed (ours)", "default (paper)", "reversed (paper)"):
        if c in df:
            df[f"rank {c}"] = df[c].rank(ascending=False, method="min")
    return df


def tau_null(default, reversed_, groups, max_perms: int = 20000, seed: int = 0) -> np.ndarray:
    """Kendall τ-b between `default` and `reversed_` with the reversed values shuffled within each
    group (`groups`: one label per item): every such permutation when there are at most `max_perms`,
    else `max_perms` random ones (generator `seed`). The null of "the reversed order keeps the
    default ranking only as far as the groups do" (memory-buffer methods above memory-free ones)."""
    import itertools

    default, reversed_, groups = np.asarray(default, float), np.asarray(reversed_, float), np.asarray(groups)
    idx = [np.flatnonzero(groups == g) for g in dict.fromkeys(groups.tolist())]
    n_perms = math.prod(math.factorial(len(i)) for i in idx)
    if n_perms <= max_perms:
        perms = itertools.product(*[itertools.permutations(i) for i in idx])
    else:
        rng = np.random.default_rng(seed)
        perms = ([rng.permutation(i) for i in idx] for _ in range(max_perms))
    out = []
    for perm in perms:
        shuffled = reversed_.copy()
        for i, p in zip(idx, perm):
            shuffled[i] = reversed_[list(p)]
        out.append(kendall_tau(default, shuffled))
    return np.asarray(out)


def null_verdict(observed: float, null: np.ndarray, alpha: float = 0.05) -> tuple[str, float]:
    """(verdict, p) of a one-sided permutation test of "observed is larger than chance": confirmed
    when p = P(null ≥ observed) ≤ `alpha` (observed in the null's top `alpha`); not confirmed when
    observed is below the null's median; else inconclusive. (A helper here: vlcp.report.claims has
    no permutation-test verdict.)"""
    if np.isnan(observed) or len(null) == 0:
        return "inconclusive", float("nan")
    p = float(np.mean(null >= observed - 1e-12))
    if p <= alpha:
        return "confirmed", p
    return ("not confirmed" if observed < float(np.median(null)) else "inconclusive"), p


def claim_ranking(runs_default, runs_reversed, study: dict, metric: str = "Rm", alpha: float = 0.05) -> Claim:
    """The ranking survives the reversed order: Kendall τ-b between the default-order (seed means)
    and the reversed-order rankings of the methods run in both, against τ under random orders
    within the memory-free and memory-buffer groups (`tau_null`, `null_verdict`): a τ that only
    reflects "memory-buffer methods beat memory-free ones" is not enough."""
    text = f"the ranking survives the reversed task order (Kendall τ on {metric} beyond random orders within each group)"
    src = "supp. Table 3, supp. §E.2"
    rows = reversed_rows(study)
    missing = [e for e in rows.values() if not runs_reversed.get(e)]
    missing += [PREFIX + e[len(REV_PREFIX):] for e in rows.values() if not runs_default.get(PREFIX + e[len(REV_PREFIX):])]
    df = ranking(runs_default, runs_reversed, study, metric)
    if len(df) < 3:
        return _claim(text, "inconclusive", None, f"only {len(df)} method(s) run in both orders (τ needs 3)", src, missing)
    tau = kendall_tau(df["default (ours)"], df["reversed (ours)"])
    null = tau_null(df["default (ours)"], df["reversed (ours)"], df["group"])
    verdict, p = null_verdict(tau, null, alpha)
    ev = (f"τ = {tau:.2f} over {len(df)} methods; null (random orders within groups, {len(null)} permutations): "
          f"median {np.median(null):.2f}, 95th percentile {np.quantile(null, 0.95):.2f}, P(τ_null ≥ τ) = {p:.3f} "
          f"(confirmed when ≤ {alpha:g}, not confirmed below the median)")
    paper = df.dropna(subset=["default (paper)", "reversed (paper)"])
    if len(paper) >= 3:
        ptau = kendall_tau(paper["default (paper)"], paper["reversed (paper)"])
        pv, pp = null_verdict(ptau, tau_null(paper["default (paper)"], paper["reversed (paper)"], paper["group"]), alpha)
        ev += f"; paper, same methods: τ = {ptau:.2f}, P = {pp:.3f} ({pv})"
    ev += f"; reversed order: {' > '.join(df.sort_values('reversed (ours)', ascending=False).index)}"
    return _claim(text, verdict, None, ev, src, missing)


def claim_first_in_groups(runs_reversed, study: dict, metric: str = "Rm", sd: float | None = None,
                          sd_source: str = "Table 1 seed spread") -> Claim:
    """CTP / CTP+ER stay first among the memory-free / memory-buffer methods of the reversed runs:
    each pair's effect (`greater_verdict`; one run each: `sd`), combined."""
    text = "CTP and CTP+ER stay first in their groups (memory-free, memory-buffer) in the reversed task order"
    src = "supp. Table 3, supp. §E.2"
    rows = reversed_rows(study)
    verdicts, effects, ev, missing = [], [], [], []
    for winner, g in ((study["ctp"], "memory-free"), (study["ctp_er"], "memory-buffer")):
        w = REV_PREFIX + winner[len(PREFIX):]
        others = [e for (gg, _), e in rows.items() if gg == g and e != w]
        missing += [e for e in [w, *others] if not runs_reversed.get(e)]
        others = [e for e in others if runs_reversed.get(e)]
        if not runs_reversed.get(w) or not others:
            verdicts.append("inconclusive")
            continue
        wv = seed_values(runs_reversed[w], metric)
        es = [paired_effect(wv, seed_values(runs_reversed[e], metric), sd, sd_source) for e in others]
        verdicts.append(combine([greater_verdict(e) for e in es]))
        effects += es
        ev.append(f"{method_label(winner)} first among the reversed {g} runs (vs {len(others)} other(s), closest "
                  f"{method_label(others[es.index(weakest(es))])}): {verdicts[-1]}")
    return _claim(text, combine(verdicts), weakest(effects), "; ".join(ev), src, missing)


def sd_source_of(floor_how: str) -> str:
    """The `sd_source` of the single-seed verdicts, from `noise_floor`'s description."""
    return "Table 1 seed spread" if floor_how.startswith("measured") else floor_how


def ledger(study: dict, runs1: dict, runs_abl: dict, floor_single: float, bench: dict | None = None,
           floor_how: str = "measured") -> list[Claim]:
    """Every claim of the CTP paper we check, in the paper's order. runs1: Table 1 runs (seeds);
    runs_abl: the single-seed tables' runs (ablation seeds); floor_single: the std of one difference
    of single-seed Rm values (`noise_floor`; `floor_how`: its description), the `sd` of every
    single-seed effect (and of Table 1's pairs with fewer than 2 seeds in common); bench: the paired
    time benchmark (`benchmarks/results/ctp_cost.json`), when there is one."""
    t1 = study["table1"]
    sd, src = floor_single, sd_source_of(floor_how)
    kw = {"sd": sd, "sd_source": src}
    free = [e for e in t1.get("memory-free", []) if e not in (study["ctp"], study["reference"])]
    buffer = [e for e in t1.get("memory-buffer", []) if e != study["ctp_er"]]
    claims = [
        claim_beats_all(runs1, study["ctp"], free + [study["reference"]], "Rm",
                        text="CTP beats every memory-free baseline on Rm", source="Table 1, §5.2", **kw),
        claim_beats_all(runs1, study["ctp_er"], buffer, "Rm",
                        text="CTP+ER beats every memory-buffer baseline on Rm", source="Table 1, §5.2", **kw),
        claim_groups(runs1, [e for e in t1.get("memory-buffer", [])],
                     [e for e in t1.get("memory-free", []) if e != study["reference"]], "Rm", **kw),
        claim_gap(runs1, (t1.get("upper bound") or ["ctp-jointt"])[0], study["reference"],
                  study["gap"]["rm_min_frac"], study["gap"]["map_max_frac"], **kw),
    ]
    claims += [claim_component(runs_abl, study["table2"], c, "Rm", **kw) for c in COMPONENTS]
    t2 = table2_rows(study["table2"])
    names2 = {e: f"{k} ({e})" for k, e in t2.items()}
    lc_alone, cmc_alone = study["table2"][2], study["table2"][1]
    claims.append(claim_beats_all(runs_abl, lc_alone, [cmc_alone], "Rm",
                                  text="cross-modal topology preservation L_c alone does more than compatible momentum "
                                       "contrast L_CMC alone (Rm)", source="Table 2, §5.3", names=names2, **kw))
    t3 = study["table3"]
    names3 = {e: k for k, e in table3_rows(t3).items()}
    claims += [
        claim_beats_all(runs_abl, t3["ctp"], [t3["only_prev"], t3["only_cur"]], "Rm",
                        text="the compatible momentum update beats either single-way update on Rm",
                        source="Table 3, §5.3", names=names3, **kw),
        claim_beats_all(runs_abl, t3["only_prev"], [t3["only_cur"]], "Rm",
                        text="the single-way update from the previous-task model beats the one from the current model "
                             "on Rm", source="Table 3, §5.3", names=names3, **kw),
        claim_beats_all(runs_abl, t3["ctp"], [t3["no_queue"]], "Rm",
                        text="the momentum queue Q helps (CTP > w/o Q on Rm)", source="Table 3, §5.3", names=names3, **kw),
        claim_beats_all(runs_abl, t3["ctp"], [t3["no_selfmask"]], "Rm",
                        text="suppressing the same-modal self-similarity helps (CTP > w/o P̂i2i & P̂t2t on Rm)",
                        source="Table 3, §5.3", names=names3, **kw),
    ]
    margin, margin_how = momentum_margin(runs_abl, study["momentum"], study.get("momentum_margin", "auto"))
    claims += [
        claim_momentum_insensitive(runs_abl, study["momentum"], "Rm", margin, margin_how, **kw),
        claim_time_overhead(runs1, study["ctp"], study["reference"], free, study.get("time_margin", PAPER_HOURS_RESOLUTION)),
        claim_time_target(runs1, study["ctp"], study["reference"], study["time_target"], bench),
        claim_time_flops(runs1, study["ctp"], study["reference"], study["time_tolerance"], bench),
        claim_ranking(runs1, runs_abl, study, "Rm", study.get("rank_alpha", 0.05)),
        claim_first_in_groups(runs_abl, study, "Rm", **kw),
    ]
    return claims


# ----------------------------------------------------------------------------------------------
# the setting, for the notebook's introduction

def setting(runs: dict[str, list[dict]], study: dict) -> dict:
    """Model, budget and buffer size as the runs recorded them (first run found)."""
    r = next((rs[0] for rs in runs.values() if rs), None)
    if r is None:
        return {}
    cfg = r.get("config", {})
    buffer = None
    for e in study["table1"].get("memory-buffer", []):
        if runs.get(e):
            m = runs[e][0].get("config", {}).get("method", {})
            buffer = next((m[k] for k in ("buffer_size", "memory_size", "memory") if k in m), None)
            if buffer is not None:
                break
    out = {"model": cfg.get("model", {}).get("name"), "steps": cfg.get("train", {}).get("steps"),
            "batch size": cfg.get("train", {}).get("batch_size"), "lr": cfg.get("train", {}).get("lr"),
            "tasks": len(r.get("tasks", [])), "buffer size (pairs)": buffer,
            "training pairs": sum(r.get("task_sizes", [])) or None, "device": r.get("device")}
    return {k: "—" if v is None else str(v) for k, v in out.items()}


def method_notes(keys) -> dict[str, str]:
    """Each method's module docstring (first paragraph), or why there is none."""
    import warnings

    with warnings.catch_warnings():        # tqdm.auto's "IProgress not found" inside a notebook
        warnings.simplefilter("ignore")
        from vlcp.methods import get_method

    out = {}
    for k in keys:
        try:
            cls = get_method(k)
            doc = (__import__(cls.__module__, fromlist=["x"]).__doc__ or cls.__doc__ or "").strip()
            out[k] = " ".join(doc.split("\n\n")[0].split()) or "(no docstring)"
        except Exception as e:  # noqa: BLE001 - a method not (yet) registered is shown, not fatal
            out[k] = f"(not available: {str(e).split(';')[0]})"
    return out
