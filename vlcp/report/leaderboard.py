"""The leaderboard: every method on one stream, ranked with its uncertainty. Scores are
{method: {seed: value}}; a seed is one benchmark draw shared by every method, so methods are compared
paired by seed, with Holm's correction over the family."""
from __future__ import annotations

import math
from typing import Hashable, Mapping

import pandas as pd
import yaml
from scipy import stats as sps

from vlcp.report import fomo
from vlcp.report import stats as st
from vlcp.report.fomo import run_headline  # noqa: F401  (`vlcp report metrics`' numbers of a track 2 run)
from vlcp.report.paper import studies_root
from vlcp.report.power import StudyPower, study_power
from vlcp.report.results import fill_pass_flops, final_rm, flops_per_step, run_seconds
from vlcp.report.stats import Values
from vlcp.report.study import Runs, as_lists, values

ALPHA = 1 - st.LEVEL
Scores = Mapping[str, Values]


def paired_p(a: Values, b: Values, alternative: str = "two-sided") -> float | None:
    """The paired t test's p-value of a − b; None when its noise cannot decide (`stats.Noise.usable`)."""
    d = st.paired(a, b)
    noise = st.pair_noise(d)
    if noise is None or not noise.usable:
        return None
    return float(sps.ttest_1samp(list(d.values()), 0.0, alternative=alternative).pvalue)


def holm(pvalues: Mapping[Hashable, float | None], alpha: float = ALPHA) -> set:
    """The hypotheses Holm's step-down rejects; a None p-value counts in the family, never rejected."""
    m, rejected = len(pvalues), set()
    for i, (p, k) in enumerate(sorted((p, k) for k, p in pvalues.items() if p is not None)):
        if p > alpha / (m - i):
            break
        rejected.add(k)
    return rejected


def standings(scores: Scores, level: float = st.LEVEL) -> pd.DataFrame:
    """Each method's mean over its seeds with its t interval, best first."""
    rows = []
    for method, v in scores.items():
        x = [float(y) for y in v.values()]
        n, mean = len(x), sum(x) / len(x)
        half = st.quantile(level, n - 1) * st.seed_sd(x) / math.sqrt(n) if n >= 2 else math.inf
        rows.append({"method": method, "mean": mean, "low": mean - half, "high": mean + half, "seeds": n})
    return pd.DataFrame(rows).sort_values("mean", ascending=False, ignore_index=True)


def rank_intervals(scores: Scores, alpha: float = ALPHA) -> dict[str, tuple[int, int]]:
    """Each method's rank interval (1 = best) from every pair's two-sided paired test, Holm over all pairs."""
    names = list(scores)
    pairs = {(a, b): paired_p(scores[a], scores[b]) for i, a in enumerate(names) for b in names[i + 1:]}
    wins = [(a, b) if sum(st.paired(scores[a], scores[b]).values()) > 0 else (b, a)
            for a, b in holm(pairs, alpha)]   # (better, worse)
    return {m: (1 + sum(lo == m for _, lo in wins), len(names) - sum(hi == m for hi, _ in wins))
            for m in names}


def tied_with_best(scores: Scores, alpha: float = ALPHA) -> tuple[str, list[str]]:
    """The best method by mean and the methods no other is surely better than, by mean (from all
    pairs: testing the picked best against the rest would be biased)."""
    means = {m: sum(v.values()) / len(v) for m, v in scores.items()}
    ranks = rank_intervals(scores, alpha)
    tied = sorted((m for m in scores if ranks[m][0] == 1), key=means.get, reverse=True)
    return tied[0] if tied else max(means, key=means.get), tied


def against(scores: Scores, baseline: str, level: float = st.LEVEL) -> dict[str, st.Effect]:
    """Every method − `baseline`, paired by seed, on Bonferroni intervals over the family."""
    others = [m for m in scores if m != baseline]
    at = st.bonferroni_level(len(others), level)
    return {m: st.effect(scores[m], scores[baseline], level=at) for m in others}


def table(scores: Scores, baseline: str, alpha: float = ALPHA) -> pd.DataFrame:
    """The ranking: standings, rank intervals, the group tied with the best, and each method − `baseline`."""
    ranks = rank_intervals(scores, alpha)
    _, tied = tied_with_best(scores, alpha)
    vs = against(scores, baseline, 1 - alpha)
    frame = standings(scores, 1 - alpha)
    frame["rank"] = [f"{ranks[m][0]}–{ranks[m][1]}" if ranks[m][0] < ranks[m][1] else str(ranks[m][0])
                     for m in frame["method"]]
    frame["tied with best"] = frame["method"].isin(tied)
    frame[f"vs {baseline}"] = [f"{vs[m].diff:+.2f} [{vs[m].low:+.2f}, {vs[m].high:+.2f}]" if m in vs else "—"
                              for m in frame["method"]]
    return frame


def beside(ranking: pd.DataFrame, others: Mapping[str, Scores]) -> pd.DataFrame:
    """A `table` with each method's mean of other metrics beside its headline (GM's A_KA and A_ZS)."""
    return ranking.assign(**{label: ranking["method"].map(standings(scores).set_index("method")["mean"])
                             for label, scores in others.items()})


def by_method(runs: Mapping[str, Mapping[int, dict]], experiments, replacing=()) -> dict[str, Mapping[int, dict]]:
    """{method name: {seed: results}} of the `experiments` that ran, each replaced by the experiment of
    `replacing` running the same method (the compute-matched arm: the methods a budget gives other steps)."""
    return {next(iter(runs[e].values()))["config"]["method"]["name"]: runs[e]
            for e in (*experiments, *replacing) if runs.get(e)}


def budget(folder=None) -> pd.DataFrame:
    """The track's compute-matched budget by method (`studies/leaderboard/budget.yaml`, from
    benchmarks/leaderboard_budget.py): a step's GFLOPs, per-task passes, memory ×, steps, trainable params (M)."""
    doc = yaml.safe_load((studies_root(folder) / "leaderboard" / "budget.yaml").read_text(encoding="utf-8"))
    e = pd.DataFrame(doc["experiments"].values()).set_index("method")
    return pd.DataFrame({"GFLOPs/step": e["flops"] / 1e9, "pass GFLOPs/task": e["task_flops"] / 1e9,
                         "memory ×": e["memory_bytes"] / doc["full_ft"]["memory_bytes"], "steps": e["steps"],
                         "trainable (M)": e["trainable_params"] / 1e6})


def costs(runs: Mapping[str, Mapping[int, dict]]) -> pd.DataFrame:
    """Each method's cost, mean over its seeds: steps, FLOPs per step (per-task passes included,
    `fill_pass_flops`), training FLOPs, wall seconds and replay memory (pairs)."""
    rows = []
    for method, by_seed in runs.items():
        rs = fill_pass_flops(list(by_seed.values()))
        step = [flops_per_step(r) for r in rs]
        steps = [sum(t["steps"] for t in r["train"]) for r in rs]
        rows.append({"method": method, "steps": sum(steps) / len(rs), "GFLOPs/step": sum(step) / len(rs) / 1e9,
                     "training PFLOPs": sum(f * n for f, n in zip(step, steps)) / len(rs) / 1e15,
                     "wall s": sum(run_seconds(r) for r in rs) / len(rs),
                     "memory (pairs)": rs[0]["config"]["method"].get("buffer_size", 0)})
    return pd.DataFrame(rows).set_index("method")


def memory_multipliers(runs: Mapping[str, Mapping[int, dict]]) -> pd.Series:
    """Each method's training memory over full fine-tuning's: its concept-stream runs' MAFs `budget`."""
    return pd.Series({m: next(iter(by_seed.values()))["budget"]["memory_multiplier"] for m, by_seed in runs.items()},
                     name="memory ×", dtype=float)


def pareto(score: Mapping[str, float], cost: Mapping[str, float]) -> list[str]:
    """The methods no other beats on both: a higher score at no more cost (ties kept)."""
    return [m for m in score
            if not any(score[o] > score[m] and cost[o] <= cost[m] for o in score if o != m)]


def reading(scores: Scores, baseline: str, power_ok: bool, alpha: float = ALPHA) -> str:
    """One paragraph, from the ranking's numbers, of what it decides and what it cannot."""
    best, tied = tied_with_best(scores, alpha)
    better = [m for m, e in against(scores, baseline, 1 - alpha).items() if e.usable and e.low > 0]
    seeds = min(len(v) for v in scores.values())
    text = (f"**{best}** has the best mean of {len(scores)} methods at {seeds} seeds; {len(tied)} cannot be told "
            f"from the best ({', '.join(tied)}), paired by seed with Holm's correction. {len(better)} beat "
            f"{baseline} on Bonferroni intervals" + (f" ({', '.join(better)})" if better else "") + ".")
    if not power_ok:
        return text + (" The track's calibration is missing or short of its power goal (the power section says"
                       " which), so this ranking is exploratory.")
    if len(tied) > 1:
        text += f" Telling the {len(tied)} tied methods apart needs more seeds than these {seeds}."
    return text


def track_power(cal_runs: Runs, calibration: Mapping, measure, metric: str, gains_of, teaching_from: str,
                min_seeds: int = 3) -> StudyPower | None:
    """A track's power from its calibration runs: H = upper − lower (`calibration["experiments"]`) of `measure`,
    σ_d over their paired seeds, teaching from `gains_of(lower's runs)`; None below `min_seeds` paired seeds."""
    upper, lower = calibration["experiments"]
    up, lo = values(cal_runs, upper, measure), values(cal_runs, lower, measure)
    seeds = sorted(set(up) & set(lo))
    if len(seeds) < min_seeds:
        return None
    return study_power(metric, [up[s] for s in seeds], [lo[s] for s in seeds], gains_of(as_lists(cal_runs)[lower]),
                       headroom_from=f"{upper} − {lower}, {metric}", teaching_from=teaching_from)


def missing_track(track: str, absent: list[str], stages: str) -> str:
    """One markdown line for a track without its runs: which are missing and the stages that make them."""
    shown = ", ".join(f"`{m}`" for m in absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
    return (f"**{track} has no report yet**: its runs are missing ({shown}). Make them with `dvc repro {stages}` "
            "at the project root; its sections below are skipped.")


# The rankings `vlcp report metrics` writes: (name, its track's block, its compute-matched arms' key or None, measure)
RANKINGS = (("track1", "track1", "compute_matched", final_rm), ("track1_equal_steps", "track1", None, final_rm),
            ("track2", "track2", None, fomo.MEASURES["GM"]))


def ranking_metrics(scores: Scores, alpha: float = ALPHA) -> dict:
    """A ranking as a metrics file holds it: the best method, the size of the group tied with it and, best
    first, each method's mean over its seeds, its seeds, rank interval and whether it is in that group."""
    ranks = rank_intervals(scores, alpha)
    best, tied = tied_with_best(scores, alpha)
    methods = {row.method: {"mean": round(row.mean, 4), "seeds": row.seeds, "rank_low": ranks[row.method][0],
                            "rank_high": ranks[row.method][1], "tied_with_best": row.method in tied}
               for row in standings(scores).itertuples()}
    return {"best": best, "tied_with_best": len(tied), "methods": methods}


def metric_sources(block: Mapping, params: Mapping) -> dict:
    """`vlcp report metrics`' runs: both tracks' at their seeds (not the calibration's); its curves: track 1's."""
    one, two = block.get("track1") or {}, block.get("track2") or {}
    return {"experiments": [*one.get("experiments", []), *one.get("compute_matched", [])] or None,
            "seeds": sorted({*one.get("seeds", []), *two.get("seeds", [])}) or None}


def metrics_summary(runs: Mapping[str, list[dict]], block: Mapping) -> dict:
    """`vlcp report metrics`' `RANKINGS` ({experiment: [results]} → {"rankings": {name: `ranking_metrics`}}),
    each of its track's experiments at its seeds; a ranking none of whose runs are there is left out."""
    out = {}
    for name, key, matched, measure in RANKINGS:
        track = block.get(key) or {}
        at = {e: {r.get("seed", 0): r for r in rs if r.get("seed", 0) in (track.get("seeds") or ())}
              for e, rs in runs.items()}
        arms = by_method(at, track.get("experiments") or (), track.get(matched) or ())
        if arms:
            out[name] = ranking_metrics({m: values(arms, m, measure) for m in arms})
    return {"rankings": out}
