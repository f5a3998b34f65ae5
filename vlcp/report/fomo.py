"""FoMo-in-Flux's figures and tables from our runs (pure functions of results dicts; the
notebook `fomo_figures` lays them out beside the paper's numbers).

A run's trajectory is the zero-shot point θ0 followed by (A_KA, A_ZS) after every task.
Trajectory plots carry the paper's furniture: the zero-shot start (star), the joint-training
upper bound (star), the straight line between them (the "linear trade-off") and contours of
GM = √(A_KA·A_ZS).
"""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from vlcp.eval import continual
from vlcp.report.claims import (Claim, Effect, Noise, Scale, all_equivalent, blocked_noise, claim_from, effect,
                                runs_where, seed_spread)
from vlcp.report.claims import spread_frame  # noqa: F401  (the notebook's seed-spread table)
from vlcp.report.paper import paper_data, paper_table
from vlcp.report.results import load_subset  # noqa: F401  (the notebook calls fm.load_subset)
from vlcp.utils import read_results


def load_study(runs_dir: str | Path, studies: dict[str, list[str]], seed: int = 0) -> dict[str, dict]:
    """{experiment: results} over every study (runs_dir/<study>/<experiment>/seed<S>/results.json);
    missing runs are left out (the notebook says which)."""
    out = {}
    for study, exps in studies.items():
        for e in exps:
            p = Path(runs_dir) / study / e / f"seed{seed}" / "results.json"
            if p.exists():
                out[e] = read_results(p)
    return out


def trajectory(r: dict) -> pd.DataFrame:
    """Rows: after task 0 (= θ0, zero-shot), 1, …, T; columns A_KA, A_ZS, GM."""
    rows = [r["zero_shot"]] + r["trajectory"]
    return pd.DataFrame([{k: row[k] for k in ("A_KA", "A_ZS", "GM")} for row in rows],
                        index=pd.RangeIndex(len(rows), name="after task"))


def endpoint(r: dict) -> dict[str, float]:
    last = r["trajectory"][-1]
    return {k: last[k] for k in ("A_KA", "A_ZS", "GM")}


def macro_se(r: dict, role: str, row: dict | None = None) -> float:
    """Binomial standard error (points) of one dataset-macro average (A_KA: role "adaptation",
    A_ZS: "retention") at `row` (default: the run's endpoint): datasets independent, each score
    a proportion over its `n` test images or texts."""
    row = row or r["trajectory"][-1]
    var = []
    for name, info in r["datasets"].items():
        if info["role"] == role:
            p = row["datasets"][name] / 100
            var.append(p * (1 - p) / info["n"])
    if not var:
        raise ValueError(f"macro_se: no dataset with role {role!r} in results['datasets']")
    return float(np.sqrt(np.sum(var)) / len(var) * 100)


def macro_floor(r: dict, role: str, row: dict | None = None) -> float:
    """Single-seed noise floor of a difference of two dataset-macro averages: 2·√2 × the
    binomial standard error of the macro mean (`macro_se`): test-set sampling only (the ledger
    joins the seed spread to it: `ledger_noise`)."""
    return 2 * np.sqrt(2) * macro_se(r, role, row)


def summary_row(r: dict, zero_shot: dict, joint: dict | None) -> dict:
    """One run's endpoint A_KA, A_ZS, GM, their change from θ0, the distance above the
    zero-shot–joint line, the budget (steps per task, memory multiplier) and training time."""
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
    return row


def summary(runs: dict[str, dict], zero_shot: dict, joint: dict | None) -> pd.DataFrame:
    """`summary_row` per run ({label: run}): one seed's table. Over seeds: `results.mean_frame`
    (numbers) and `results.shown_frame` (mean ± std) of `summary_row` over `table_runs`."""
    return pd.DataFrame({e: summary_row(r, zero_shot, joint) for e, r in runs.items()}).T


def budget_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Table 4's analogue: per method, FLOPs per step (forward + backward, torch's counter),
    per-task FLOPs (Fisher passes), training memory by tensor accounting, the multiplier
    relative to full fine-tuning, MAFs per step, the steps per task it buys, and the whole
    stream's steps and training samples (Table 4's last two columns)."""
    rows = {}
    for e, r in runs.items():
        b = r["budget"]
        m = b["method"]["memory"]
        rows[e] = {"MFLOPs/step": b["method"]["flops"] / 1e6, "MFLOPs/task": b["method"].get("task_flops", 0) / 1e6,
                   "memory MB": m["total"] / 2**20, "params MB": m["parameters"] / 2**20,
                   "grads MB": m["gradients"] / 2**20, "optimizer MB": m["optimizer"] / 2**20,
                   "activations MB": m["activations"] / 2**20, "method state MB": m["method"] / 2**20,
                   "memory multiplier": b["memory_multiplier"], "MAFs/step (M)": b["mafs"] / 1e6,
                   "steps/task": r["steps_per_task"][0], "total steps": sum(r["steps_per_task"]),
                   "total samples": sum(t["samples"] for t in r["train"])}
    return pd.DataFrame(rows).T


def steps_by_stream_length(runs: dict[str, dict], lengths=(20, 50, 100, 200)) -> pd.DataFrame:
    """Table 4's step columns: per method, its steps per task when the same total compute is cut
    into T tasks. Full fine-tuning's steps per task at T: its total over the run's own stream
    (steps per task × compute scale, floored, × the run's task count) / T, floored (at least 1:
    the paper's 28,400 / T); a method's from its measured MAFs and per-task MAFs as the runs
    count them (`vlcp.train.budget.steps_for_budget`, the per-task work paid from each task's
    budget). Columns `T=<n>`; `T=<own>` equals the run's steps per task."""
    from vlcp.train.budget import steps_for_budget

    rows = {}
    for e, r in runs.items():
        b, f = r["budget"], r["config"]["fomo"]
        ft_per_task = max(1, math.floor(f["steps_per_task"] * f.get("compute_scale", 1.0) + 1e-9))
        total = ft_per_task * len(r["tasks"])
        row = {}
        for t in lengths:
            ft_t = max(1, total // t)
            if f.get("budget", "mafs") == "mafs":
                row[f"T={t}"] = steps_for_budget(1, ft_t * b["full_ft_mafs"] - b["task_mafs"], b["mafs"])
            else:
                row[f"T={t}"] = ft_t
        rows[e] = row
    return pd.DataFrame(rows).T


def isolated_table(r: dict) -> pd.DataFrame:
    """Table 5's analogue (App. D.1) from one run of the `isolated` method over a
    dataset-incremental stream: per task, its dataset (one per task), θ0's zero-shot accuracy
    there, the accuracy after fine-tuning on it alone (the model after that task, trained from
    θ0) and the difference ("delta to ZS"), in points, with the task's steps."""
    from vlcp.data.concepts import parse_entry

    method = r["config"]["method"]["name"]
    if method != "isolated":
        raise ValueError(f"isolated_table: {r.get('experiment', 'the run')} ran method {method!r}, not 'isolated'")
    rows = {}
    for t, task in enumerate(r["tasks"]):
        names = {parse_entry(c).dataset for c in task}
        if len(names) != 1:
            raise ValueError(f"isolated_table: task {t + 1} of {r.get('experiment', 'the run')} spans {len(names)} datasets "
                             f"({', '.join(sorted(names))}): run it with fomo.ordering 'dataset' and fomo.num_tasks 0")
        d = names.pop()
        zs, ft = r["zero_shot"]["datasets"][d], r["trajectory"][t]["datasets"][d]
        rows[d] = {"zero-shot": zs, "fine-tuned alone": ft, "delta to ZS": ft - zs, "steps": r["steps_per_task"][t],
                   "test images": r["datasets"][d]["n"]}
    return pd.DataFrame(rows).T.rename_axis("dataset")


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


# --------------------------------------------------------------------------- the claims ledger
# Every claim below is a small function returning a `Claim` whose verdict comes from
# `vlcp.report.claims` (greater / equivalent verdicts on effects with intervals).
# FoMo runs one seed per setting: the sd of a difference of two runs is the test-set sampling
# noise of the metric (`noise_sd`) joined by the seed spread measured on the study's seed subset
# (report.fomo.spread: a few experiments at three seeds; `subset_spread`, `with_spread`), threaded
# through every claim as one `noise` dict; without that subset, test-set noise only (`TEST_ONLY`).

SRC = "FoMo-in-Flux"
TEST_ONLY = "test-set noise only; seed spread not measured"
EARLY_TASKS = 5                          # merge_early_retention_claim's first tasks
AREA = "mean GM along the stream"        # trajectory_area: the random-ordering claim's metric
# the paper's numbers (studies/fomo/paper.yaml: values and sources)
_PAPER = paper_data("fomo")
# §7.1: the endpoints of the concept-level orderings are "surprisingly similar", the extremes being
# concept-frequency (A_KA 55.2, A_ZS 65.6) and performance/easy-to-hard (53.8, 64.3).
PAPER_SIMILAR_ENDPOINTS = _PAPER["similar_endpoints"]
# §7.3: DataComp-Small's pool gives "up to 2.4 % A_ZS" over the reference pool, a change the paper calls
# significant; the reference pool's endpoint A_ZS is ≈ 64.4 (§7.1, random ordering).
PAPER_POOL_GAIN = (_PAPER["pool_gain_zs"], _PAPER["random_endpoint_zs"])
MERGES = ("fomo-ema-merge", "fomo-ft-merge", "fomo-zs-merge")
NON_MERGES = ("fomo-ft", "fomo-lora4", "fomo-lora64", "fomo-dora", "fomo-vera", "fomo-bitfit", "fomo-lnfit", "fomo-galore",
              "fomo-ewc", "fomo-si", "fomo-locked-image", "fomo-locked-text")
PEFT = ("fomo-lora4", "fomo-lora64", "fomo-dora", "fomo-vera", "fomo-bitfit", "fomo-lnfit")
LOCKED = ("fomo-locked-image", "fomo-locked-text")
CONCEPT_ORDERINGS = ("easy-to-hard", "frequency", "similarity")   # Fig. 15 left, beside "random"
POOLS = ("fomo-pool-onestyle", "fomo-pool-half", "fomo-pool-noisy")


def noise_sd(r: dict, row: dict | None = None) -> dict[str, float]:
    """The sd of a difference of two single-run values of A_KA, A_ZS and GM from test-set
    sampling alone: √2 × the binomial SE of one value (`macro_se`) at `row` (default: the run's
    endpoint); GM's SE by the delta method, SE_GM² = GM²/4 · (SE_KA²/A_KA² + SE_ZS²/A_ZS²)."""
    row = row or r["trajectory"][-1]
    ka, zs = macro_se(r, "adaptation", row), macro_se(r, "retention", row)
    if row["A_KA"] > 0 and row["A_ZS"] > 0:
        gm = row["GM"] / 2 * math.sqrt((ka / row["A_KA"]) ** 2 + (zs / row["A_ZS"]) ** 2)
    else:
        gm = max(ka, zs)
    return {"A_KA": math.sqrt(2) * ka, "A_ZS": math.sqrt(2) * zs, "GM": math.sqrt(2) * gm}


def similar_fraction(metric: str = "GM") -> float:
    """The largest endpoint gap the paper calls similar (§7.1: concept-frequency vs easy-to-hard
    ordering), as a fraction of their mean: GM 60.2 vs 58.8 -> 2.3 %, A_KA 2.6 %, A_ZS 2.0 %. A
    fraction, so that it carries to our scale (our GM is about a third of the paper's)."""
    (ka1, zs1), (ka2, zs2) = PAPER_SIMILAR_ENDPOINTS.values()
    pairs = {"A_KA": (ka1, ka2), "A_ZS": (zs1, zs2), "GM": (math.sqrt(ka1 * zs1), math.sqrt(ka2 * zs2))}
    if metric not in pairs:
        raise ValueError(f"similar_fraction: metric {metric!r} is not one of {sorted(pairs)}")
    a, b = pairs[metric]
    return abs(a - b) / ((a + b) / 2)


def early_key(k: int = EARLY_TASKS) -> str:
    """The name of the early-retention metric over tasks 1..k (a seed-spread metric and a noise key)."""
    return f"mean A_ZS, tasks 1-{k}"


def early_retention(r: dict, k: int = EARLY_TASKS) -> float:
    """Mean A_ZS after tasks 1..k (§5.2's "first update tasks")."""
    return float(np.mean([t["A_ZS"] for t in r["trajectory"][:k]]))


def spread_values(subset: dict[str, list[dict]], k: int = EARLY_TASKS) -> dict[str, dict[str, list[float]]]:
    """`claims.seed_spread`'s input from the seed subset ({experiment: [results per seed]}): per
    metric the ledger compares single-seed (endpoint A_KA, A_ZS, GM; the trajectory area, `AREA`;
    the early retention, `early_key(k)`), {experiment: [value per seed]}."""
    return {m: {e: [f(r) for r in rs] for e, rs in subset.items()} for m, f in ledger_metrics(k).items()}


def ledger_metrics(k: int = EARLY_TASKS) -> dict:
    """{metric: f(run)} of every metric the ledger compares: endpoint A_KA, A_ZS, GM; the trajectory
    area (`AREA`); the early retention (`early_key(k)`)."""
    return {"A_KA": lambda r: endpoint(r)["A_KA"], "A_ZS": lambda r: endpoint(r)["A_ZS"],
            "GM": lambda r: endpoint(r)["GM"], AREA: trajectory_area, early_key(k): lambda r: early_retention(r, k)}


def seed_blocks(deep: dict[str, dict[int, dict]], k: int = EARLY_TASKS) -> dict:
    """Per ledger metric: the runs' seeds as blocks (`claims.blocked_noise` over every experiment
    of `deep`, {experiment: {seed: run}}, run at common seeds; None where no three experiments
    share two seeds): the noise of a comparison of two experiments paired by seed."""
    return {m: blocked_noise({e: {s: f(r) for s, r in by.items()} for e, by in deep.items()}, "FoMo's runs")
            for m, f in ledger_metrics(k).items()}


def subset_spread(subset: dict[str, dict[int, dict]], k: int = EARLY_TASKS) -> dict | None:
    """`claims.seed_spread` of the subset's experiments that have ≥ 2 seeds (`load_subset`'s
    first value), its source naming them and their seeds; None when none has (the ledger then
    uses test-set noise only)."""
    kept = {e: by_seed for e, by_seed in subset.items() if len(by_seed) >= 2}
    if not kept:
        return None
    return seed_spread(spread_values({e: [by_seed[s] for s in sorted(by_seed)] for e, by_seed in kept.items()}, k),
                       runs_where(kept))


def with_spread(test: dict[str, float], spread: dict | None) -> dict:
    """The ledger's noise: `test` ({metric: test-set sd of one difference}, e.g. `noise_sd`) and,
    where `spread` (`claims.seed_spread`'s result) is given, its difference spread per metric
    ("seed"), their dof ("dof") and its source ("seed_source"). Without it, `test` as is."""
    noise = dict(test)
    if spread and spread.get("metrics"):
        noise["seed"] = {m: float(d["difference_spread"]) for m, d in spread["metrics"].items()}
        noise["dof"] = {m: int(d["dof"]) for m, d in spread["metrics"].items()}
        noise["seed_source"] = spread["source"]
    return noise


def ledger_noise(ref_run: dict, spread: dict | None = None) -> dict:
    """The noise of every single-seed comparison in the ledger: the test-set sd at the reference
    run's endpoint (`noise_sd`; the trajectory area takes the endpoint GM's, each of its points
    having about that test-set noise) joined by the subset's seed spread (`with_spread`)."""
    test = noise_sd(ref_run)
    return with_spread({**test, AREA: test["GM"]}, spread)


def noise_table(noise: dict, metrics=("A_KA", "A_ZS", "GM", AREA)) -> pd.DataFrame:
    """The noise shown beside the ledger: per metric (those `noise` has), the test-set sd of one
    difference, the seed part (the subset's difference spread; NaN: not measured), the sd of one
    single-seed difference the ledger uses (`comparison_sd`), its dof (inf: known) and source."""
    rows = {}
    for m in (m for m in metrics if m in noise):
        sd = comparison_sd(noise, m)
        rows[m] = {"test-set sd": noise[m], "seed spread": noise.get("seed", {}).get(m, np.nan),
                   "sd of a difference": sd.sd, "dof": sd.dof or np.inf, "source": sd.source}
    return pd.DataFrame.from_dict(rows, orient="index")


def seed_runs(runs: dict[str, dict], subset: dict[str, dict[int, dict]], experiments) -> dict[str, list[dict]]:
    """{experiment: its runs, one per seed} ("Does the stream teach?", the tables over seeds): every
    seed the subset (`load_subset`) has of it, else the study's one run; experiments with neither left out."""
    return {e: [subset[e][s] for s in sorted(subset[e])] if subset.get(e) else [runs[e]]
            for e in experiments if subset.get(e) or e in runs}


def table_runs(runs: dict[str, dict], subset: dict[str, dict[int, dict]], labels: dict) -> dict:
    """{label: experiment} -> {label: [its run at each seed]} (`seed_runs`) for the experiments that
    ran: a table's rows over seeds (the long profile passes its every seed; {} the study's one run)."""
    got = seed_runs(runs, subset, list(labels.values()))
    return {k: got[e] for k, e in labels.items() if e in got}


def comparison_sd(noise: dict, metric: str, evals: int = 2, runs: int = 2, test: float | None = None) -> Noise:
    """The sd of a comparison in `metric` spanning `evals` test-set evaluations and `runs`
    trained runs (a difference of two single-seed endpoints: 2 and 2; a difference of two gains:
    4 and 4; a run against its own θ0: 2 and 1): √(evals/2 · test² + runs/2 · seed²), test = the
    test-set sd of one difference (`noise[metric]`, or `test`), seed = the subset's difference
    spread (`with_spread`; the seed spread is measured on a fixed test set, so it lacks the
    test-set part), on the spread's dof. A metric without a seed spread: test-set noise only, said so."""
    test = noise[metric] if test is None else test
    seed = noise.get("seed", {}).get(metric)
    if seed is None:
        why = TEST_ONLY if "seed_source" not in noise else f"test-set noise only: the seed subset has no spread of {metric}"
        return Noise(math.sqrt(evals / 2) * test, why)
    dof = noise["dof"][metric]
    return Noise(math.sqrt(evals / 2 * test ** 2 + runs / 2 * seed ** 2),
                 f"test-set noise + {noise['seed_source']}; Student's t, {dof} dof", dof)


def _q(level: float, dof: int | None) -> float:
    """The two-sided `level` quantile: Student's t on `dof`, normal when dof is None."""
    return float(stats.t.ppf(0.5 + level / 2, dof) if dof else stats.norm.ppf(0.5 + level / 2))


@functools.lru_cache(maxsize=None)
def tukey_q(level: float, k: int, dof: int | None = None) -> float:
    """The `level` quantile of the studentized range of k means, their sd estimated on `dof`
    degrees of freedom (None: known, df ≈ ∞): the largest of k(k−1)/2 pairwise gaps, in
    standard errors of one mean."""
    return float(stats.studentized_range.ppf(level, k, dof or 1e4))


# --------------------------------------------------------------------------- power (issue 48)
# One rule carries every paper effect to our scale: its share of what full fine-tuning moves on the
# claim's metric in the paper (§6.2, ViT-B/16 over the default stream: A_KA +9.0, A_ZS −3.2; GM
# from those and §7.1's endpoints, `paper_headroom`) times what our full fine-tuning moves, fixed
# in report.fomo.power.headroom on calibration seeds before the ledger's runs (`study_scales`).
# Figures without numbers get a stand-in (`stand_in`): §7.1's "similar" endpoint gap, the largest
# gap the paper calls similar, hence a lower bound on any gap it reports as a difference.

# §6.2: "For ViT-B/16, we see a ΔA_KA ≈ 9.0% and negative zero-shot retention change ΔA_ZS ≈ 3.2%";
# L/14: (9.4, +0.8).
PAPER_FT_CHANGE = _PAPER["ft_change"]
# §7.2, Fig. 16: no buffer (.5/.5/0) against the reference mixture, in A_KA / A_ZS points
PAPER_NOBUFFER = _PAPER["nobuffer"]
POWER_METRICS = ("A_KA", "A_ZS", "GM")


def _paper_end() -> tuple[float, float]:
    """The paper's default full-FT endpoint (A_KA, A_ZS): §7.1's random ordering reaches A_ZS ≈ 64.4;
    its A_KA is not given, so the midpoint of the two concept orderings it gives (53.8, 55.2)."""
    return float(np.mean([ka for ka, _ in PAPER_SIMILAR_ENDPOINTS.values()])), PAPER_POOL_GAIN[1]


def paper_headroom(metric: str) -> float:
    """What full fine-tuning moves on `metric` in the paper (§6.2, ViT-B/16): A_KA 9.0 (its gain),
    A_ZS 3.2 (its loss); GM the change of √(A_KA·A_ZS) from θ0 (the endpoint, `_paper_end`, minus
    those changes) to the endpoint: ≈ 3.78, an estimate from the numbers the text gives."""
    dka, dzs = PAPER_FT_CHANGE["ViT-B/16"]
    if metric == "A_KA":
        return dka
    if metric == "A_ZS":
        return -dzs
    if metric == "GM":
        ka, zs = _paper_end()
        return math.sqrt(ka * zs) - math.sqrt((ka - dka) * (zs - dzs))
    raise ValueError(f"paper_headroom: metric {metric!r} is not one of {POWER_METRICS}")


def stand_in(metric: str) -> tuple[float, str]:
    """The paper effect of a claim whose figure gives no number, and its citation: §7.1's gap
    between the concept-frequency and easy-to-hard endpoints (A_KA 1.4, A_ZS 1.3, GM 1.36), the
    largest the paper calls "similar", so a lower bound on any gap it reports as a difference."""
    (ka1, zs1), (ka2, zs2) = PAPER_SIMILAR_ENDPOINTS.values()
    gap = {"A_KA": ka1 - ka2, "A_ZS": zs1 - zs2, "GM": math.sqrt(ka1 * zs1) - math.sqrt(ka2 * zs2)}[metric]
    return gap, (f"no number in the paper; stand-in {gap:.2f} {metric}: §7.1's 'similar' endpoints (frequency vs "
                 "easy-to-hard), the largest gap it calls similar, a lower bound on a gap it reports")


def nobuffer_gm_effect() -> float:
    """Fig. 16's no-buffer mixture below the reference in GM: the reference endpoint (`_paper_end`)
    against it moved by §7.2's −14.0 A_KA, −2.5 A_ZS (≈ 9.2)."""
    ka, zs = _paper_end()
    return math.sqrt(ka * zs) - math.sqrt((ka + PAPER_NOBUFFER[0]) * (zs + PAPER_NOBUFFER[1]))


def measured_headroom(metric: str, ft_runs: list[dict]) -> float:
    """Our full fine-tuning's movement on `metric` (as `paper_headroom`'s): the endpoint − θ0 on
    A_KA and GM, θ0 − the endpoint on A_ZS, averaged over `ft_runs`."""
    return float(np.mean(_changes(metric, ft_runs)))


def _changes(metric: str, ft_runs: list[dict]) -> list[float]:
    """Full FT's movement on `metric`, per run (`measured_headroom`'s terms)."""
    sign = -1.0 if metric == "A_ZS" else 1.0
    return [sign * (endpoint(r)[metric] - r["zero_shot"][metric]) for r in ft_runs]


def study_scales(study: dict, ft_runs: list[dict], unresolved: str | None = None) -> dict[str, Scale]:
    """The ledger's `Scale` per metric (A_KA, A_ZS, GM; the mean GM along the stream takes GM's, the
    early retention A_ZS's): our headroom from report.fomo.power.headroom ({metric: value}, fixed on
    calibration seeds, where its `calibrated_on` matches `ft_runs`, the runs of `study["reference"]`:
    `claims.calibration_mismatch`), else measured on this ledger's own full-FT runs
    (`measured_headroom`, and the scale says so, and why; carried to 0 where `unresolved`,
    `claims.unresolved_headroom` of the power table, says these runs do not resolve their headroom,
    or where full FT's change itself does not, on its seed sd: `claims.unresolved_pair`, the power
    table's pair being joint − θ0)."""
    from vlcp.errors import VlcpError
    from vlcp.report.claims import calibration_mismatch, calibration_source, measured_scale, pair_noise, unresolved_pair

    cfg = study.get("power") or {}
    fixed = cfg.get("headroom") or {}
    if not isinstance(fixed, dict):
        raise VlcpError(f"report.fomo.power.headroom: expected {{metric: value}}, got {fixed!r}")
    out = {}
    stale = calibration_mismatch(cfg, {study.get("reference", "fomo-ft"): ft_runs}, "report.fomo.power")
    for m in POWER_METRICS:
        if m in fixed and not stale:
            out[m] = Scale(float(fixed[m]), paper_headroom(m), f"full FT's change, {calibration_source(cfg, 'report.fomo.power')}")
        elif ft_runs:
            h = measured_headroom(m, ft_runs)
            out[m] = measured_scale(h, paper_headroom(m), "full FT's change, measured on this ledger's own full-FT runs: "
                                    f"{stale or 'report.fomo.power sets none'}",
                                    unresolved or unresolved_pair(h, pair_noise(dict(enumerate(_changes(m, ft_runs)))), f"full FT's change on {m}"))
    out[AREA], out[early_key()] = out.get("GM"), out.get("A_ZS")
    return {k: v for k, v in out.items() if v is not None}


def by_seed(runs: dict[str, dict], subset: dict[str, dict[int, dict]] | None, seed: int = 0) -> dict[str, dict[int, dict]]:
    """Every experiment's runs by seed: the seed subset's (`load_subset`: the study's seed and the
    spread seeds) where it has ≥ 2, else the study's one run at `seed`."""
    subset = subset or {}
    return {e: (subset[e] if len(subset.get(e) or {}) >= 2 else {seed: r}) for e, r in runs.items()}


def study_run(deep: dict, e: str) -> dict:
    """`e`'s run at its first seed (`by_seed`: the study's own run)."""
    return deep[e][min(deep[e])]


def _paired(deep: dict, a: str, b: str, f) -> tuple[list[float], list[float]]:
    """f(run) of a and b at the seeds both have (paired by seed); one run each (`study_run`) when
    they share fewer than two."""
    common = sorted(set(deep[a]) & set(deep[b]))
    if len(common) >= 2:
        return [f(deep[a][s]) for s in common], [f(deep[b][s]) for s in common]
    return [f(study_run(deep, a))], [f(study_run(deep, b))]


class Cmp(NamedTuple):
    """One comparison "a > b" of a claim: per-seed values, the noise of one single-run difference
    (used when a side has one run), the paper's effect carried to our scale, its citation, and
    `block`: the seeds as blocks (`seed_blocks`) when its sides are two experiments' own values of
    one metric (used when they are paired by seed)."""
    label: str
    a: list
    b: list
    noise: Noise
    scaled: float
    cite: str
    block: Noise | None = None


def _cmp(label: str, a, b, noise: Noise, metric: str, scales: dict, paper_effect: float | None = None,
         cite: str = "", block: Noise | None = None) -> Cmp:
    """A comparison on `metric`, its paper effect (`stand_in` when None) carried by `scales[metric]`."""
    if paper_effect is None:
        paper_effect, cite = stand_in(GM_OF.get(metric, metric))
    sc = scales[metric]
    return Cmp(label, list(a), list(b), noise, sc(paper_effect), f"{cite}; scaled {sc.cite()}", block)


def _runs_cmp(label: str, a, b, noise: dict, metric: str, scales: dict, paper_effect: float | None = None,
              cite: str = "") -> Cmp:
    """A comparison of two experiments' own values of `metric` (`_paired`'s): one single-seed
    difference's noise (`comparison_sd`) and the metric's seed blocks (`noise["block"]`)."""
    return _cmp(label, a, b, comparison_sd(noise, metric), metric, scales, paper_effect, cite,
                noise.get("block", {}).get(metric))


GM_OF = {AREA: "GM", early_key(): "A_ZS"}   # metrics that take another's stand-in


def _decide(text: str, where: str, cmps: list[Cmp], evidence: str = "") -> Claim:
    """`claims.judge` over `cmps` (each at 95 %; Bonferroni to refute when several): paired by seed
    where both sides have ≥ 2 seeds (no floor: the same test items), else one run each on the
    comparison's noise, and then that comparison is exploratory (below the study's depth: the row is
    never confirmed, but a comparison at depth can refute it)."""
    from vlcp.report import power as pw
    from vlcp.report.claims import judge

    k = len(cmps)

    def eff(c: Cmp, level: float) -> Effect:
        single = min(len(c.a), len(c.b)) < 2
        kw = dict(sd=c.noise.sd, sd_source=c.noise.source, sd_dof=c.noise.dof) if single else {"block": c.block}
        return effect(c.a, c.b, level=level, **kw)

    effects = [eff(c, 0.95) for c in cmps]
    adjusted = effects if k == 1 else [eff(c, pw.bonferroni_level(k)) for c in cmps]
    cites = list(dict.fromkeys(c.cite for c in cmps))
    return judge(text, effects, adjusted, [c.scaled for c in cmps], paper=" | ".join(cites), evidence=evidence,
                 source=f"{SRC} {where}", labels=[c.label for c in cmps] if k > 1 else None,
                 exploratory=[min(len(c.a), len(c.b)) < 2 for c in cmps])


def _end_of(m: str):
    return lambda r: endpoint(r)[m]


def _equivalence(text: str, where: str, va: list, vb: list, margin: float, noise: Noise, cite: str,
                 evidence: str = "", comparisons: int = 1) -> Claim:
    """`claims.powered_equivalence` of per-seed values (`_paired`'s); one run each: on `noise`, exploratory."""
    from vlcp.report.claims import powered_equivalence

    single = min(len(va), len(vb)) < 2
    kw = dict(sd=noise.sd, sd_source=noise.source, sd_dof=noise.dof) if single else {}
    return powered_equivalence(text, va, vb, margin, paper=cite, evidence=evidence, source=f"{SRC} {where}",
                               exploratory=single, comparisons=comparisons, **kw)


def not_run(claim: str, exps, runs: dict, where: str) -> Claim:
    """A claim whose runs are missing: inconclusive, naming them."""
    return Claim(claim, "inconclusive", "not run: " + ", ".join(e for e in exps if e not in runs), f"{SRC} {where}")


def merge_vs_ft_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft") -> Claim:
    """The main claim (§5.2, Fig. 6 right against left): EMA-Merge ends at a better accumulation–
    retention trade-off than full fine-tuning (endpoint GM), paired by seed over the seed subset."""
    text, where = "Main claim: EMA-Merge ends above full fine-tuning (endpoint GM, paired by seed)", "§5.2, Fig. 6"
    if "fomo-ema-merge" not in deep or reference not in deep:
        return not_run(text, ["fomo-ema-merge", reference], deep, where)
    a, b = _paired(deep, "fomo-ema-merge", reference, _end_of("GM"))
    ev = f"EMA-Merge GM {np.mean(a):.1f} vs full FT {np.mean(b):.1f} over {len(a)} seed{'s' if len(a) > 1 else ''}"
    return _decide(text, where, [_runs_cmp("", a, b, noise, "GM", scales)], ev)


def merging_best_claim(deep: dict, noise: dict, scales: dict) -> Claim:
    """§5.2, Fig. 6: the best merge's endpoint GM above the best of every other method (each chosen
    on the study's own runs)."""
    text, where = "Model merging gives the best accumulation–retention trade-off (endpoint GM)", "§5.2, Fig. 6"
    merges, others = [e for e in MERGES if e in deep], [e for e in NON_MERGES if e in deep]
    if not merges or not others:
        return not_run(text, [MERGES[0], NON_MERGES[0]], deep, where)
    gm = {e: endpoint(study_run(deep, e))["GM"] for e in merges + others}
    bm, bo = max(merges, key=gm.get), max(others, key=gm.get)
    a, b = _paired(deep, bm, bo, _end_of("GM"))
    return _decide(text, where, [_runs_cmp("", a, b, noise, "GM", scales)],
                   f"best merge {bm} GM {gm[bm]:.1f} vs best other {bo} GM {gm[bo]:.1f}")


def merge_early_retention_claim(deep: dict, noise: dict, scales: dict, k: int = EARLY_TASKS) -> Claim:
    """§5.2, Fig. 6 right: EMA- and ZS-Merge "provide impressive boosts in zero-shot retention
    A_ZS during the first update tasks", i.e. above the starting model θ0's A_ZS (the run's
    `zero_shot` evaluation): the mean A_ZS after tasks 1..k against θ0's, per merge, each per seed
    against its θ0. One run: its test-set noise at θ0 (`noise_sd`) and the seed spread of
    `early_key(k)` (one trained run: θ0 is the same for every seed)."""
    text = f"EMA-Merge and ZS-Merge raise zero-shot retention above θ0's in the first update tasks (mean A_ZS, tasks 1-{k}, vs θ0)"
    where = "§5.2, Fig. 6 right"
    exps = [e for e in ("fomo-ema-merge", "fomo-zs-merge") if e in deep]
    if not exps:
        return not_run(text, ["fomo-ema-merge", "fomo-zs-merge"], deep, where)
    cmps, ev = [], []
    for e in exps:
        rs = [deep[e][s] for s in sorted(deep[e])]
        early, z0 = [early_retention(r, k) for r in rs], [r["zero_shot"]["A_ZS"] for r in rs]
        sd = comparison_sd(noise, early_key(k), runs=1, test=noise_sd(rs[0], rs[0]["zero_shot"])["A_ZS"])
        cmps.append(_cmp(e, early, z0, sd, early_key(k), scales))
        ev.append(f"{e} {np.mean(early):.1f} over tasks 1-{min(k, len(rs[0]['trajectory']))} vs θ0 {np.mean(z0):.1f}")
    return _decide(text, where, cmps, "; ".join(ev))


def _vs_reference(deep: dict, noise: dict, scales: dict, reference: str, rivals, directions) -> list[Cmp]:
    """Per rival and per (metric, sign) of `directions`: "reference > rival" (+1) or "rival >
    reference" (−1) on the endpoint metric, stand-in effects."""
    out = []
    for e in rivals:
        for m, sign in directions:
            a, b = _paired(deep, reference, e, _end_of(m))
            if sign < 0:
                a, b = b, a
            out.append(_runs_cmp(f"{e} {m}", a, b, noise, m, scales))
    return out


def peft_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft") -> Claim:
    """§5.1: every PEFT method accumulates less (A_KA) and forgets less (A_ZS higher) than full
    fine-tuning (same θ0, so ΔA_KA and forgetting compare as the endpoints do)."""
    text, where = "PEFT methods accumulate less and forget less than full fine-tuning", "§5.1, Figs. 6-7"
    peft = [e for e in PEFT if e in deep]
    if reference not in deep or not peft:
        return not_run(text, [reference, *PEFT], deep, where)
    zs = study_run(deep, reference)["zero_shot"]
    end = lambda e, m: endpoint(study_run(deep, e))[m]   # noqa: E731
    ev = "; ".join(f"{e}: ΔA_KA {end(e, 'A_KA') - zs['A_KA']:+.1f}, forgetting {zs['A_ZS'] - end(e, 'A_ZS'):+.1f}"
                   for e in [*peft, reference])
    return _decide(text, where, _vs_reference(deep, noise, scales, reference, peft, [("A_KA", 1), ("A_ZS", -1)]), ev)


def ewc_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft") -> Claim:
    """§5.1: EWC retains more (A_ZS) and accumulates less (A_KA) than full fine-tuning."""
    text, where = "EWC retains strongly but accumulates little (vs full fine-tuning)", "§5.1, Fig. 6"
    if "fomo-ewc" not in deep or reference not in deep:
        return not_run(text, ["fomo-ewc", reference], deep, where)
    r, f = study_run(deep, "fomo-ewc"), study_run(deep, reference)
    ev = (f"A_ZS {endpoint(r)['A_ZS']:.1f} vs {endpoint(f)['A_ZS']:.1f}; A_KA {endpoint(r)['A_KA']:.1f} vs "
          f"{endpoint(f)['A_KA']:.1f} (steps/task {r['steps_per_task'][0]} vs {f['steps_per_task'][0]})")
    return _decide(text, where, _vs_reference(deep, noise, scales, reference, ["fomo-ewc"], [("A_KA", 1), ("A_ZS", -1)]), ev)


def _margin_note(metric: str, base: float) -> str:
    return (f"margin ±{similar_fraction(metric) * base:.2f} = {similar_fraction(metric):.1%} of full FT's {metric} {base:.1f}, "
            f"the paper's own largest endpoint gap it calls similar (§7.1: concept-frequency vs easy-to-hard ordering)")


def si_claim(deep: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """§5.1: SI "effectively offers no benefits over standard finetuning, either in A_KA or A_ZS":
    endpoint GM equivalent to full fine-tuning's within the paper's similarity margin (§5.1 gives
    no number for SI; the margin is the gap §7.1 calls similar, as a fraction of GM)."""
    text, where = "SI behaves like full fine-tuning (endpoint GM equivalent within the paper's similarity margin)", "§5.1, Fig. 6"
    if "fomo-si" not in deep or reference not in deep:
        return not_run(text, ["fomo-si", reference], deep, where)
    si, ft = _paired(deep, "fomo-si", reference, _end_of("GM"))
    base = float(np.mean(ft))
    return _equivalence(text, where, si, ft, similar_fraction("GM") * base,
                        comparison_sd(noise, "GM"), "§5.1: no number; the margin is §7.1's similar gap as a share of GM",
                        f"SI GM {np.mean(si):.1f} vs full FT {base:.1f}; {_margin_note('GM', base)}")


def ar_rsqrt_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft") -> Claim:
    """§6.1, Fig. 11: the autoregressive rsqrt meta-schedule retains more (A_ZS above per-task
    cosine's) at "nearly the same" accumulation: A_KA not below cosine's by more than the paper's
    similarity margin m (non-inferiority: a + m > b, whose paper effect is m, the paper reading a ≈ b)."""
    text, where = "The autoregressive rsqrt meta-schedule retains more at similar accumulation (vs per-task cosine)", "§6.1, Fig. 11"
    if "fomo-ar-rsqrt" not in deep or reference not in deep:
        return not_run(text, ["fomo-ar-rsqrt", reference], deep, where)
    ka_ar, ka = _paired(deep, "fomo-ar-rsqrt", reference, _end_of("A_KA"))
    m = similar_fraction("A_KA") * float(np.mean(ka))
    zs = _vs_reference(deep, noise, scales, reference, ["fomo-ar-rsqrt"], [("A_ZS", -1)])
    ni = Cmp("A_KA + margin vs cosine's", [x + m for x in ka_ar], ka, comparison_sd(noise, "A_KA"), m,
             "§6.1: 'nearly the same' A_KA, i.e. a difference of 0: the non-inferiority margin itself",
             noise.get("block", {}).get("A_KA"))
    ev = (f"A_ZS {np.mean(zs[0].a):.1f} vs {np.mean(zs[0].b):.1f}; A_KA {np.mean(ka_ar):.1f} vs {np.mean(ka):.1f} "
          f"(non-inferiority, {_margin_note('A_KA', float(np.mean(ka)))})")
    return _decide(text, where, [*zs, ni], ev)


def best_of_claim(text: str, deep: dict, best: str, rivals, metric: str, noise: dict, scales: dict, where: str,
                  value=None) -> Claim:
    """"`best` beats every rival in `metric`" (an endpoint metric; with `value(run)`, another per-run
    number, e.g. the mean GM along the stream, `metric` naming its key in `noise` and `scales`)."""
    wanted = [e for e in rivals if e != best]
    rivals = [e for e in wanted if e in deep]
    if best not in deep or not rivals:
        return not_run(text, [best, *wanted], deep, where)
    value = value or _end_of(metric)
    cmps = [_runs_cmp(e, *_paired(deep, best, e, value), noise, metric, scales) for e in rivals]
    return _decide(text, where, cmps, ", ".join(f"{e} {value(study_run(deep, e)):.1f}" for e in [best, *rivals]))


def mixtures_claim(deep: dict, noise: dict, scales: dict, mixes, reference: str = "fomo-ft") -> Claim:
    """§7.2, Fig. 16: IID-fy beats every other mixture and no-buffer is below every other (GM); the
    reference against no-buffer carries §7.2's numbers (`nobuffer_gm_effect`), the rest a stand-in."""
    text, where = "IID-fied mixtures are best and no-buffer is worst (endpoint GM)", "§7.2, Fig. 16"
    mix = [e for e in mixes if e in deep]
    if "fomo-mix-iidify" not in deep or "fomo-mix-nobuffer" not in deep:
        return not_run(text, ["fomo-mix-iidify", "fomo-mix-nobuffer"], deep, where)
    gm = _end_of("GM")
    cmps = [_runs_cmp(f"iidify vs {e}", *_paired(deep, "fomo-mix-iidify", e, gm), noise, "GM", scales)
            for e in mix if e != "fomo-mix-iidify"]
    nob = f"§7.2: no buffer {PAPER_NOBUFFER[0]:+.1f} A_KA, {PAPER_NOBUFFER[1]:+.1f} A_ZS vs the reference: {nobuffer_gm_effect():.2f} GM"
    cmps += [_runs_cmp(f"{e} vs nobuffer", *_paired(deep, e, "fomo-mix-nobuffer", gm), noise, "GM", scales,
                       *((nobuffer_gm_effect(), nob) if e == reference else (None, "")))
             for e in mix if e != "fomo-mix-nobuffer"]
    return _decide(text, where, cmps, ", ".join(f"{e} {gm(study_run(deep, e)):.1f}" for e in mix))


def orderings_similar_claim(deep: dict, noise: dict, orders: dict[str, str]) -> Claim:
    """§7.1, Fig. 15 left: the concept-level orderings' endpoints are "surprisingly similar":
    each one's endpoint GM equivalent to random's within the paper's own spread (its extremes,
    frequency vs easy-to-hard, 2.3 % of GM apart), every one must hold. Dataset-level orderings are
    left out: the paper finds they cost retention (§7.1)."""
    text, where = "Endpoints are similar across orderings (concept-level orderings' endpoint GM equivalent to random's)", "§7.1, Fig. 15"
    ref = orders["random"]
    rivals = [orders[k] for k in CONCEPT_ORDERINGS if k in orders and orders[k] in deep]
    if ref not in deep or not rivals:
        return not_run(text, [ref, *(orders[k] for k in CONCEPT_ORDERINGS if k in orders)], deep, where)
    gm = _end_of("GM")
    base = gm(study_run(deep, ref))
    margin = similar_fraction("GM") * base
    ev = ", ".join(f"{e} {gm(study_run(deep, e)):.1f}" for e in [ref, *rivals]) + f"; margin ±{margin:.2f} = {similar_fraction('GM'):.1%} of random's GM (the paper's own spread)"
    cite = "§7.1: frequency 55.2/65.6 vs easy-to-hard 53.8/64.3 (A_KA/A_ZS) called similar: 2.3 % of GM"
    return all_equivalent(text, [_equivalence(text, where, *_paired(deep, e, ref, gm), margin, comparison_sd(noise, "GM"),
                                              cite, f"{e}: {ev}", comparisons=len(rivals)) for e in rivals])


def model_size_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft") -> Claim:
    """§6.2, Fig. 12 left: forgetting (θ0's A_ZS − the endpoint's, each size from its own θ0)
    orders small > default > large; default − large carries §6.2's B/16 vs L/14 (3.2 vs −0.8), small −
    default a stand-in. A difference of two forgettings spans four evaluations and two trained runs."""
    text, where = "Larger models forget less (θ0's A_ZS minus the endpoint's, small > default > large)", "§6.2, Fig. 12"
    order = ["fomo-ft-s", reference, "fomo-ft-l"]
    if not all(e in deep for e in order):
        return not_run(text, order, deep, where)
    forg = lambda r: r["zero_shot"]["A_ZS"] - endpoint(r)["A_ZS"]   # noqa: E731
    sd = comparison_sd(noise, "A_ZS", evals=4, runs=2)
    (_, zb), (_, zl) = PAPER_FT_CHANGE["ViT-B/16"], PAPER_FT_CHANGE["ViT-L/14"]
    cmps = [_cmp("small vs default", *_paired(deep, order[0], order[1], forg), sd, "A_ZS", scales),
            _cmp("default vs large", *_paired(deep, order[1], order[2], forg), sd, "A_ZS", scales, zl - zb,
                 f"§6.2: forgetting B/16 {-zb:.1f} vs L/14 {-zl:.1f}")]
    return _decide(text, where, cmps, ", ".join(f"{e} {forg(study_run(deep, e)):.1f}" for e in order))


def pool_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft", pools=POOLS, level: float = 0.95) -> Claim:
    """§7.3, Fig. 17: the replayed pool changes zero-shot retention. The largest pairwise A_ZS gap
    among the k pools (the study's runs) against Tukey's studentized range (k pools, the noise on
    its dof): the interval's sd made Tukey's simultaneous one, so 5 % false alarms under pure noise
    whatever k. Its paper effect: the smallest change §7.3 calls significant (2.4 A_ZS)."""
    text, where = "The choice of replayed pool changes zero-shot retention (largest pairwise endpoint A_ZS gap, Tukey-adjusted)", "§7.3, Fig. 17"
    pl = [e for e in [reference, *pools] if e in deep]
    if reference not in deep or len(pl) < 2:
        return not_run(text, [reference, *pools], deep, where)
    zs = {e: endpoint(study_run(deep, e))["A_ZS"] for e in pl}
    hi, lo = max(pl, key=zs.get), min(pl, key=zs.get)
    sd = comparison_sd(noise, "A_ZS")
    k = len(pl)
    sd95 = tukey_q(level, k, sd.dof) * sd.sd / math.sqrt(2) / _q(level, None)
    cmp = _cmp(f"{hi} vs {lo}", [zs[hi]], [zs[lo]], Noise(sd95, f"{sd.source}; Tukey-adjusted for {k} pools", sd.dof),
               "A_ZS", scales, PAPER_POOL_GAIN[0], f"§7.3: up to {PAPER_POOL_GAIN[0]} A_ZS between pools")
    return _decide(text, where, [cmp], ", ".join(f"{e_} {zs[e_]:.1f}" for e_ in pl) + f"; largest gap {hi} − {lo}")


def compute_scaling_claim(deep: dict, noise: dict, scales: dict) -> Claim:
    """§6.2, Fig. 12 right: EMA-Merge's GM gain from 0.25× to 6× compute above full FT's, per seed
    where all four runs have the same seeds (the long profile), else one run each (a difference of
    two gains spans four evaluations and four trained runs)."""
    text, where = "Merging turns extra compute into gains better than fine-tuning (GM gain, 0.25× → 6×)", "§6.2, Fig. 12"
    exps = ["fomo-ft-c025", "fomo-ft-c6", "fomo-ema-c025", "fomo-ema-c6"]
    if not all(e in deep for e in exps):
        return not_run(text, exps, deep, where)
    common = sorted(set.intersection(*(set(deep[e]) for e in exps)))
    seeds = common if len(common) >= 2 else [None]          # paired by seed where all four have them, else one run each
    gm = lambda e, s: endpoint(study_run(deep, e) if s is None else deep[e][s])["GM"]   # noqa: E731
    g_ft = [gm("fomo-ft-c6", s) - gm("fomo-ft-c025", s) for s in seeds]
    g_ema = [gm("fomo-ema-c6", s) - gm("fomo-ema-c025", s) for s in seeds]
    return _decide(text, where, [_cmp("", g_ema, g_ft, comparison_sd(noise, "GM", evals=4, runs=4), "GM", scales)],
                   f"EMA-Merge {np.mean(g_ema):+.1f} vs full FT {np.mean(g_ft):+.1f} over {len(seeds)} seed{'s' if len(seeds) > 1 else ''}")


def stream_length_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft") -> Claim:
    """Fig. 19 right: T = 50 at equal total compute ends below T = 20 in A_KA and in A_ZS."""
    text, where = "A longer stream (T = 50) at equal compute lowers both accumulation and retention", "Fig. 19"
    if "fomo-t50" not in deep or reference not in deep:
        return not_run(text, ["fomo-t50", reference], deep, where)
    end = lambda e, m: endpoint(study_run(deep, e))[m]   # noqa: E731
    ev = (f"T=20 {end(reference, 'A_KA'):.1f}/{end(reference, 'A_ZS'):.1f} vs T=50 "
          f"{end('fomo-t50', 'A_KA'):.1f}/{end('fomo-t50', 'A_ZS'):.1f} (A_KA/A_ZS)")
    return _decide(text, where, _vs_reference(deep, noise, scales, reference, ["fomo-t50"], [("A_KA", 1), ("A_ZS", 1)]), ev)


def locked_towers_claim(deep: dict, noise: dict, scales: dict, reference: str = "fomo-ft") -> Claim:
    """§6.3, Fig. 13 (Finding 4 of §6): "full model tuning beats locked image or text encoder
    training over long update cycles", although a locked tower buys more steps at equal MAFs
    (Table 4: 12,982 vs 1,420 per task for locked-image). Endpoint GM of full FT above each
    locked run's, all must hold; the evidence says what our runs mean for the finding."""
    text, where = "Tuning both towers beats locking the image or the text tower (endpoint GM, equal MAFs)", "§6.3, Fig. 13 (Finding 4)"
    locked = [e for e in LOCKED if e in deep]
    if reference not in deep or not locked:
        return not_run(text, [reference, *LOCKED], deep, where)
    t4 = paper_table("fomo_table4").set_index("method")
    ft, steps_ft = endpoint(study_run(deep, reference))["GM"], study_run(deep, reference)["steps_per_task"][0]
    parts = []
    for e in locked:
        paper_x = t4.loc[e.removeprefix("fomo-"), "steps_T20"] / t4.loc["full-ft", "steps_T20"]
        gm = endpoint(study_run(deep, e))["GM"]
        parts.append(f"{e} GM {gm:.1f} with {study_run(deep, e)['steps_per_task'][0] / steps_ft:.1f}× full FT's steps per task "
                     f"(paper {paper_x:.1f}×)" + (f"; it ends {gm - ft:.1f} GM above full FT: at our scale the extra steps "
                                                   "of a locked tower can outweigh joint tuning" if gm > ft else ""))
    cmps = _vs_reference(deep, noise, scales, reference, locked, [("GM", 1)])
    return _decide(text, where, cmps, f"full FT GM {ft:.1f}; " + "; ".join(parts))


def memory_order_claim(mult: dict[str, float], where: str) -> Claim:
    """Table 4's memory order (`MEMORY_ORDER`) on multipliers from tensor accounting (exact: no
    sampling noise): confirmed when every link holds, ties allowed only where the paper writes ≤
    (full FT ≤ EWC, SI); refuted when one does not (an exact measurement excludes it)."""
    text = f"Memory multipliers keep the paper's order: locked-image < LNFit/BitFit < LoRA < full FT ≤ EWC/SI ({where.split(',')[0]})"
    missing = [k for k in MEMORY_ORDER if k not in mult]
    if missing:
        return Claim(text, "inconclusive", "not measured: " + ", ".join(missing), f"{SRC} Table 4")
    li, ln, bf, lora, ft, ewc, si = (mult[k] for k in MEMORY_ORDER)
    links = [(ln, li, 0.0), (bf, li, 0.0), (lora, ln, 0.0), (lora, bf, 0.0), (ft, lora, 0.0), (ewc, ft, -1e-9), (si, ft, -1e-9)]
    broken = [i for i, (a, b, gap) in enumerate(links) if not a - b > gap]
    e = min((effect([a], [b], sd=0.0, sd_source="tensor accounting, exact") for a, b, _ in links), key=lambda x: x.diff)
    return claim_from(text, "refuted" if broken else "confirmed", e,
                      ", ".join(f"{k} {mult[k]:.2f}" for k in MEMORY_ORDER) + f" ({where})"
                      + (f"; {len(broken)} link{'s' if len(broken) > 1 else ''} of the order broken" if broken else ""),
                      f"{SRC} Table 4")


def ledger(runs: dict, study: dict, orders: dict[str, str], mm_tiny: dict[str, float], bench: dict | None = None,
           spread: dict | None = None, subset: dict[str, dict[int, dict]] | None = None,
           unresolved: str | None = None) -> list[Claim]:
    """Every FoMo claim, in the report's order. `study`: params' report.fomo (reference, seed,
    studies, power); `orders`: ordering label -> experiment (Fig. 15); `mm_tiny`: the study runs'
    memory multipliers by Table 4's row names; `bench`: benchmarks/fomo_memory.py's result, if any;
    `spread`: the seed subset's `subset_spread` (None: test-set noise only); `subset`: its runs by
    seed (`load_subset`): comparisons whose sides both have ≥ 2 seeds are paired by seed, the rest
    are single-run and exploratory. `unresolved`: why a headroom measured on these runs cannot
    scale the paper's effects (`study_scales`)."""
    ref = study["reference"]
    deep = by_seed(runs, subset, study.get("seed", 0))
    noise = ledger_noise(runs[ref], spread) | {"block": seed_blocks(deep)}
    scales = study_scales(study, [deep[ref][s] for s in sorted(deep[ref])], unresolved)
    area = trajectory_area
    claims = [
        merge_vs_ft_claim(deep, noise, scales, ref),
        merging_best_claim(deep, noise, scales),
        merge_early_retention_claim(deep, noise, scales),
        peft_claim(deep, noise, scales, ref),
        ewc_claim(deep, noise, scales, ref),
        si_claim(deep, noise, ref),
        ar_rsqrt_claim(deep, noise, scales, ref),
        locked_towers_claim(deep, noise, scales, ref),
        best_of_claim("τ = 0.01 beats higher initial temperatures (endpoint GM)", deep, "fomo-tau001",
                      study["studies"].get("temperature", []), "GM", noise, scales, "§6.4, Fig. 14"),
        mixtures_claim(deep, noise, scales, [ref, *study["studies"].get("mixtures", [])], ref),
        best_of_claim("Random ordering gives the most favourable trajectory (mean GM along the stream)", deep, orders["random"],
                      [e for k, e in orders.items() if k != "random"], AREA, noise, scales, "§7.1, Fig. 15", value=area),
        orderings_similar_claim(deep, noise, orders),
        model_size_claim(deep, noise, scales, ref),
        pool_claim(deep, noise, scales, ref),
        compute_scaling_claim(deep, noise, scales),
        best_of_claim("The learning rate derived from pretraining gives the highest final accumulation", deep, ref,
                      ["fomo-lr1e-4", "fomo-lr3e-4", "fomo-lr3e-3"], "A_KA", noise, scales, "§6.1, Fig. 9"),
        stream_length_claim(deep, noise, scales, ref),
    ]
    claims.append(memory_order_claim(mm_tiny, "vlcp-tiny, the study's runs"))
    if bench:
        claims.append(memory_order_claim({k: r["memory_multiplier"] for k, r in bench["methods"].items()},
                                         f"{bench['model']}, batch {bench['target_batch']}, benchmarks/fomo_memory.py"))
    return claims


def run_headline(r: dict) -> dict[str, float]:
    """`vlcp report metrics`' numbers of a concept-stream run: its endpoint A_KA, A_ZS and GM."""
    return endpoint(r) if "trajectory" in r else {}


def run_curve(r: dict) -> list[float] | None:
    """`vlcp report metrics`' curve of a concept-stream run: GM after every task (θ0 first)."""
    return [row["GM"] for row in r["trajectory"]] if "trajectory" in r else None


def plot_files(runs: dict[str, list[dict]], experiments: list[str] | None) -> dict[str, str]:
    """plots/fomo/<experiment>.csv: after task (0 = θ0), A_KA, A_ZS, GM of each plotted experiment's first run."""
    return {f"{e}.csv": trajectory(runs[e][0]).round(4).to_csv(lineterminator="\n") for e in experiments or [] if e in runs}


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' curves: the methods study's runs at the study's seed."""
    return {"experiments": (block.get("studies") or {}).get("methods"),
            "seeds": [block["seed"]] if "seed" in block else None}
