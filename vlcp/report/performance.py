"""Performance summaries for `notebooks/performance.ipynb`: method overheads from run results,
evaluation-memory scaling, per-study time budgets and the performance ledger's targets."""
from __future__ import annotations

import functools
import itertools
import operator
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from vlcp.report import targets as tg
from vlcp.report.ledger import Row
from vlcp.report.results import fill_pass_flops, flops_per_step, mean_std, require_runs, run_paths, step_time
from vlcp.report.study import Study, load_study, registered
from vlcp.train.loop import PHASES, TASK_PHASES
from vlcp.utils import read_results


def _uncounted_work() -> dict:
    """`uncounted_work.yaml` ({methods: {name: {phases, work}}, teir: {phases, work}}), its phases checked."""
    data = yaml.safe_load((Path(__file__).with_name("uncounted_work.yaml")).read_text(encoding="utf-8"))
    named = {p for w in [*data["methods"].values(), data["teir"]] for p in w["phases"]}
    if unknown := sorted(named - set(PHASES) - set(TASK_PHASES)):
        raise ValueError(f"vlcp/report/uncounted_work.yaml: unknown loop phase(s) {', '.join(unknown)}")
    return data


UNCOUNTED_WORK = _uncounted_work()   # why a method's step can cost more time than its FLOPs say


def explain(method: dict) -> tuple[tuple[str, ...], str]:
    """(phases, text) of the work a method's config adds that torch's flop counter misses; ((), "") if none."""
    parts = [w for w in (UNCOUNTED_WORK["methods"].get(method["name"]), method.get("teir") and UNCOUNTED_WORK["teir"])
             if w]
    return tuple(p for w in parts for p in w["phases"]), "; ".join(w["work"] for w in parts)


def study_phases(runs: dict[str, list[dict]]) -> pd.DataFrame:
    """experiments x phases (loop order): ms per step in each loop phase, mean over seeds, of the
    experiments whose runs all record phase times."""
    def ms(r):
        per_task = pd.DataFrame([t["phase_seconds"] for t in r["train"]]).fillna(0)
        return per_task.sum() * 1e3 / sum(t["steps"] for t in r["train"])
    rows = {e: pd.concat([ms(r) for r in rs], axis=1).fillna(0).mean(axis=1) for e, rs in runs.items()
            if all("phase_seconds" in t for r in rs for t in r["train"])}
    df = pd.DataFrame(rows).T.fillna(0.0)
    return df[[p for p in PHASES + TASK_PHASES if p in df.columns]]


def extra_time(phases: pd.DataFrame, reference: str, exp: str) -> pd.Series:
    """Milliseconds per step `exp` spends in each phase beyond `reference`, largest first."""
    return (phases.loc[exp] - phases.loc[reference]).sort_values(ascending=False)


def profile_frame(profile: dict, top: int = 4) -> pd.DataFrame:
    """Per (study, experiment) of `method_profile.json`: the phase with the most extra ms/step over the
    study's reference, that extra, and the ops with the most self time in it."""
    rows = {}
    for study, sp in profile["studies"].items():
        ref, exps = sp["reference"], sp["experiments"]
        ms = pd.DataFrame({e: p["ms_per_step"] for e, p in exps.items()}).T.fillna(0.0)
        for exp in [e for e in exps if e != ref and ref in exps]:
            extra = extra_time(ms, ref, exp)
            ops = exps[exp]["top_ops"].get(extra.index[0], [])[:top]
            rows[(study, exp)] = {"phase": extra.index[0], "extra ms/step": extra.iloc[0],
                                  "its ops (self ms/step)": ", ".join(f"{op} {v:.1f}" for op, v in ops)}
    return pd.DataFrame.from_dict(rows, orient="index")


def discover_runs(runs_dir: str | Path, experiments: list[str]) -> dict[str, list[dict]]:
    """{experiment: [results of every seed found]} (`run_paths`); experiments without runs left out."""
    found = {exp: run_paths(runs_dir, exp) for exp in experiments}
    return {exp: [read_results(p) for p in paths] for exp, paths in found.items() if paths}


def study_overheads(runs: dict[str, list[dict]], reference: str, tolerance: float = 1.1) -> pd.DataFrame:
    """Per experiment with FLOP counts against `reference`: time, FLOPs (per-task passes included) and
    peak memory per step and their ratios, `within` (time ratio ≤ FLOP ratio × `tolerance`) and, from
    phase times, the own-work ratio (only the phases `explain` names differing from the reference) and,
    over the target, where the extra time is and whether that explains it."""
    usable = {e: rs for e, rs in runs.items() if all(t.get("flops_per_step") for r in rs for t in r["train"])}
    if reference not in usable:
        raise ValueError(f"study reference {reference!r}: no runs with FLOP counts")

    def cost(rs):   # (seconds per step: mean and sd over seeds, FLOPs per step, peak MB)
        return (*mean_std([step_time(r, skip_first=False) for r in rs]), flops_per_step(fill_pass_flops(rs)[0]),
                np.mean([max(t["peak_memory_mb"] for t in r["train"]) for r in rs]))
    t0, _, f0, m0 = cost(usable[reference])
    ref_ms, phases = 1e3 * t0, study_phases(usable)

    def row(exp, rs):
        t, sd, flops, mem = cost(rs)
        time_ratio, flop_ratio = t / t0, flops / f0
        ok = time_ratio <= flop_ratio * tolerance
        names, text = explain(rs[0]["config"]["method"])
        extra = extra_time(phases, reference, exp) if {exp, reference} <= set(phases.index) else None
        own = (np.nan if extra is None or (not names and exp != reference)
               else (ref_ms + extra[[p for p in names if p in extra.index]].sum()) / ref_ms)
        over = not ok and extra is not None
        top = extra.index[0] if over and extra.iloc[0] > 0 else None
        where = ("none beyond the reference's" if top is None else
                 ", ".join(f"{p} +{v:.1f}" for p, v in extra.items() if v >= 0.1 * extra.iloc[0]) + " ms")
        return {"method": rs[0]["config"]["method"]["name"], "seeds": len(rs), "ms/step": 1e3 * t,
                "ms/step std": 1e3 * sd, "GFLOPs/step": flops / 1e9,
                "time ratio": time_ratio, "FLOP ratio": flop_ratio, "peak MB": mem, "memory ratio": mem / m0,
                "within": ok, "own-work ratio": own, "extra time by phase (rows over target)": where if over else "",
                "uncounted work": "" if ok else text or "not analysed",
                "explained": "" if not over or not names else "its phases" if top in names
                else "variance elsewhere" if own <= flop_ratio * tolerance else "no"}
    return pd.DataFrame.from_dict({e: row(e, rs) for e, rs in usable.items()}, orient="index")


def loglog_slope(n, y) -> float:
    """Least-squares slope of log(y) against log(n): 1 = linear growth, 2 = quadratic."""
    return float(np.polyfit(np.log(np.asarray(n, float)), np.log(np.asarray(y, float)), 1)[0])


def eval_memory_frame(bench: dict) -> pd.DataFrame:
    """Rows of `eval_memory.json` as a (n x path) table of seconds and peak MB."""
    df = pd.DataFrame([r for r in bench["rows"] if "peak_mb" in r])
    return df.pivot(index="n", columns="path", values=["seconds", "peak_mb"])


# --------------------------------------------------------------------------- time budgets

def resumed_attempts(pipeline: dict) -> list[dict]:
    """The attempts of a repro stopped and resumed, each listing its stages (`stage_names`); [] for one."""
    attempts = pipeline.get("attempts") or []
    return attempts if len(attempts) > 1 and all("stage_names" in a for a in attempts) else []


def _known_mean(*paces) -> float | None:
    known = [p for p in paces if p]
    return sum(known) / len(known) if known else None


def pace_slowdown(pipeline: dict, spine_cost: dict | None, stages: list[str] | None = None) -> float:
    """How much slower the machine ran during a `benchmarks/pipeline.py` measurement (SeqF s/step, its probes'
    mean) than in `spine_cost.json`, a resumed one's `stages` each at its attempt's pace; 1.0 if not measured."""
    ref = ((spine_cost or {}).get("median_seconds_per_step") or {}).get("seqf")
    start, end = pipeline.get("seqf_seconds_per_step"), pipeline.get("seqf_seconds_per_step_end")
    if not ref:
        return 1.0
    if attempts := resumed_attempts(pipeline):
        paces = [_known_mean(a.get("seqf_seconds_per_step_start") or (start if i == 0 else None),
                             end if i == len(attempts) - 1 else None) for i, a in enumerate(attempts)]
        timed = [(pipeline["stages"][n], pace) for a, pace in zip(attempts, paces) for n in a["stage_names"]
                 if n in pipeline["stages"] and (stages is None or n in stages)]
        if timed and all(pace for _, pace in timed):
            return sum(t for t, _ in timed) / sum(t / (pace / ref) for t, pace in timed)
    pace = _known_mean(start, end)
    return pace / ref if pace else 1.0


def study_stages(stages, prefixes) -> list[str]:
    """The stage names (`name` or `name@item`) that belong to a budget's stage `prefixes`."""
    return [n for n in stages if any(n == p or n.startswith(p + "@") for p in prefixes)]


def study_slowdowns(pipeline: dict, spine_cost: dict | None, budgets: dict[str, dict]) -> dict[str, float]:
    """Each study's `pace_slowdown` over its own stages."""
    return {study: pace_slowdown(pipeline, spine_cost, study_stages(pipeline["stages"], b["stages"]))
            for study, b in budgets.items()}


BUDGET_STATUS = {"confirmed": "met", "inconclusive": "met at the reference pace only", "refuted": "NOT met"}


def param(params: dict, ref):
    """A dotted params key's value, as DVC's `${a.b}` interpolates it; a literal list or mapping as it is."""
    return functools.reduce(operator.getitem, ref.strip("${}").split("."), params) if isinstance(ref, str) else ref


def list_runs(study: Study, params: dict) -> int:
    """The runs of a study's experiment lists (`Study.lists`), each at its seeds (`<x>_seeds` beside
    `<x>_experiments`, else its block's `seeds` or `seed`, else params.yaml's), and of its `spread`."""
    block, spread = study.block(params), study.block(params).get("spread") or {}

    def grid(experiments, seeds):
        size = sum(map(len, experiments.values())) if isinstance(experiments, dict) else len(experiments or [])
        return size * len(seeds if isinstance(seeds, list) else [seeds])

    def seeds(name):
        own = name.removesuffix("experiments") + "seeds" if name.endswith("experiments") else "seeds"
        return block.get(own, block.get("seeds", block.get("seed", params["seeds"])))
    return (sum(grid(param(params, k), seeds(k.rpartition(".")[2])) for k in study.lists)
            + grid(spread.get("experiments"), spread.get("seeds", [])))


def study_runs(params: dict, dvc_yaml: dict) -> dict[str, int | None]:
    """Training runs per budget of `report.performance.budgets`: its registered study's (the one whose
    report stage, named as its notebook, it lists) `list_runs`, and one per pretraining stage it runs."""
    studies, today = [load_study(s) for s in registered()], pipeline_stages(dvc_yaml, params)
    pretrains = {n for n, s in dvc_yaml["stages"].items() if "vlcp pretrain" in str((s.get("do") or s).get("cmd"))}

    def count(b):
        study = next((s for s in studies if s.notebook in b["stages"]), None)
        bases = sum(n.partition("@")[0] in pretrains for n in study_stages(today, b["stages"]))
        return None if study is None else list_runs(study, params) + bases
    return {key: count(b) for key, b in params["report"]["performance"]["budgets"].items()}


def pipeline_stages(dvc_yaml: dict, params: dict) -> list[str]:
    """The stage names `dvc repro` runs for these params as DVC names them (`name@item`, `name@key`, `name@v1-v2`)."""
    def combos(stage):   # a foreach is a matrix of one axis; a plain stage, of none (one empty combo)
        axes = [stage["foreach"]] if "foreach" in stage else (stage.get("matrix") or {}).values()
        return itertools.product(*(param(params, v) for v in axes))
    return [name + (f"@{'-'.join(map(str, c))}" if c else "")
            for name, stage in dvc_yaml["stages"].items() for c in combos(stage)]


def measured_at(measurement: dict) -> str:
    """When a pipeline measurement began its last attempt (ISO time; its `date` where none recorded)."""
    return max((a["started"] for a in measurement.get("attempts") or () if a.get("started")),
               default=measurement["date"])


def retimed(parts: dict[str, dict], spine_cost: dict | None) -> list[tuple[dict, float]]:
    """The part measurements (`pipeline-<name>.json`: stages timed alone) with their `pace_slowdown`, oldest first."""
    timed = [p for name, p in parts.items() if name.startswith("pipeline-") and p.get("targets")]
    return [(p, pace_slowdown(p, spine_cost))
            for p in sorted(timed, key=lambda p: (measured_at(p), p.get("commit", "")))]


def stage_minutes(takes: list[tuple[float, float]], budget: float) -> tuple[float, float, float | None, str | None]:
    """Stages timed as (seconds, their pace's slowdown) → minutes as measured and at the reference pace,
    the slowdown those imply, and the verdict against `budget` minutes; NaN, NaN, None, None for none."""
    if not takes:
        return float("nan"), float("nan"), None, None
    measured = sum(s for s, _ in takes) / 60
    at_reference = sum(s / k for s, k in takes) / 60
    pace = measured / at_reference if at_reference else takes[0][1]
    return measured, at_reference, pace, tg.budget_verdict(measured, budget, pace)


def study_costs(pipeline: dict, params: dict, dvc_yaml: dict, slowdown: float | dict[str, float] = 1.0,
                parts: list[tuple[dict, float]] = ()) -> pd.DataFrame:
    """Per budget: its runs (`study_runs`) and stages today and the minutes `pipeline` timed of them, as
    measured and at the reference pace (÷ `slowdown`, one or per study); the latest part (`retimed`) that
    timed all of a study's own stages stands for them at its pace, its `shared` ones keep the whole's."""
    budgets = params["report"]["performance"]["budgets"]
    slows = slowdown if isinstance(slowdown, dict) else dict.fromkeys(budgets, slowdown)
    runs, today = study_runs(params, dvc_yaml), pipeline_stages(dvc_yaml, params)
    rows = {}
    for study, b in budgets.items():
        mine = study_stages(today, b["stages"])
        own = [n for n in mine if n not in study_stages(mine, b.get("shared") or ())]
        source, slow = next(((p, k) for p, k in reversed(parts) if own and measured_at(p) >= measured_at(pipeline)
                             and all(n in p["stages"] for n in own)), (pipeline, slows[study]))
        takes = {n: (pipeline["stages"][n], slows[study]) for n in mine if n in pipeline["stages"]}
        takes |= {n: (source["stages"][n], slow) for n in mine if source is not pipeline and n in source["stages"]}
        kept = [n for n in mine if n not in source["stages"] and n in takes]   # shared: the whole repro's
        measured, at_reference, pace, verdict = stage_minutes(list(takes.values()), b["minutes"])
        rows[study] = {"runs": runs.get(study), "stages": len(mine), "measured min": measured,
                       "at reference pace min": at_reference, "budget min": b["minutes"],
                       "not timed": ", ".join(n for n in mine if n not in takes), "slowdown": pace or slow,
                       "verdict": verdict, "measured": "the whole repro" if source is pipeline else
                       f"alone, {source['date'][:10]} at {source['commit']} ({slow:.2f} × slow)"
                       + (f"; {', '.join(kept)}: the whole repro" if kept else "")}
    return pd.DataFrame.from_dict(rows, orient="index")


def budget_table(pipeline: dict, budgets: dict[str, dict], slowdown: float | dict[str, float] = 1.0) -> pd.DataFrame:
    """Each study's measured minutes against its budget, also at the reference pace (÷ `slowdown`, one or
    per study); a study with no measured stage is NaN and "not built"."""
    rows = {}
    for paper, b in budgets.items():
        secs = [pipeline["stages"][n] for n in study_stages(pipeline["stages"], b["stages"])]
        slow = slowdown[paper] if isinstance(slowdown, dict) else slowdown
        measured, at_reference, _, verdict = stage_minutes([(s, slow) for s in secs], b["minutes"])
        rows[paper] = {"budget min": b["minutes"], "measured min": measured, "at reference pace min": at_reference,
                       "stages": len(secs), "status": BUDGET_STATUS[verdict] if verdict else "not built",
                       "verdict": verdict}
    return pd.DataFrame.from_dict(rows, orient="index")


# --------------------------------------------------------------------------- the performance ledger

def throughput_targets(tp: dict) -> list[Row]:
    """`throughput.py`'s targets on paired repeats: vlcp's SeqF against open_clip_train, and its loop like for like."""
    def ci(p, sep=", 95% interval "):   # a paired summary: geometric mean and 95 % interval of the ratios
        return f"{p['geometric_mean']:.3f}{sep}[{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}]"

    def target(text, p, goal, margin, evidence, control=None):
        return tg.target(text, tg.interval_verdict(p["geometric_mean"], *p["ci95"], goal, margin, control), evidence,
                         effect=p["geometric_mean"], low=p["ci95"][0], high=p["ci95"][1],
                         seeds=len(p.get("ratios") or ()) or None)
    where = f"{tp['device']}{' ' + tp['gpu'] if tp.get('gpu') else ''}, {tp['model']} {tp['precision']}"
    shipped, like, aa = tp["paired_over_open_clip"], tp["paired_over_open_clip_fused_adamw"], tp["paired_a_a"]
    sp, goal = tp["pairs"]["shipped"]["samples_per_second"], tp["target_ratio"]
    return [target(f"vlcp SeqF throughput ≥ {goal}× open_clip_train on the same work ({where})", shipped, goal, goal,
                   f"ratio {tp['ratio_vlcp_over_open_clip']:.3f} ({sp['vlcp']:.0f} vs {sp['open_clip']:.0f} "
                   f"samples/s); paired {ci(shipped)}; {tp['ratio_vlcp_over_open_clip_fused_adamw']:.3f} against "
                   "open_clip's loop with the same fused AdamW"),
            target(f"vlcp's loop ≥ {tp['loop_target']}× open_clip_train's like for like (same fused AdamW), paired "
                   f"repeats, interval above {tp['loop_margin']}× ({where})", like, tp["loop_target"],
                   tp["loop_margin"], f"geometric mean {ci(like)} over {len(like['ratios'])} repeats; A/A control "
                   f"{ci(aa, ' ')}", tuple(aa["ci95"]))]


def ddp_target(dd: dict) -> Row:
    """`ddp_scaling.py`'s target: 2 DDP processes against one at the same per-rank batch."""
    ratios, (lo, hi) = dd["ratio_to_one_process"], dd["ratio_range"]["2 processes"]
    r = ratios["2 processes"]
    return tg.target(
        f"2-process DDP on CPU ≥ {dd['target_ratio']}× one process's samples/s at the same per-rank batch",
        tg.repeats_verdict(r, lo, hi, dd["target_ratio"], at_least=True),
        f"{r:.2f}× (paired range {lo:.2f}–{hi:.2f} over {dd['repeats']} repeats; one process with 2 threads: "
        f"{ratios['1 process, 2 threads']:.2f}×; two independent processes, no communication: "
        f"{ratios['2 independent processes']:.2f}×, DDP keeps {dd['ddp_over_independent']:.0%} of it"
        + ("; by per-rank batch: " + ", ".join(f"{b}: {x['ratio']:.2f}×" for b, x in dd["by_batch"].items())
           if "by_batch" in dd else "") + ")",
        "our check", effect=r, low=lo, high=hi, seeds=dd["repeats"])


def overhead_target(ov: pd.DataFrame, spine_cost: dict | None, tolerance: float = 1.1) -> Row:
    """Every spine method's time ratio ≤ its FLOP ratio × `tolerance`, on `spine_cost.json`'s paired repeats
    where it has the method (refuted when their range is wholly above), else on this run's (never refuted)."""
    verdicts, evidence = [], []
    for e in ov.index:
        if spine_cost and e != spine_cost["reference"] and e in spine_cost["ratio_to_reference"]:
            t, f, (lo, hi) = (spine_cost[k][e] for k in ("ratio_to_reference", "flop_ratio", "ratio_range"))
            src = (f"paired median of {spine_cost['repeats']} repeats, range {lo:.2f}–{hi:.2f}; "
                   f"this run {ov.loc[e, 'time ratio']:.2f}")
        else:
            lo, t, f, src = None, ov.loc[e, "time ratio"], ov.loc[e, "FLOP ratio"], "this run"
        goal = tolerance * f
        verdicts.append("confirmed" if t <= goal else "refuted" if lo is not None and lo > goal else "inconclusive")
        why = ov.loc[e, "explained"]
        own = why and f"; own-work ratio {ov.loc[e, 'own-work ratio']:.2f}: {why}"
        evidence.append(f"{e}: time {t:.2f} vs FLOPs {f:.2f} ({src}{own})")
    return tg.target(f"every method's time ratio ≤ its FLOP ratio × {tolerance:g} (vs SeqF)",
                     tg.all_of(verdicts), "; ".join(evidence))


def study_tables(params: dict) -> tuple[dict[str, pd.DataFrame], dict[str, dict[str, list[dict]]]]:
    """({study: `study_overheads`}, {study: its runs}) of `report.performance.studies` with FLOP counts."""
    tables, runs_of = {}, {}
    for study, spec in (params["report"]["performance"].get("studies") or {}).items():
        runs = discover_runs(spec["runs"], spec["experiments"])
        if spec["reference"] in runs:
            try:
                tables[study], runs_of[study] = study_overheads(runs, spec["reference"]), runs
            except ValueError:   # runs from before FLOPs were recorded
                continue
    return tables, runs_of


def studies_targets(tables: dict[str, pd.DataFrame], phased: set[str]) -> list[Row]:
    """Every paper study's methods within FLOPs × 1.1 of their study's reference; and every one over it,
    in the studies with phase times (`phased`), explained by them (`study_overheads`)."""
    over = [(s, e, t.loc[e]) for s, t in tables.items() for e in t.index[~t["within"]]]
    n = sum(len(t) for t in tables.values())
    out = [tg.target("every paper's method: time ratio ≤ its FLOP ratio × 1.1 (single in-study timings)",
                     tg.single_verdict(not over), f"{n - len(over)} of {n} within; over: " + ("; ".join(
                         f"{s} {e}: time {r['time ratio']:.2f} vs FLOPs {r['FLOP ratio']:.2f} ({r['uncounted work']})"
                         for s, e, r in over) or "none"))]
    if named := [(s, e, r) for s, e, r in over if s in phased]:
        out.append(tg.target(
            "every method over FLOPs × 1.1 is explained by its run's phase times: its most extra time is in a phase "
            "where its explanation's work runs, or with only those phases differing from the reference it is within "
            "the target", tg.single_verdict(all(r["explained"] in ("its phases", "variance elsewhere")
                                                for _, _, r in named)),
            "; ".join(f"{s} {e} ({r['explained'] or 'no phase times or explanation'}): "
                      f"{r['extra time by phase (rows over target)'] or '—'}, own-work ratio {r['own-work ratio']:.2f} "
                      f"vs FLOPs {r['FLOP ratio']:.2f}" for s, e, r in named)))
    return out


def eval_memory_targets(em: dict) -> list[Row]:
    """`eval_memory.py`'s targets: the chunked path's memory linear in gallery size, and 5× under the naive one."""
    mb = eval_memory_frame(em)["peak_mb"]
    slope, ratio = loglog_slope(mb.index, mb["chunked"]), em["memory_ratio_at_largest"]
    return [tg.target("chunked evaluation memory grows linearly in gallery size (log-log slope ≤ 1.2)",
                      tg.exact_verdict(slope <= 1.2),
                      f"slope {slope:.2f} (naive {loglog_slope(mb.index, mb['naive']):.2f})", effect=slope),
            tg.target(f"chunked evaluation needs ≥ 5× less peak memory than the naive path at {em['largest']:,}",
                      tg.exact_verdict(ratio >= em["target_ratio"]) if ratio else "inconclusive",
                      f"{ratio:.1f}× ({mb['naive'].iloc[-1]:.0f} vs {mb['chunked'].iloc[-1]:.0f} MB)"
                      if ratio else "naive path did not finish", effect=ratio)]


def budget_targets(pj: dict, bench: dict, params: dict, dvc_yaml: dict) -> list[Row]:
    """`pipeline.py`'s targets: the repro and its no-op, and each study's stages (`study_costs`), in budget."""
    perf, spine_cost = params["report"]["performance"], bench.get("spine_cost")
    slow, slows = pace_slowdown(pj, spine_cost), study_slowdowns(pj, spine_cost, perf["budgets"])
    bt = budget_table(pj, perf["budgets"], slows)
    costs = study_costs(pj, params, dvc_yaml, slows, retimed(bench, spine_cost))
    alone = costs[costs["measured"] != "the whole repro"]
    total, missing = perf["total_budget_minutes"], list(bt.index[bt["status"] == "not built"])
    at_pace = (f" ({pj['total_seconds'] / 60 / slow:.1f} min and {pj['noop_seconds'] / slow:.1f} s at the reference "
               f"pace, the machine {slow:.2f} × slower)" if slow > 1 else "")
    out = [tg.target(f"full default dvc repro (all four papers) ≤ {total} min; no-op ≤ 5 s",
                     tg.all_of([tg.budget_verdict(pj["total_seconds"], 60 * total, slow),
                                tg.budget_verdict(pj["noop_seconds"], 5, slow)] + ["inconclusive"] * bool(missing)),
                     f"{pj['total_seconds'] / 60:.1f} min, no-op {pj['noop_seconds']:.1f} s{at_pace}"
                     + (f"; not measurable yet: {', '.join(missing)} not built" if missing else "")
                     + (f"; re-timed alone since: {', '.join(alone.index)}, the whole then estimated at "
                        f"{costs['at reference pace min'].sum():.1f} min at the reference pace (not a measurement)"
                        if len(alone) else ""))]
    for paper, row in bt.iterrows():
        timed = paper in alone.index   # its stages timed alone later: judged on that measurement, at its pace
        r = alone.loc[paper] if timed else row
        if timed or row["status"] != "not built":
            out.append(tg.target(f"{paper} stages ≤ {row['budget min']} min", r["verdict"],
                                 f"{r['measured min']:.1f} min over {r['stages']} stages"
                                 + (f", timed {r['measured']}" if timed else "")
                                 + (f" ({r['at reference pace min']:.1f} at the reference pace)"
                                    if timed or slows[paper] > 1 else "")))
    return out


def targets(bench: dict[str, dict], params: dict, runs_dir, dvc_yaml: dict) -> list[Row]:
    """The performance ledger: from `benchmarks/results/*.json` (`bench`, by stem) and the studies' runs."""
    perf, seeds = params["report"]["performance"], params["seeds"]
    out = [r for name, tp in bench.items() if name.partition("_")[0] == "throughput" for r in throughput_targets(tp)]
    out += [ddp_target(bench["ddp_scaling"])] if "ddp_scaling" in bench else []
    exps = [e for e in perf["experiments"] if all((Path(runs_dir) / e / f"seed{s}" / "results.json").exists()
                                                   for s in seeds)]
    if perf["reference"] in exps:
        runs = require_runs(runs_dir, exps, seeds)
        out.append(overhead_target(study_overheads(runs, perf["reference"]), bench.get("spine_cost")))
    tables, runs_of = study_tables(params)
    if tables:
        out += studies_targets(tables, {s for s, runs in runs_of.items() if not study_phases(runs).empty})
    out += eval_memory_targets(bench["eval_memory"]) if "eval_memory" in bench else []
    out += budget_targets(bench["pipeline"], bench, params, dvc_yaml) if "pipeline" in bench else []
    return out
