"""FoMo-in-Flux's figures, tables and claims ledger from our runs (notebook `fomo_figures`)."""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd
from scipy import stats

from vlcp.eval import continual
from vlcp.report import ledger as lg
from vlcp.report import project_root, stats as st
from vlcp.report.stats import runs_where, seed_spread, spread_frame  # noqa: F401  (spread_frame: fm.spread_frame)
from vlcp.report.results import MEASURES as GENERIC_MEASURES, load_subset, long_reads  # noqa: F401  (fm.load_subset)
from vlcp.report.study import ClaimSpec, Runs, Study, as_lists, load_runs, stale_calibration, values
from vlcp.utils import read_json

METRICS = ("A_KA", "A_ZS", "GM")


def load_study(runs_dir: str | Path, studies: dict[str, list[str]], seed: int = 0) -> dict[str, dict]:
    """{experiment: results} from runs_dir/<study>/<experiment>/seed<S>/; missing runs left out."""
    return {e: by_seed[seed] for study, exps in studies.items()
            for e, by_seed in load_runs(Path(runs_dir) / study, exps, [seed]).items()}


def trajectory(r: dict) -> pd.DataFrame:
    """Rows: after task 0 (= θ0, zero-shot), 1, …, T; columns A_KA, A_ZS, GM."""
    return pd.DataFrame([r["zero_shot"], *r["trajectory"]])[list(METRICS)].rename_axis("after task")


def endpoint(r: dict) -> dict[str, float]:
    return {k: r["trajectory"][-1][k] for k in METRICS}


def summary_row(r: dict, zero_shot: dict, joint: dict | None) -> dict:
    """A run's endpoint, its change from θ0, its height above the zero-shot–joint line, budget, time."""
    end = endpoint(r)
    row = {**end, "ΔA_KA": end["A_KA"] - zero_shot["A_KA"], "ΔA_ZS": end["A_ZS"] - zero_shot["A_ZS"]}
    if joint is not None and joint["A_KA"] != zero_shot["A_KA"]:
        row["above line"] = continual.above_trade_off_line(*((p["A_KA"], p["A_ZS"]) for p in (end, zero_shot, joint)))
    return {**row, "steps/task": r["steps_per_task"][0], "memory ×": r["budget"]["memory_multiplier"],
            "train s": sum(t["seconds"] for t in r["train"])}


def summary(runs: dict[str, dict], zero_shot: dict, joint: dict | None) -> pd.DataFrame:
    return pd.DataFrame({e: summary_row(r, zero_shot, joint) for e, r in runs.items()}).T


MEMORY = {"memory": "total", "params": "parameters", "grads": "gradients", "optimizer": "optimizer",
          "activations": "activations", "method state": "method"}   # budget_table's memory columns: budget fields


def budget_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Table 4's analogue per method: FLOPs, memory by tensor accounting, its multiplier, MAFs, steps."""
    rows = {}
    for e, r in runs.items():
        b = r["budget"]
        rows[e] = {"MFLOPs/step": b["method"]["flops"] / 1e6, "MFLOPs/task": b["method"].get("task_flops", 0) / 1e6,
                   **{f"{k} MB": b["method"]["memory"][field] / 2**20 for k, field in MEMORY.items()},
                   "memory multiplier": b["memory_multiplier"], "MAFs/step (M)": b["mafs"] / 1e6,
                   "steps/task": r["steps_per_task"][0], "total steps": sum(r["steps_per_task"]),
                   "total samples": sum(t["samples"] for t in r["train"])}
    return pd.DataFrame(rows).T


def steps_by_stream_length(runs: dict[str, dict], lengths=(20, 50, 100, 200)) -> pd.DataFrame:
    """Table 4's `T=<n>` columns: steps per task, bought by MAFs, when full FT's total compute is cut into T tasks."""
    from vlcp.train.budget import steps_for_budget

    rows = {}
    for e, r in runs.items():
        b, f = r["budget"], r["config"]["fomo"]
        total = max(1, math.floor(f["steps_per_task"] * f.get("compute_scale", 1.0) + 1e-9)) * len(r["tasks"])
        ft = {t: max(1, total // t) for t in lengths}
        rows[e] = {f"T={t}": steps_for_budget(1, n * b["full_ft_mafs"] - b["task_mafs"], b["mafs"])
                   if f.get("budget", "mafs") == "mafs" else n for t, n in ft.items()}
    return pd.DataFrame(rows).T


def isolated_table(r: dict) -> pd.DataFrame:
    """Table 5's analogue from an `isolated` run: per task's dataset, θ0's zero-shot accuracy, tuned alone, delta."""
    from vlcp.data.concepts import parse_entry

    method, name = r["config"]["method"]["name"], r.get("experiment", "the run")
    if method != "isolated":
        raise ValueError(f"isolated_table: {name} ran method {method!r}, not 'isolated'")
    rows = {}
    for t, task in enumerate(r["tasks"]):
        names = {parse_entry(c).dataset for c in task}
        if len(names) != 1:
            raise ValueError(f"isolated_table: task {t + 1} of {name} spans {len(names)} datasets "
                             f"({', '.join(sorted(names))}): run it with fomo.ordering 'dataset' and fomo.num_tasks 0")
        d = names.pop()
        zs, ft = r["zero_shot"]["datasets"][d], r["trajectory"][t]["datasets"][d]
        rows[d] = {"zero-shot": zs, "fine-tuned alone": ft, "delta to ZS": ft - zs, "steps": r["steps_per_task"][t],
                   "test images": r["datasets"][d]["n"]}
    return pd.DataFrame(rows).T.rename_axis("dataset")


def paper_scale_budget(bench: dict, table4: pd.DataFrame) -> pd.DataFrame:
    """`benchmarks/fomo_memory.py`'s measurement at the paper's scale beside Table 4 (by its row names)."""
    rows = {}
    for name, r in bench["methods"].items():
        paper = table4.loc[name] if name in table4.index else pd.Series(dtype=float)
        rows[name] = {"GFLOPs/step (ours)": r["flops_per_step_at_target"] / 1e9,
                      "GFLOPs/step (paper)": paper.get("per_task_gflops", np.nan),
                      "memory GiB (ours, fp32 accounting)": r["memory_at_target"]["total"] / 2**30,
                      "memory GB (paper, GPU peak)": paper.get("max_memory_gb", np.nan),
                      "multiplier (ours)": r["memory_multiplier"],
                      "multiplier (paper)": paper.get("memory_multiplier", np.nan)}
    return pd.DataFrame(rows).T


def trajectory_plot(ax, runs: dict[str, dict], zero_shot: dict, joint: dict | None, title: str = "",
                    labels: dict[str, str] | None = None):
    """A_KA (x) vs A_ZS (y) per task for each run, with θ0, the joint point, their line and GM's contours."""
    ends = [(p["A_KA"], p["A_ZS"]) for p in (zero_shot, joint) if p is not None]   # θ0, the joint point
    points = list(ends)
    for e, r in runs.items():
        t = trajectory(r)
        ax.plot(t["A_KA"], t["A_ZS"], marker="o", ms=2.5, lw=1.2, label=(labels or {}).get(e, e))
        ax.plot(t["A_KA"].iloc[-1], t["A_ZS"].iloc[-1], marker="s", ms=5, color=ax.lines[-1].get_color())
        points += zip(t["A_KA"], t["A_ZS"])
    for end, color, label in zip(ends, ("gold", "crimson"), ("zero-shot θ0", "joint")):
        ax.plot(*end, marker="*", ms=14, color=color, mec="k", ls="", label=label)
    if joint is not None:
        ax.plot(*zip(*ends), ls=":", color="k", lw=1)
    xlim, ylim = ((min(v) - 2.0, max(v) + 2.0) for v in zip(*points))
    xx, yy = np.meshgrid(np.linspace(*xlim, 100), np.linspace(*ylim, 100))
    gm = np.sqrt(np.clip(xx, 0, None) * np.clip(yy, 0, None))
    ax.clabel(ax.contour(xx, yy, gm, levels=8, colors="grey", linewidths=0.5, alpha=0.5), fontsize=6, fmt="%.0f")
    ax.set(xlim=xlim, ylim=ylim, xlabel="A_KA (knowledge accumulation, %)", ylabel="A_ZS (zero-shot retention, %)")
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
    """Mean GM over the trajectory's points after θ0."""
    return float(np.mean([row["GM"] for row in r["trajectory"]]))


def table_runs(runs: dict[str, dict], subset: dict[str, dict[int, dict]], labels: dict) -> dict[str, list[dict]]:
    """{label: experiment} -> {label: its runs at the subset's seeds, else the study's one run; neither: left out}."""
    return {k: [subset[e][s] for s in sorted(subset[e])] if subset.get(e) else [runs[e]]
            for k, e in labels.items() if subset.get(e) or e in runs}


# --------------------------------------------------------------------------- the claims ledger
# its rows: studies/fomo/claims.yaml; a single-run comparison's sd: test-set noise joined by the seed spread
TEST_ONLY = "test-set noise only; seed spread not measured"
EARLY_TASKS = 5                                 # the early-retention claim's first tasks
EARLY = f"mean A_ZS, tasks 1-{EARLY_TASKS}"     # early_retention: its seed-spread metric
AREA = "mean GM along the stream"               # trajectory_area: the random-ordering claim's metric


def noise_sd(r: dict, row: dict | None = None) -> dict[str, float]:
    """The test-set sd of a difference of two single-run A_KA, A_ZS and GM at `row` (default: the endpoint):
    √2 × the binomial SE of the dataset-macro mean over each score's `n` items; GM's by the delta method."""
    row = row or r["trajectory"][-1]
    se = {}
    for metric, role in (("A_KA", "adaptation"), ("A_ZS", "retention")):
        var = [row["datasets"][name] / 100 * (1 - row["datasets"][name] / 100) / info["n"]
               for name, info in r["datasets"].items() if info["role"] == role]
        if not var:
            raise ValueError(f"noise_sd: no dataset with role {role!r} in results['datasets']")
        se[metric] = float(np.sqrt(np.sum(var)) / len(var) * 100)
    se["GM"] = (row["GM"] / 2 * math.sqrt(sum((se[m] / row[m]) ** 2 for m in se))
                if row["A_KA"] > 0 and row["A_ZS"] > 0 else max(se.values()))
    return {m: math.sqrt(2) * v for m, v in se.items()}


def early_retention(r: dict) -> float:
    """Mean A_ZS after the first `EARLY_TASKS` tasks (§5.2's "first update tasks")."""
    return float(np.mean([t["A_ZS"] for t in r["trajectory"][:EARLY_TASKS]]))


def subset_spread(subset: dict[str, dict[int, dict]]) -> dict | None:
    """`stats.seed_spread` of the ledger's single-seed metrics over the subset's experiments at ≥ 2 seeds, or None."""
    kept = {e: by_seed for e, by_seed in subset.items() if len(by_seed) >= 2}
    metrics = {**{m: MEASURES[m] for m in METRICS}, AREA: trajectory_area, EARLY: early_retention}
    per_seed = {m: {e: [f(r) for r in rs] for e, rs in as_lists(kept).items()} for m, f in metrics.items()}
    return seed_spread(per_seed, runs_where(kept)) if kept else None


def comparison_sd(spread: dict | None, metric: str, test: float, evals: int = 2, runs: int = 2) -> st.Noise:
    """The sd of a comparison spanning `evals` test-set evaluations (`test`: one difference's) and `runs` runs:
    √(evals/2 · test² + runs/2 · seed²), seed the spread's difference spread on its dof; without it, test only."""
    measured = (spread or {}).get("metrics") or {}
    if metric not in measured:
        why = f"test-set noise only: the seed subset has no spread of {metric}" if measured else TEST_ONLY
        return st.Noise(math.sqrt(evals / 2) * test, None, why)
    seed, dof = float(measured[metric]["difference_spread"]), int(measured[metric]["dof"])
    return st.Noise(math.sqrt(evals / 2 * test ** 2 + runs / 2 * seed ** 2), dof,
                    f"test-set noise + {spread['source']}; Student's t, {dof} dof")


def noise_table(ref_run: dict, spread: dict | None) -> pd.DataFrame:
    """Per metric: the test-set sd at the reference endpoint, the seed part (NaN: none) and `comparison_sd`."""
    test, measured = noise_sd(ref_run), (spread or {}).get("metrics") or {}
    rows = {}
    for m, t in {**test, AREA: test["GM"]}.items():
        sd = comparison_sd(spread, m, t)
        rows[m] = {"test-set sd": t, "seed spread": measured.get(m, {}).get("difference_spread", np.nan),
                   "sd of a difference": sd.sd, "dof": sd.dof or np.inf, "source": sd.source}
    return pd.DataFrame.from_dict(rows, orient="index")


@functools.lru_cache(maxsize=None)
def tukey_q(level: float, k: int, dof: int | None = None) -> float:
    """The `level` quantile of the studentized range of k means, sd on `dof` (None: known)."""
    return float(stats.studentized_range.ppf(level, k, dof or 1e4))


# the claims file's measures: the endpoint metrics, their gains from θ0, the trajectory area
MEASURES = MappingProxyType({**{m: (lambda r, m=m: endpoint(r)[m]) for m in METRICS},
                             "ka_gain": lambda r: endpoint(r)["A_KA"] - r["zero_shot"]["A_KA"],
                             "forgetting": lambda r: r["zero_shot"]["A_ZS"] - endpoint(r)["A_ZS"],
                             "gm_gain": lambda r: endpoint(r)["GM"] - r["zero_shot"]["GM"],
                             "trajectory_area": trajectory_area,
                             "early_gain": lambda r: early_retention(r) - r["zero_shot"]["A_ZS"]})


def floors(ref_run: dict, spread: dict | None) -> dict[str, st.Noise]:
    """The claims file's noise floors by name, each `comparison_sd` of the comparison it serves."""
    test, sd = noise_sd(ref_run), functools.partial(comparison_sd, spread)
    return {**{m: sd(m, test[m]) for m in METRICS}, "trajectory_area": sd(AREA, test["GM"]),
            "early gain": sd(EARLY, noise_sd(ref_run, ref_run["zero_shot"])["A_ZS"], runs=1),
            **{f"{m} change": sd(m, test[m], runs=1) for m in METRICS},
            "forgetting, two runs": sd("A_ZS", test["A_ZS"], evals=4, runs=2),
            "GM, gain of gains": sd("GM", test["GM"], evals=4, runs=4)}


def _first(runs: Runs, e: str, measure) -> float:
    return float(measure(runs[e][min(runs[e])]))


def best_of_chosen(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """"The best of `best` beats the best of `others`", each group's best chosen on its first seed."""
    best, others = ([e for e in spec.options.get(k) or () if runs.get(e)] for k in ("best", "others"))
    if not best or not others:
        missing = spec.options["others" if best else "best"]
        return lg.not_testable(spec.id, f"no runs of any of {', '.join(missing)} here")
    if (absent := lg.unready(spec, runs, ctx.floors, ())) is not None:
        return absent
    m = ctx.measures[spec.measure]
    a, b = (max(group, key=lambda e: _first(runs, e, m)) for group in (best, others))
    c = lg.Comparison(f"best {a} vs best other {b}", values(runs, a, m), values(runs, b, m),
                      float(spec.options["effect"]), ctx.scales[spec.scale], ctx.floors.get(spec.options.get("floor")))
    return dataclasses.replace(lg.greater(spec.id, [c], depth=ctx.depth), kind=spec.kind)


def within_a_share(judge, spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """`ledger.equivalent`'s or `.greater`'s row, a margin the `effect` (a share) × b's mean: every comparison
    of an equivalence; a `greater` row's `within_share` ones as non-inferiority, (a + margin) − b > 0."""
    if (absent := lg.unready(spec, runs, ctx.floors)) is not None:
        return absent
    shifted = set(spec.options.get("within_share") or ()) if judge is lg.greater else set()
    out = []
    for c in lg.comparisons(spec, runs, ctx.measures.get(spec.measure), None,
                            ctx.floors.get(spec.options.get("floor")), ctx):
        if judge is lg.equivalent or c.label in shifted:
            ref = float(np.mean(list(c.b.values())))
            c = dataclasses.replace(c, scale=lg.Scale(1.0, ref, f"the share × {c.label}'s reference level {ref:.2f}"))
        if c.label in shifted:
            m = ref * c.paper_effect
            c = dataclasses.replace(c, label=f"{c.label} (margin {m:.2f})", a={s: v + m for s, v in c.a.items()})
        out.append(c)
    return dataclasses.replace(judge(spec.id, out, depth=ctx.depth), kind=spec.kind)


def largest_gap_tukey(spec: ClaimSpec, runs: Runs, ctx: lg.Context, level: float = st.LEVEL) -> lg.Row:
    """"The pools differ": the largest gap of the pools' means on the floor made Tukey's (5 % false alarms, any k)."""
    pools = [e for e in [spec.options["reference"], *spec.options["pools"]] if runs.get(e)]
    if spec.options["reference"] not in pools or len(pools) < 2:
        return lg.not_testable(spec.id, f"no runs of {spec.options['reference']} and another pool here")
    if (absent := lg.unready(spec, runs, ctx.floors, ())) is not None:
        return absent
    v = {e: values(runs, e, ctx.measures[spec.measure]) for e in pools}
    hi, lo = (f(pools, key=lambda e: np.mean(list(v[e].values()))) for f in (max, min))
    floor, k = ctx.floors[spec.options["floor"]], len(pools)
    sd = floor.sd * tukey_q(level, k, floor.dof) / math.sqrt(2) / st.quantile(level, floor.dof)
    c = lg.Comparison(f"{hi} − {lo}", {f"{hi} seed {s}": x for s, x in v[hi].items()},
                      {f"{lo} seed {s}": x for s, x in v[lo].items()}, float(spec.options["effect"]),
                      ctx.scales[spec.scale], st.Noise(sd, floor.dof, f"{floor.source}; Tukey-adjusted for {k} pools"))
    return dataclasses.replace(lg.greater(spec.id, [c], depth=ctx.depth), kind=spec.kind)


def gain_of_gains(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """"a's gain beats b's" (`gains: {a: [high, low], b: [high, low]}`), paired where all four share ≥ 2 seeds."""
    (ah, al), (bh, bl) = spec.options["gains"]["a"], spec.options["gains"]["b"]
    if (absent := lg.unready(spec, runs, ctx.floors, (ah, al, bh, bl))) is not None:
        return absent
    m = ctx.measures[spec.measure]
    common = sorted(set.intersection(*(set(runs[e]) for e in (ah, al, bh, bl))))
    ga, gb = ({s: float(m(runs[hi][s]) - m(runs[lo][s])) for s in common} if len(common) >= 2
              else {0: _first(runs, hi, m) - _first(runs, lo, m)} for hi, lo in ((ah, al), (bh, bl)))
    c = lg.Comparison(f"{ah} − {al} vs {bh} − {bl}", ga, gb, float(spec.options["effect"]),
                      ctx.scales[spec.scale], ctx.floors.get(spec.options.get("floor")))
    return dataclasses.replace(lg.greater(spec.id, [c], depth=ctx.depth), kind=spec.kind)


def multipliers(spec: ClaimSpec, runs: Runs) -> tuple[dict[str, float], str]:
    """The memory multipliers by Table 4's row names and where from: `from: runs` or a benchmark file."""
    src = spec.options["from"]
    if src == "runs":
        names = spec.options["experiments"]
        mult = {k: _first(runs, e, lambda r: r["budget"]["memory_multiplier"]) for k, e in names.items() if runs.get(e)}
        return mult, spec.options.get("where", "the study's runs")
    path = project_root() / src
    if not path.exists():
        return {}, src
    bench = read_json(path)
    return ({k: float(r["memory_multiplier"]) for k, r in bench["methods"].items()},
            f"{bench['model']}, batch {bench['target_batch']}, {src}")


def memory_order(spec: ClaimSpec, runs: Runs, ctx: lg.Context) -> lg.Row:
    """Table 4's memory order on exact multipliers: confirmed when every link, "X < Y" or "X ≤ Y", holds."""
    parsed = [(t, re.fullmatch(r"(.+?) ([<≤]) (.+)", t.strip())) for t in spec.options["links"]]
    if bad := [t for t, p in parsed if p is None]:
        raise ValueError(f"memory order: a link must read 'X < Y' or 'X ≤ Y', got {bad[0]!r}")
    links = [(t, p[1].strip(), p[3].strip(), p[2] == "<") for t, p in parsed]
    mult, where = multipliers(spec, runs)
    names = {x for _, lo, hi, _ in links for x in (lo, hi)}
    if missing := sorted(names - set(mult)):
        return lg.not_testable(spec.id, f"not measured ({where}): {', '.join(missing)}")
    gaps = [mult[hi] - mult[lo] for _, lo, hi, _ in links]
    broken = [t for (t, _, _, strict), g in zip(links, gaps) if not (g > 0 if strict else g > -1e-9)]
    notes = [", ".join(f"{k} {v:.2f}" for k, v in mult.items() if k in names) + f" ({where})"]
    if broken:
        notes.append(f"{len(broken)} link{'s' if len(broken) > 1 else ''} of the order broken: {'; '.join(broken)}")
    gap = min(gaps)
    return lg.Row(spec.id, "refuted" if broken else "confirmed", spec.kind, gap, gap, gap, 1, sigma_d=0.0, notes=notes)


KINDS = MappingProxyType({"best of chosen": best_of_chosen, "largest gap, Tukey": largest_gap_tukey,
                          "equivalent within a share": functools.partial(within_a_share, lg.equivalent),
                          "greater, some within a share": functools.partial(within_a_share, lg.greater),
                          "gain of gains": gain_of_gains, "memory order": memory_order})


def ledger_runs(runs_dir, block: dict, long: bool = False) -> Runs:
    """`report.fomo.studies` at the study's seed, the seed subset at its seeds, and (long) the long profile's runs."""
    seed, spread = block["seed"], block.get("spread") or {}
    groups = [*block["studies"].values(), *(block["long"].get("studies", {}).values() if long else ())]
    seeds, dirs = long_reads(block, runs_dir, [seed]) if long else ([seed], runs_dir)
    out = load_runs(dirs, list(dict.fromkeys(e for g in groups for e in g)), seeds)
    subset = load_runs(runs_dir, spread.get("experiments", []), list(dict.fromkeys([seed, *spread.get("seeds", [])])))
    return {e: dict(sorted({**subset.get(e, {}), **out.get(e, {})}.items())) for e in {**out, **subset}}


def ledger(study: Study, params: dict, runs_dir, long: bool = False) -> list[lg.Row]:
    """FoMo-in-Flux's ledger on `ledger_runs`, its floors from the reference run and the subset's spread."""
    block = params["report"][study.params]
    runs = ledger_runs(runs_dir, block, long)
    ref = runs[block["reference"]]
    return lg.evaluate(study, runs, GENERIC_MEASURES, calibrated=not stale_calibration(study, runs),
                       floors=floors(ref[min(ref)], subset_spread(runs)))


def run_headline(r: dict) -> dict[str, float]:
    """`vlcp report metrics`' numbers of a concept-stream run: its endpoint."""
    return endpoint(r) if "trajectory" in r else {}


def run_curve(r: dict) -> list[float] | None:
    """`vlcp report metrics`' curve of a concept-stream run: GM after every task."""
    return [row["GM"] for row in r["trajectory"]] if "trajectory" in r else None


def plot_files(runs: dict[str, list[dict]], names: list[str] | None) -> dict[str, str]:
    """plots/fomo/<experiment>.csv: the trajectory of each plotted experiment's first run."""
    return {f"{e}.csv": trajectory(runs[e][0]).round(4).to_csv(lineterminator="\n") for e in names or [] if e in runs}


def metric_sources(block: dict, params: dict) -> dict:
    """`vlcp report metrics`' curves: the methods study's runs at the study's seed."""
    return {"experiments": (block.get("studies") or {}).get("methods"),
            "seeds": [block["seed"]] if "seed" in block else None}
