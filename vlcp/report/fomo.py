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

import numpy as np
import pandas as pd
from scipy import stats

from vlcp.eval import continual
from vlcp.report.claims import (Claim, Effect, Noise, claim_from, combine, effect, equivalent_verdict, runs_where,
                                greater_verdict, seed_spread)
from vlcp.report.claims import spread_frame  # noqa: F401  (the notebook's seed-spread table)
from vlcp.report.results import load_subset  # noqa: F401  (the notebook calls fm.load_subset)
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
# §7.1: the endpoints of the concept-level orderings are "surprisingly similar", the extremes being
# concept-frequency (A_KA 55.2, A_ZS 65.6) and performance/easy-to-hard (53.8, 64.3); also in refs/fomo_text.csv.
PAPER_SIMILAR_ENDPOINTS = {"concept-frequency": (55.2, 65.6), "performance (easy-to-hard)": (53.8, 64.3)}
# §7.3: DataComp-Small's pool gives "up to 2.4 % A_ZS" over the reference pool, a change the paper calls
# significant; the reference pool's endpoint A_ZS is ≈ 64.4 (§7.1, random ordering).
PAPER_POOL_GAIN = (2.4, 64.4)
MERGES = ("fomo-ema-merge", "fomo-ft-merge", "fomo-zs-merge")
NON_MERGES = ("fomo-ft", "fomo-lora4", "fomo-lora64", "fomo-dora", "fomo-vera", "fomo-bitfit", "fomo-lnfit", "fomo-galore",
              "fomo-ewc", "fomo-si", "fomo-locked-image", "fomo-locked-text")
PEFT = ("fomo-lora4", "fomo-lora64", "fomo-dora", "fomo-vera", "fomo-bitfit", "fomo-lnfit")
LOCKED = ("fomo-locked-image", "fomo-locked-text")
CONCEPT_ORDERINGS = ("easy-to-hard", "frequency", "similarity")   # Fig. 15 left, beside "random"
POOLS = ("fomo-pool-onestyle", "fomo-pool-half", "fomo-pool-noisy")
_RANK = {"not confirmed": 0, "inconclusive": 1, "not testable": 2, "confirmed": 3}


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


def _end(runs: dict, e: str, m: str) -> float:
    return endpoint(runs[e])[m]


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
    per_run = {"A_KA": lambda r: endpoint(r)["A_KA"], "A_ZS": lambda r: endpoint(r)["A_ZS"],
               "GM": lambda r: endpoint(r)["GM"], AREA: trajectory_area, early_key(k): lambda r: early_retention(r, k)}
    return {m: {e: [f(r) for r in rs] for e, rs in subset.items()} for m, f in per_run.items()}


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


def teach_runs(runs: dict[str, dict], subset: dict[str, dict[int, dict]], experiments) -> dict[str, list[dict]]:
    """{experiment: its runs, one per seed} for "Does the stream teach?": every seed the subset
    (`load_subset`) has of it, else the study's one run; experiments with neither left out."""
    return {e: [subset[e][s] for s in sorted(subset[e])] if subset.get(e) else [runs[e]]
            for e in experiments if subset.get(e) or e in runs}


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


def _gt(a: float, b: float, sd: Noise, min_gap: float = 0.0) -> tuple[str, Effect]:
    """"a > b (+ min_gap)" for one run each, `sd` the sd of the difference (on its dof)."""
    e = effect([a], [b], sd=sd.sd, sd_source=sd.source, sd_dof=sd.dof)
    return greater_verdict(e, min_gap), e


def _equiv(a: float, b: float, margin: float, sd: Noise) -> tuple[str, Effect]:
    """"a ≈ b within ±margin" (`claims.equivalent_verdict`, 90 % interval) for one run each, the
    interval on `sd.dof` (Student's t; normal when None)."""
    return equivalent_verdict([a], [b], margin, sd=sd.sd, sd_source=sd.source, sd_dof=sd.dof)


def _all(claim: str, pairs: list[tuple[str, Effect]], evidence: str, source: str) -> Claim:
    """A claim that needs every comparison: the verdicts combined; the effect shown is the one
    that decides it (the least favourable comparison)."""
    verdict = combine([v for v, _ in pairs])
    e = min(pairs, key=lambda p: (_RANK[p[0]], p[1].low))[1]
    return claim_from(claim, verdict, e, evidence, source)


def not_run(claim: str, exps, runs: dict, where: str) -> Claim:
    """A claim whose runs are missing: inconclusive, naming them."""
    return Claim(claim, "inconclusive", "not run: " + ", ".join(e for e in exps if e not in runs), f"{SRC} {where}")


def merging_best_claim(runs: dict, noise: dict) -> Claim:
    """§5.2, Fig. 6: the best merge's endpoint GM above the best of every other method."""
    text, where = "Model merging gives the best accumulation–retention trade-off (endpoint GM)", "§5.2, Fig. 6"
    merges, others = [e for e in MERGES if e in runs], [e for e in NON_MERGES if e in runs]
    if not merges or not others:
        return not_run(text, [MERGES[0], NON_MERGES[0]], runs, where)
    gm = {e: _end(runs, e, "GM") for e in merges + others}
    bm, bo = max(merges, key=gm.get), max(others, key=gm.get)
    v, e = _gt(gm[bm], gm[bo], comparison_sd(noise, "GM"))
    return claim_from(text, v, e, f"best merge {bm} GM {gm[bm]:.1f} vs best other {bo} GM {gm[bo]:.1f}", f"{SRC} {where}")


def merge_early_retention_claim(runs: dict, noise: dict | None = None, k: int = EARLY_TASKS) -> Claim:
    """§5.2, Fig. 6 right: EMA- and ZS-Merge "provide impressive boosts in zero-shot retention
    A_ZS during the first update tasks", i.e. above the starting model θ0's A_ZS (the run's
    `zero_shot` evaluation): the mean A_ZS after tasks 1..k against θ0's, per merge, combined.
    The sd: each run's test-set noise at θ0 (`noise_sd`) and, where `noise` has it, the seed
    spread of `early_key(k)` (one trained run: θ0 is the same for every seed)."""
    text = f"EMA-Merge and ZS-Merge raise zero-shot retention above θ0's in the first update tasks (mean A_ZS, tasks 1-{k}, vs θ0)"
    where = "§5.2, Fig. 6 right"
    exps = [e for e in ("fomo-ema-merge", "fomo-zs-merge") if e in runs]
    if not exps:
        return not_run(text, ["fomo-ema-merge", "fomo-zs-merge"], runs, where)
    pairs, ev = [], []
    for e in exps:
        r = runs[e]
        first = r["trajectory"][:k]
        early, z0 = early_retention(r, k), r["zero_shot"]["A_ZS"]
        pairs.append(_gt(early, z0, comparison_sd(noise or {}, early_key(k), runs=1, test=noise_sd(r, r["zero_shot"])["A_ZS"])))
        ev.append(f"{e} {early:.1f} over tasks 1-{len(first)} vs θ0 {z0:.1f}")
    return _all(text, pairs, "; ".join(ev), f"{SRC} {where}")


def peft_claim(runs: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """§5.1: every PEFT method accumulates less (A_KA) and forgets less (A_ZS higher) than full
    fine-tuning (same θ0, so ΔA_KA and forgetting compare as the endpoints do)."""
    text, where = "PEFT methods accumulate less and forget less than full fine-tuning", "§5.1, Figs. 6-7"
    peft = [e for e in PEFT if e in runs]
    if reference not in runs or not peft:
        return not_run(text, [reference, *PEFT], runs, where)
    zs = runs[reference]["zero_shot"]
    ka, zs_ = comparison_sd(noise, "A_KA"), comparison_sd(noise, "A_ZS")
    pairs = [p for e in peft for p in (_gt(_end(runs, reference, "A_KA"), _end(runs, e, "A_KA"), ka),
                                         _gt(_end(runs, e, "A_ZS"), _end(runs, reference, "A_ZS"), zs_))]
    dka = lambda e: _end(runs, e, "A_KA") - zs["A_KA"]   # noqa: E731
    fzs = lambda e: zs["A_ZS"] - _end(runs, e, "A_ZS")   # noqa: E731
    ev = "; ".join(f"{e}: ΔA_KA {dka(e):+.1f}, forgetting {fzs(e):+.1f}" for e in peft)
    return _all(text, pairs, ev + f" | full FT: ΔA_KA {dka(reference):+.1f}, forgetting {fzs(reference):+.1f}", f"{SRC} {where}")


def ewc_claim(runs: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """§5.1: EWC retains more (A_ZS) and accumulates less (A_KA) than full fine-tuning."""
    text, where = "EWC retains strongly but accumulates little (vs full fine-tuning)", "§5.1, Fig. 6"
    if "fomo-ewc" not in runs or reference not in runs:
        return not_run(text, ["fomo-ewc", reference], runs, where)
    pairs = [_gt(_end(runs, "fomo-ewc", "A_ZS"), _end(runs, reference, "A_ZS"), comparison_sd(noise, "A_ZS")),
             _gt(_end(runs, reference, "A_KA"), _end(runs, "fomo-ewc", "A_KA"), comparison_sd(noise, "A_KA"))]
    ev = (f"A_ZS {_end(runs, 'fomo-ewc', 'A_ZS'):.1f} vs {_end(runs, reference, 'A_ZS'):.1f}; A_KA {_end(runs, 'fomo-ewc', 'A_KA'):.1f} "
          f"vs {_end(runs, reference, 'A_KA'):.1f} (steps/task {runs['fomo-ewc']['steps_per_task'][0]} vs {runs[reference]['steps_per_task'][0]})")
    return _all(text, pairs, ev, f"{SRC} {where}")


def _margin_note(metric: str, base: float) -> str:
    return (f"margin ±{similar_fraction(metric) * base:.2f} = {similar_fraction(metric):.1%} of full FT's {metric} {base:.1f}, "
            f"the paper's own largest endpoint gap it calls similar (§7.1: concept-frequency vs easy-to-hard ordering)")


def si_claim(runs: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """§5.1: SI "effectively offers no benefits over standard finetuning, either in A_KA or A_ZS":
    endpoint GM equivalent to full fine-tuning's within the paper's similarity margin (§5.1 gives
    no number for SI; the margin is the gap §7.1 calls similar, as a fraction of GM)."""
    text, where = "SI behaves like full fine-tuning (endpoint GM equivalent within the paper's similarity margin)", "§5.1, Fig. 6"
    if "fomo-si" not in runs or reference not in runs:
        return not_run(text, ["fomo-si", reference], runs, where)
    si, ft = _end(runs, "fomo-si", "GM"), _end(runs, reference, "GM")
    sd = comparison_sd(noise, "GM")
    v, e = _equiv(si, ft, similar_fraction("GM") * ft, sd)
    ev = (f"SI GM {si:.1f} vs full FT {ft:.1f}; {_margin_note('GM', ft)}; our noise could confirm a margin of "
          f"±{_q(0.90, sd.dof) * sd.sd:.2f} at best")
    return claim_from(text, v, e, ev, f"{SRC} {where}")


def ar_rsqrt_claim(runs: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """§6.1, Fig. 11: the autoregressive rsqrt meta-schedule retains more (A_ZS above per-task
    cosine's) at "nearly the same" accumulation (A_KA not below cosine's by more than the
    paper's similarity margin: non-inferiority)."""
    text, where = "The autoregressive rsqrt meta-schedule retains more at similar accumulation (vs per-task cosine)", "§6.1, Fig. 11"
    if "fomo-ar-rsqrt" not in runs or reference not in runs:
        return not_run(text, ["fomo-ar-rsqrt", reference], runs, where)
    ka = _end(runs, reference, "A_KA")
    pairs = [_gt(_end(runs, "fomo-ar-rsqrt", "A_ZS"), _end(runs, reference, "A_ZS"), comparison_sd(noise, "A_ZS")),
             _gt(_end(runs, "fomo-ar-rsqrt", "A_KA"), ka, comparison_sd(noise, "A_KA"), min_gap=-similar_fraction("A_KA") * ka)]
    ev = (f"A_ZS {_end(runs, 'fomo-ar-rsqrt', 'A_ZS'):.1f} vs {_end(runs, reference, 'A_ZS'):.1f}; A_KA "
          f"{_end(runs, 'fomo-ar-rsqrt', 'A_KA'):.1f} vs {ka:.1f} (non-inferiority, {_margin_note('A_KA', ka)})")
    return _all(text, pairs, ev, f"{SRC} {where}")


def best_of_claim(text: str, runs: dict, best: str, rivals, metric: str, noise: dict, where: str, value=None) -> Claim:
    """"`best` beats every rival in `metric`" (an endpoint metric; with `value(e)`, another
    per-run number, e.g. the mean GM along the stream, `metric` naming its key in `noise`)."""
    wanted = [e for e in rivals if e != best]
    rivals = [e for e in wanted if e in runs]
    if best not in runs or not rivals:
        return not_run(text, [best, *wanted], runs, where)
    value = value or (lambda e: _end(runs, e, metric))
    sd = comparison_sd(noise, metric)
    pairs = [_gt(value(best), value(e), sd) for e in rivals]
    return _all(text, pairs, ", ".join(f"{e} {value(e):.1f}" for e in [best, *rivals]), f"{SRC} {where}")


def mixtures_claim(runs: dict, noise: dict, mixes) -> Claim:
    """§7.2, Fig. 16: IID-fy beats every other mixture and no-buffer is below every other (GM)."""
    text, where = "IID-fied mixtures are best and no-buffer is worst (endpoint GM)", "§7.2, Fig. 16"
    mix = [e for e in mixes if e in runs]
    if "fomo-mix-iidify" not in runs or "fomo-mix-nobuffer" not in runs:
        return not_run(text, ["fomo-mix-iidify", "fomo-mix-nobuffer"], runs, where)
    gm, sd = {e: _end(runs, e, "GM") for e in mix}, comparison_sd(noise, "GM")
    pairs = ([_gt(gm["fomo-mix-iidify"], gm[e], sd) for e in mix if e != "fomo-mix-iidify"]
             + [_gt(gm[e], gm["fomo-mix-nobuffer"], sd) for e in mix if e != "fomo-mix-nobuffer"])
    return _all(text, pairs, ", ".join(f"{e} {gm[e]:.1f}" for e in mix), f"{SRC} {where}")


def orderings_similar_claim(runs: dict, noise: dict, orders: dict[str, str]) -> Claim:
    """§7.1, Fig. 15 left: the concept-level orderings' endpoints are "surprisingly similar":
    each one's endpoint GM equivalent to random's within the paper's own spread (its extremes,
    frequency vs easy-to-hard, 2.3 % of GM apart). Dataset-level orderings are left out: the
    paper finds they cost retention (§7.1)."""
    text, where = "Endpoints are similar across orderings (concept-level orderings' endpoint GM equivalent to random's)", "§7.1, Fig. 15"
    ref = orders["random"]
    rivals = [orders[k] for k in CONCEPT_ORDERINGS if k in orders and orders[k] in runs]
    if ref not in runs or not rivals:
        return not_run(text, [ref, *(orders[k] for k in CONCEPT_ORDERINGS if k in orders)], runs, where)
    base = _end(runs, ref, "GM")
    margin = similar_fraction("GM") * base
    pairs = [_equiv(_end(runs, e, "GM"), base, margin, comparison_sd(noise, "GM")) for e in rivals]
    ev = ", ".join(f"{e} {_end(runs, e, 'GM'):.1f}" for e in [ref, *rivals]) + f"; margin ±{margin:.2f} = {similar_fraction('GM'):.1%} of random's GM (the paper's own spread)"
    return _all(text, pairs, ev, f"{SRC} {where}")


def model_size_claim(runs: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """§6.2, Fig. 12 left: forgetting (θ0's A_ZS − the endpoint's, each size from its own θ0)
    orders small > default > large. A difference of two forgettings spans four evaluations and two
    trained runs (each θ0 is one model, the same for every seed)."""
    text, where = "Larger models forget less (θ0's A_ZS minus the endpoint's, small > default > large)", "§6.2, Fig. 12"
    order = ["fomo-ft-s", reference, "fomo-ft-l"]
    if not all(e in runs for e in order):
        return not_run(text, order, runs, where)
    forg = {e: [runs[e]["zero_shot"]["A_ZS"] - _end(runs, e, "A_ZS")] for e in order}
    sd = comparison_sd(noise, "A_ZS", evals=4, runs=2)
    pairs = [_gt(forg[a][0], forg[b][0], sd) for a, b in zip(order, order[1:])]
    return _all(text, pairs, ", ".join(f"{e} {v[0]:.1f}" for e, v in forg.items()), f"{SRC} {where}")


@functools.lru_cache(maxsize=None)
def tukey_q(level: float, k: int, dof: int | None = None) -> float:
    """The `level` quantile of the studentized range of k means, their sd estimated on `dof`
    degrees of freedom (None: known, df ≈ ∞): the largest of k(k−1)/2 pairwise gaps, in
    standard errors of one mean."""
    return float(stats.studentized_range.ppf(level, k, dof or 1e4))


def pool_claim(runs: dict, noise: dict, reference: str = "fomo-ft", pools=POOLS, level: float = 0.95) -> Claim:
    """§7.3, Fig. 17: the replayed pool changes zero-shot retention. The largest pairwise A_ZS
    gap among the k pools against Tukey's studentized range (k pools, the noise on its dof): confirmed
    when its simultaneous 95 % interval clears 0 (5 % false alarms under pure noise, whatever k);
    not confirmed when every pairwise gap is shown smaller than the change the paper calls
    significant (2.4 points of 64.4, 3.7 % of A_ZS) by the simultaneous 90 % interval (TOST);
    else inconclusive."""
    text, where = "The choice of replayed pool changes zero-shot retention (largest pairwise endpoint A_ZS gap, Tukey-adjusted)", "§7.3, Fig. 17"
    pl = [e for e in [reference, *pools] if e in runs]
    if reference not in runs or len(pl) < 2:
        return not_run(text, [reference, *pools], runs, where)
    zs = {e: _end(runs, e, "A_ZS") for e in pl}
    hi, lo = max(pl, key=zs.get), min(pl, key=zs.get)
    sd = comparison_sd(noise, "A_ZS")
    se = sd.sd / math.sqrt(2)          # of one run's A_ZS
    k = len(pl)
    # the sd that makes the normal interval of the largest gap Tukey's simultaneous one (its dof in q)
    sd95 = tukey_q(level, k, sd.dof) * se / _q(level, None)
    sd90 = tukey_q(0.90, k, sd.dof) * se / _q(0.90, None)
    how = f"{sd.source}; Tukey-adjusted for {k} pools"
    changed, e = _gt(zs[hi], zs[lo], Noise(sd95, how))
    margin = PAPER_POOL_GAIN[0] / PAPER_POOL_GAIN[1] * zs[reference]
    same, _ = _equiv(zs[hi], zs[lo], margin, Noise(sd90, how))
    verdict = changed if changed == "confirmed" else {"confirmed": "not confirmed"}.get(same, "inconclusive")
    ev = (", ".join(f"{e_} {zs[e_]:.1f}" for e_ in pl) + f"; largest gap {hi} − {lo}; no-change margin ±{margin:.2f} "
          f"({PAPER_POOL_GAIN[0]}/{PAPER_POOL_GAIN[1]} of the reference's A_ZS: the smallest pool effect the paper calls significant)"
          + (f"; equivalence within the margin: {same}" if verdict != "confirmed" else ""))
    return claim_from(text, verdict, e, ev, f"{SRC} {where}")


def compute_scaling_claim(runs: dict, noise: dict) -> Claim:
    """§6.2, Fig. 12 right: EMA-Merge's GM gain from 0.25× to 6× compute above full FT's (a
    difference of two gains spans four evaluations and four trained runs)."""
    text, where = "Merging turns extra compute into gains better than fine-tuning (GM gain, 0.25× → 6×)", "§6.2, Fig. 12"
    exps = ["fomo-ft-c025", "fomo-ft-c6", "fomo-ema-c025", "fomo-ema-c6"]
    if not all(e in runs for e in exps):
        return not_run(text, exps, runs, where)
    g_ft = _end(runs, "fomo-ft-c6", "GM") - _end(runs, "fomo-ft-c025", "GM")
    g_ema = _end(runs, "fomo-ema-c6", "GM") - _end(runs, "fomo-ema-c025", "GM")
    v, e = _gt(g_ema, g_ft, comparison_sd(noise, "GM", evals=4, runs=4))
    return claim_from(text, v, e, f"EMA-Merge {g_ema:+.1f} vs full FT {g_ft:+.1f}", f"{SRC} {where}")


def stream_length_claim(runs: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """Fig. 19 right: T = 50 at equal total compute ends below T = 20 in A_KA and in A_ZS."""
    text, where = "A longer stream (T = 50) at equal compute lowers both accumulation and retention", "Fig. 19"
    if "fomo-t50" not in runs or reference not in runs:
        return not_run(text, ["fomo-t50", reference], runs, where)
    pairs = [_gt(_end(runs, reference, m), _end(runs, "fomo-t50", m), comparison_sd(noise, m)) for m in ("A_KA", "A_ZS")]
    ev = (f"T=20 {_end(runs, reference, 'A_KA'):.1f}/{_end(runs, reference, 'A_ZS'):.1f} vs T=50 "
          f"{_end(runs, 'fomo-t50', 'A_KA'):.1f}/{_end(runs, 'fomo-t50', 'A_ZS'):.1f} (A_KA/A_ZS)")
    return _all(text, pairs, ev, f"{SRC} {where}")


def locked_towers_claim(runs: dict, noise: dict, reference: str = "fomo-ft") -> Claim:
    """§6.3, Fig. 13 (Finding 4 of §6): "full model tuning beats locked image or text encoder
    training over long update cycles", although a locked tower buys more steps at equal MAFs
    (Table 4: 12,982 vs 1,420 per task for locked-image). Endpoint GM of full FT above each
    locked run's, combined; the evidence says what our runs mean for the finding."""
    text, where = "Tuning both towers beats locking the image or the text tower (endpoint GM, equal MAFs)", "§6.3, Fig. 13 (Finding 4)"
    locked = [e for e in LOCKED if e in runs]
    if reference not in runs or not locked:
        return not_run(text, [reference, *LOCKED], runs, where)
    from vlcp.report.refs import paper_table

    t4 = paper_table("fomo_table4").set_index("method")
    ft, steps_ft = _end(runs, reference, "GM"), runs[reference]["steps_per_task"][0]
    sd = comparison_sd(noise, "GM")
    pairs = [_gt(ft, _end(runs, e, "GM"), sd) for e in locked]
    parts = []
    for e, (v, eff) in zip(locked, pairs):
        paper_x = t4.loc[e.removeprefix("fomo-"), "steps_T20"] / t4.loc["full-ft", "steps_T20"]
        parts.append(f"{e} GM {_end(runs, e, 'GM'):.1f} with {runs[e]['steps_per_task'][0] / steps_ft:.1f}× full FT's steps per task "
                     f"(paper {paper_x:.1f}×)")
        if v == "not confirmed":   # the locked run ends at or above full FT
            best = max(runs, key=lambda x: _end(runs, x, "GM")) == e
            parts.append(f"{e} ends {-eff.diff:.1f} GM above full FT{' (the best endpoint GM of every run)' if best else ''}: "
                         "at our scale the extra steps of a locked tower outweigh joint tuning, so our runs do not support "
                         f"Finding 4 (the paper finds joint tuning better although locking gives {paper_x:.1f}× the steps)")
    return _all(text, pairs, f"full FT GM {ft:.1f}; " + "; ".join(parts), f"{SRC} {where}")


def memory_order_claim(mult: dict[str, float], where: str) -> Claim:
    """Table 4's memory order (`MEMORY_ORDER`) on multipliers from tensor accounting (exact: no
    sampling noise, sd 0): every link a greater verdict, ties allowed only where the paper
    writes ≤ (full FT ≤ EWC, SI)."""
    text = f"Memory multipliers keep the paper's order: locked-image < LNFit/BitFit < LoRA < full FT ≤ EWC/SI ({where.split(',')[0]})"
    missing = [k for k in MEMORY_ORDER if k not in mult]
    if missing:
        return Claim(text, "inconclusive", "not measured: " + ", ".join(missing), f"{SRC} Table 4")
    li, ln, bf, lora, ft, ewc, si = (mult[k] for k in MEMORY_ORDER)
    exact = Noise(0.0, "tensor accounting, exact")
    links = [(ln, li, 0.0), (bf, li, 0.0), (lora, ln, 0.0), (lora, bf, 0.0), (ft, lora, 0.0), (ewc, ft, -1e-9), (si, ft, -1e-9)]
    pairs = [_gt(a, b, exact, min_gap) for a, b, min_gap in links]
    return _all(text, pairs, ", ".join(f"{k} {mult[k]:.2f}" for k in MEMORY_ORDER) + f" ({where})", f"{SRC} Table 4")


def ledger(runs: dict, study: dict, orders: dict[str, str], mm_tiny: dict[str, float], bench: dict | None = None,
           spread: dict | None = None) -> list[Claim]:
    """Every FoMo claim, in the report's order. `study`: params' report.fomo (reference,
    studies); `orders`: ordering label -> experiment (Fig. 15); `mm_tiny`: the study runs' memory
    multipliers by Table 4's row names; `bench`: benchmarks/fomo_memory.py's result, if any;
    `spread`: the seed subset's `subset_spread` (None: test-set noise only)."""
    ref = study["reference"]
    noise = ledger_noise(runs[ref], spread)
    area = lambda e: trajectory_area(runs[e])   # noqa: E731
    claims = [
        merging_best_claim(runs, noise),
        merge_early_retention_claim(runs, noise),
        peft_claim(runs, noise, ref),
        ewc_claim(runs, noise, ref),
        si_claim(runs, noise, ref),
        ar_rsqrt_claim(runs, noise, ref),
        locked_towers_claim(runs, noise, ref),
        best_of_claim("τ = 0.01 beats higher initial temperatures (endpoint GM)", runs, "fomo-tau001",
                      study["studies"].get("temperature", []), "GM", noise, "§6.4, Fig. 14"),
        mixtures_claim(runs, noise, [ref, *study["studies"].get("mixtures", [])]),
        best_of_claim("Random ordering gives the most favourable trajectory (mean GM along the stream)", runs, orders["random"],
                      [e for k, e in orders.items() if k != "random"], AREA, noise, "§7.1, Fig. 15", value=area),
        orderings_similar_claim(runs, noise, orders),
        model_size_claim(runs, noise, ref),
        pool_claim(runs, noise, ref),
        compute_scaling_claim(runs, noise),
        best_of_claim("The learning rate derived from pretraining gives the highest final accumulation", runs, ref,
                      ["fomo-lr1e-4", "fomo-lr3e-4", "fomo-lr3e-3"], "A_KA", noise, "§6.1, Fig. 9"),
        stream_length_claim(runs, noise, ref),
    ]
    claims.append(memory_order_claim(mm_tiny, "vlcp-tiny, the study's runs"))
    if bench:
        claims.append(memory_order_claim({k: r["memory_multiplier"] for k, r in bench["methods"].items()},
                                         f"{bench['model']}, batch {bench['target_batch']}, benchmarks/fomo_memory.py"))
    return claims
