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
from types import MappingProxyType

import numpy as np
import pandas as pd
from scipy import stats

from vlcp.eval import continual
from vlcp.report import ledger as lg
from vlcp.report import stats as st
from vlcp.report.spread import runs_where, seed_spread, spread_frame  # noqa: F401  (spread_frame: the notebook's seed-spread table)
from vlcp.report.measures import MEASURES as GENERIC_MEASURES
from vlcp.report.results import load_subset  # noqa: F401  (the notebook calls fm.load_subset)
from vlcp.report.study import ClaimSpec, ComparisonSpec, Runs, Study, load_runs, stale_calibration, values
from vlcp.utils import read_json, read_results


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
# The rows are vlcp/report/studies/fomo/claims.yaml, judged by vlcp.report.ledger; here the measures
# they name, the noise floors of their single-run comparisons and the kinds no generic one expresses.
# FoMo runs one seed per setting but for a seed subset (report.fomo.spread): the sd of a difference
# of two single runs is the test-set sampling noise of the metric (`noise_sd`) joined by the
# subset's seed spread (`subset_spread`, `with_spread`, `comparison_sd`); without the subset,
# test-set noise only (`TEST_ONLY`).

TEST_ONLY = "test-set noise only; seed spread not measured"
EARLY_TASKS = 5                          # the early-retention claim's first tasks
AREA = "mean GM along the stream"        # trajectory_area: the random-ordering claim's metric


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


def early_key(k: int = EARLY_TASKS) -> str:
    """The name of the early-retention metric over tasks 1..k (a seed-spread metric and a noise key)."""
    return f"mean A_ZS, tasks 1-{k}"


def early_retention(r: dict, k: int = EARLY_TASKS) -> float:
    """Mean A_ZS after tasks 1..k (§5.2's "first update tasks")."""
    return float(np.mean([t["A_ZS"] for t in r["trajectory"][:k]]))


def spread_values(subset: dict[str, list[dict]], k: int = EARLY_TASKS) -> dict[str, dict[str, list[float]]]:
    """`spread.seed_spread`'s input from the seed subset ({experiment: [results per seed]}): per
    metric the ledger compares single-seed (endpoint A_KA, A_ZS, GM; the trajectory area, `AREA`;
    the early retention, `early_key(k)`), {experiment: [value per seed]}."""
    return {m: {e: [f(r) for r in rs] for e, rs in subset.items()} for m, f in ledger_metrics(k).items()}


def ledger_metrics(k: int = EARLY_TASKS) -> dict:
    """{metric: f(run)} of every metric the ledger compares: endpoint A_KA, A_ZS, GM; the trajectory
    area (`AREA`); the early retention (`early_key(k)`)."""
    return {"A_KA": lambda r: endpoint(r)["A_KA"], "A_ZS": lambda r: endpoint(r)["A_ZS"],
            "GM": lambda r: endpoint(r)["GM"], AREA: trajectory_area, early_key(k): lambda r: early_retention(r, k)}


def subset_spread(subset: dict[str, dict[int, dict]], k: int = EARLY_TASKS) -> dict | None:
    """`spread.seed_spread` of the subset's experiments that have ≥ 2 seeds (`load_subset`'s
    first value), its source naming them and their seeds; None when none has (the ledger then
    uses test-set noise only)."""
    kept = {e: by_seed for e, by_seed in subset.items() if len(by_seed) >= 2}
    if not kept:
        return None
    return seed_spread(spread_values({e: [by_seed[s] for s in sorted(by_seed)] for e, by_seed in kept.items()}, k),
                       runs_where(kept))


def with_spread(test: dict[str, float], spread: dict | None) -> dict:
    """The ledger's noise: `test` ({metric: test-set sd of one difference}, e.g. `noise_sd`) and,
    where `spread` (`spread.seed_spread`'s result) is given, its difference spread per metric
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


def comparison_sd(noise: dict, metric: str, evals: int = 2, runs: int = 2, test: float | None = None) -> st.Noise:
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
        return st.Noise(math.sqrt(evals / 2) * test, None, why)
    dof = noise["dof"][metric]
    return st.Noise(math.sqrt(evals / 2 * test ** 2 + runs / 2 * seed ** 2), dof,
                    f"test-set noise + {noise['seed_source']}; Student's t, {dof} dof")


@functools.lru_cache(maxsize=None)
def tukey_q(level: float, k: int, dof: int | None = None) -> float:
    """The `level` quantile of the studentized range of k means, their sd estimated on `dof`
    degrees of freedom (None: known, df ≈ ∞): the largest of k(k−1)/2 pairwise gaps, in
    standard errors of one mean."""
    return float(stats.studentized_range.ppf(level, k, dof or 1e4))


def _end(metric: str):
    def measure(r: dict) -> float:
        return endpoint(r)[metric]
    measure.__name__ = metric
    return measure


def ka_gain(r: dict) -> float:
    """Endpoint A_KA − θ0's: what a run accumulates (full FT's is the A_KA scale's headroom)."""
    return endpoint(r)["A_KA"] - r["zero_shot"]["A_KA"]


def forgetting(r: dict) -> float:
    """θ0's A_ZS − the endpoint's: what a run forgets (full FT's is the A_ZS scale's headroom)."""
    return r["zero_shot"]["A_ZS"] - endpoint(r)["A_ZS"]


def gm_gain(r: dict) -> float:
    """Endpoint GM − θ0's (full FT's is the GM scale's headroom)."""
    return endpoint(r)["GM"] - r["zero_shot"]["GM"]


def early_gain(r: dict, k: int = EARLY_TASKS) -> float:
    """Mean A_ZS after tasks 1..k (`early_retention`) − θ0's A_ZS: the early-retention claim's measure."""
    return early_retention(r, k) - r["zero_shot"]["A_ZS"]


MEASURES = MappingProxyType({**{m: _end(m) for m in ("A_KA", "A_ZS", "GM")},
                             **{f.__name__: f for f in (ka_gain, forgetting, gm_gain, trajectory_area, early_gain)}})


def floors(ref_run: dict, spread: dict | None) -> dict[str, st.Noise]:
    """The claims file's noise floors (a row's or scale's `floor:`) by `comparison_sd`'s rule: the
    test-set sd at the reference run's endpoint joined by the seed subset's `spread` (None: test-set
    only). A difference of two single runs ("A_KA", "A_ZS", "GM", "trajectory_area"); a run against
    its own θ0 ("early gain", the test-set part at θ0; "<metric> change", a scale's pair: two
    evaluations, one trained run); a difference of two forgettings ("forgetting, two runs": four
    evaluations, two runs) and of two gains ("GM, gain of gains": four and four)."""
    n = ledger_noise(ref_run, spread)
    out = {m: comparison_sd(n, m) for m in ("A_KA", "A_ZS", "GM")}
    out["trajectory_area"] = comparison_sd(n, AREA)
    out["early gain"] = comparison_sd(n, early_key(), runs=1, test=noise_sd(ref_run, ref_run["zero_shot"])["A_ZS"])
    out.update({f"{m} change": comparison_sd(n, m, runs=1) for m in ("A_KA", "A_ZS", "GM")})
    out["forgetting, two runs"] = comparison_sd(n, "A_ZS", evals=4, runs=2)
    out["GM, gain of gains"] = comparison_sd(n, "GM", evals=4, runs=4)
    return out


def _unready(spec: ClaimSpec, runs: Runs, ctx: lg.Context, experiments) -> lg.Row | None:
    """A not-testable row when one of `experiments` did not run or the row's floor is not here."""
    missing = [e for e in experiments if not runs.get(e)]
    if missing:
        return lg.not_testable(spec.id, f"no runs of {', '.join(missing)} here")
    floor = spec.options.get("floor")
    if floor and floor not in ctx.floors:
        return lg.not_testable(spec.id, f"no noise floor {floor!r} here ({', '.join(ctx.floors) or 'none'})")
    return None


def _first(runs: Runs, e: str, measure) -> float:
    """`measure` of `e`'s run at its first seed (the study's own run)."""
    return float(measure(runs[e][min(runs[e])]))


def _judged(spec: ClaimSpec, row: lg.Row) -> lg.Row:
    row.kind = spec.kind
    return row


def best_of_chosen(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """"The best of `best` beats the best of `others`": each group's best chosen on the study's own
    runs (its first seed), then one `greater` comparison of the two. A kind because the arms are
    chosen on the runs, not named."""
    best, others = ([e for e in spec.options.get(k) or () if runs.get(e)] for k in ("best", "others"))
    if not best or not others:
        return lg.not_testable(spec.id, f"no runs of {'any of ' + ', '.join(spec.options['best' if not best else 'others'])} here")
    unready = _unready(spec, runs, ctx, ())
    if unready:
        return unready
    m = ctx.measures[spec.measure]
    a, b = (max(group, key=lambda e: _first(runs, e, m)) for group in (best, others))
    one = ClaimSpec(spec.id, spec.claim, "greater",
                    comparisons=(ComparisonSpec(a, b, float(spec.options["effect"]), f"best {a} vs best other {b}"),))
    row = lg.greater(spec.id, lg.comparisons(one, runs, m, ctx.scales[spec.scale], ctx.floors.get(spec.options.get("floor")), ctx),
                     depth=ctx.depth)
    return _judged(spec, row)


def equivalent_within_a_share(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """"a ≈ b" for every comparison, the margin a share of b's own level (each comparison's
    `effect`: the share, e.g. §7.1's similar gap as a fraction of GM) times b's mean at the compared
    seeds: `ledger.equivalent`. A kind because the margin scales with our level, not our headroom."""
    unready = _unready(spec, runs, ctx, sorted({e for c in spec.comparisons for e in (c.a, c.b) if e}))
    if unready:
        return unready
    floor = ctx.floors.get(spec.options.get("floor"))
    cs = lg.comparisons(spec, runs, ctx.measures[spec.measure], None, floor, ctx)
    cs = [lg.Comparison(c.label, c.a, c.b, c.paper_effect, _level(c.b, c.label), c.floor) for c in cs]
    return _judged(spec, lg.equivalent(spec.id, cs, depth=ctx.depth))


def _level(b: dict, label: str) -> lg.Scale:
    base = float(np.mean(list(b.values())))
    return lg.Scale(1.0, base, f"the share × {label}'s reference level {base:.2f}")


def greater_some_within_a_share(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """`ledger.greater` where the comparisons named in `within_share` are non-inferiority ones:
    "a is not below b by more than a share of b's level" (their `effect`: the share; margin m = share
    × b's mean), judged as (a + m) − b > 0 against m. A kind because the margin is shifted into a."""
    unready = _unready(spec, runs, ctx, sorted({e for c in spec.comparisons for e in (c.a, c.b) if e}))
    if unready:
        return unready
    shifted = set(spec.options.get("within_share") or ())
    out = []
    for c in lg.comparisons(spec, runs, None, None, None, ctx):
        if c.label in shifted:
            m = float(np.mean(list(c.b.values()))) * c.paper_effect
            c = lg.Comparison(f"{c.label} (margin {m:.2f})", {s: v + m for s, v in c.a.items()}, c.b, c.paper_effect,
                              _level(c.b, c.label), c.floor)
        out.append(c)
    return _judged(spec, lg.greater(spec.id, out, depth=ctx.depth))


def largest_gap_tukey(spec: ClaimSpec, runs: Runs, ctx: lg.Context, level: float = st.LEVEL) -> lg.Row:
    """"The pools differ": the largest gap between the k pools' (`reference` and `pools` that ran)
    means of the row's measure over their seeds, against Tukey's studentized range on the floor's
    dof: the floor's sd made Tukey's simultaneous one (q_k / √2 / t), so 5 % false alarms under pure
    noise whatever k; unpaired (one value per run). A kind because the pair is chosen on the runs."""
    pools = [e for e in [spec.options["reference"], *spec.options["pools"]] if runs.get(e)]
    if spec.options["reference"] not in pools or len(pools) < 2:
        return lg.not_testable(spec.id, f"no runs of {spec.options['reference']} and another pool here")
    unready = _unready(spec, runs, ctx, ())
    if unready:
        return unready
    v = {e: values(runs, e, ctx.measures[spec.measure]) for e in pools}
    hi, lo = (f(pools, key=lambda e: np.mean(list(v[e].values()))) for f in (max, min))
    floor, k = ctx.floors[spec.options["floor"]], len(pools)
    sd = floor.sd * tukey_q(level, k, floor.dof) / math.sqrt(2) / st.quantile(level, floor.dof)
    wide = st.Noise(sd, floor.dof, f"{floor.source}; Tukey-adjusted for {k} pools")
    c = lg.Comparison(f"{hi} − {lo}", {f"{hi} seed {s}": x for s, x in v[hi].items()},
                      {f"{lo} seed {s}": x for s, x in v[lo].items()}, float(spec.options["effect"]), ctx.scales[spec.scale], wide)
    return _judged(spec, lg.greater(spec.id, [c], depth=ctx.depth))


def gain_of_gains(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """"a's gain beats b's gain" (`gains: {a: [high, low], b: [high, low]}`): (a_high − a_low) −
    (b_high − b_low) per seed where all four ran ≥ 2 common seeds, else one run each (their first
    seeds) on the floor of a difference of two gains. A kind because one value spans four runs."""
    (ah, al), (bh, bl) = spec.options["gains"]["a"], spec.options["gains"]["b"]
    unready = _unready(spec, runs, ctx, (ah, al, bh, bl))
    if unready:
        return unready
    m = ctx.measures[spec.measure]
    common = sorted(set.intersection(*(set(runs[e]) for e in (ah, al, bh, bl))))
    seeds = common if len(common) >= 2 else None

    def gain(hi: str, low: str) -> dict:
        if seeds is None:
            return {0: _first(runs, hi, m) - _first(runs, low, m)}
        return {s: float(m(runs[hi][s]) - m(runs[low][s])) for s in seeds}

    c = lg.Comparison(f"{ah} − {al} vs {bh} − {bl}", gain(ah, al), gain(bh, bl), float(spec.options["effect"]),
                      ctx.scales[spec.scale], ctx.floors.get(spec.options.get("floor")))
    return _judged(spec, lg.greater(spec.id, [c], depth=ctx.depth))


def _link(text: str) -> tuple[str, str, bool]:
    """"X < Y" or "X ≤ Y" as (X, Y, strict)."""
    for op, strict in ((" ≤ ", False), (" < ", True)):
        if op in text:
            low, high = text.split(op)
            return low.strip(), high.strip(), strict
    raise ValueError(f"memory order: a link must read 'X < Y' or 'X ≤ Y', got {text!r}")


def multipliers(spec: ClaimSpec, runs: Runs) -> tuple[dict[str, float], str]:
    """The memory multipliers a memory-order row reads, by Table 4's row names, and where from:
    `from: runs` (each of `experiments`' run at its first seed) or a benchmark file
    (benchmarks/fomo_memory.py's, relative to the project root)."""
    src = spec.options["from"]
    if src == "runs":
        names = spec.options["experiments"]
        return ({k: float(runs[e][min(runs[e])]["budget"]["memory_multiplier"]) for k, e in names.items() if runs.get(e)},
                spec.options.get("where", "the study's runs"))
    from vlcp.report import project_root

    path = project_root() / src
    if not path.exists():
        return {}, src
    bench = read_json(path)
    return ({k: float(r["memory_multiplier"]) for k, r in bench["methods"].items()},
            f"{bench['model']}, batch {bench['target_batch']}, {src}")


def memory_order(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """Table 4's memory order on multipliers from tensor accounting (exact, no sampling noise):
    confirmed when every link holds (`<` strict, `≤` a tie allowed), refuted when one does not;
    the row's effect is the tightest link's gap. A kind because an exact measurement has no interval."""
    links = [_link(t) for t in spec.options["links"]]
    mult, where = multipliers(spec, runs)
    missing = sorted({k for lo, hi, _ in links for k in (lo, hi) if k not in mult})
    if missing:
        return lg.not_testable(spec.id, f"not measured ({where}): {', '.join(missing)}")
    gaps = [mult[hi] - mult[lo] for lo, hi, _ in links]
    broken = [t for t, g, (_, _, strict) in zip(spec.options["links"], gaps, links) if not (g > 0 if strict else g > -1e-9)]
    gap = min(gaps)
    notes = [", ".join(f"{k} {v:.2f}" for k, v in mult.items() if k in {x for lo, hi, _ in links for x in (lo, hi)})
             + f" ({where})"] + ([f"{len(broken)} link{'s' if len(broken) > 1 else ''} of the order broken: {'; '.join(broken)}"]
                                  if broken else [])
    return lg.Row(spec.id, "refuted" if broken else "confirmed", spec.kind, gap, gap, gap, 1, sigma_d=0.0, notes=notes)


KINDS = MappingProxyType({"best of chosen": best_of_chosen, "equivalent within a share": equivalent_within_a_share,
                          "greater, some within a share": greater_some_within_a_share, "largest gap, Tukey": largest_gap_tukey,
                          "gain of gains": gain_of_gains, "memory order": memory_order})


def experiments(block: dict, long: bool = False) -> list[str]:
    """Every experiment of the study (`report.fomo.studies`; long: and the long profile's own rows)."""
    groups = [*block["studies"].values(), *(block["long"].get("studies", {}).values() if long else ())]
    return list(dict.fromkeys(e for g in groups for e in g))


def ledger_runs(runs_dir, block: dict, long: bool = False) -> Runs:
    """The ledger's runs, {experiment: {seed: results}}: every experiment at the study's seed, the
    seed subset's (`report.fomo.spread`) at its seeds too; long: every experiment also at the long
    profile's seeds, and its own rows, from its folder beside `runs_dir` (as the notebook's `long`)."""
    seed, spread = block["seed"], block.get("spread") or {}
    seeds, dirs = [seed], runs_dir
    if long:
        seeds, dirs = list(dict.fromkeys([seed, *block["long"]["seeds"]])), [runs_dir, block["long"]["runs"]]
    out = load_runs(dirs, experiments(block, long), seeds)
    subset = load_runs(runs_dir, spread.get("experiments", []), list(dict.fromkeys([seed, *spread.get("seeds", [])])))
    return {e: dict(sorted({**subset.get(e, {}), **out.get(e, {})}.items())) for e in {**out, **subset}}


def ledger(study: Study, params: dict, runs_dir, long: bool = False) -> list[lg.Row]:
    """FoMo-in-Flux's ledger on its runs under `runs_dir` (`ledger_runs`; `long`: every row also at
    the long profile's seeds), as its report renders it: the floors from the reference run's test-set noise and the spread of every experiment with ≥ 2
    seeds (`subset_spread`), the calibrated headrooms where the claims file's calibration applies
    (`stale_calibration`)."""
    block = params["report"][study.params]
    runs = ledger_runs(runs_dir, block, long)
    ref = runs[block["reference"]]
    return lg.evaluate(study, runs, GENERIC_MEASURES, calibrated=not stale_calibration(study, runs),
                       floors=floors(ref[min(ref)], subset_spread(runs)))


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
