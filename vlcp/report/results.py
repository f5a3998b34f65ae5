"""Load run results, summarise them across seeds, and the numbers a claim compares, one per run:
`MEASURES` maps a claims file's `measure:` name to a function of one run's results (a study module
adds its own in its `MEASURES`)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd

from vlcp.errors import VlcpError
from vlcp.eval import continual
from vlcp.utils import read_results

RETRIEVAL = ["TR@1", "TR@5", "TR@10", "IR@1", "IR@5", "IR@10", "Rm"]
MAP = ["mAP@1", "mAP@5", "mAP@10"]
MAP_STD = ["mAP_std@1", "mAP_std@5", "mAP_std@10"]


def run_paths(runs_dir: str | Path, experiment: str, seed: int | str = "*") -> list[Path]:
    """The results files of `experiment` at `seed` (default: every seed) under
    `runs_dir/<experiment>/seed<S>/` or one level down (a study stage's `<study>/` folder)."""
    rel = f"{experiment}/seed{seed}/results.json"
    return sorted(Path(runs_dir).glob(rel)) + sorted(Path(runs_dir).glob(f"*/{rel}"))


def find_run(runs_dir: str | Path | list[str | Path], experiment: str, seed: int) -> Path | None:
    """The one results file of `experiment` at `seed` under `runs_dir` (or a list of folders); None if
    there is none; the same run in two places is an error naming both."""
    dirs = runs_dir if isinstance(runs_dir, list) else [runs_dir]
    found = [p for d in dirs for p in run_paths(d, experiment, seed)]
    if len(found) > 1:
        raise VlcpError(f"{experiment} seed {seed}: results in more than one place ({', '.join(map(str, found))}); "
                        "delete the stale one")
    return found[0] if found else None


def load_subset(runs_dir: str | Path | list[str | Path], experiments, seeds, *,
                strict: bool = False) -> tuple[dict[str, dict[int, dict]], list[str]]:
    """({experiment: {seed: results}} of the runs found under `runs_dir` (or a list of folders), the missing
    ones as "<experiment> seed <S>"); `strict`: a missing run is an error naming it in every folder."""
    found, missing, dirs = {}, [], runs_dir if isinstance(runs_dir, list) else [runs_dir]
    for e in experiments:
        for s in seeds:
            path = find_run(dirs, e, s)
            if path is None and strict:
                where = " or ".join(str(Path(d) / e / f"seed{s}" / "results.json") for d in dirs)
                raise VlcpError(f"{where}: missing; run `vlcp run {e} --seed {s}` (or `dvc repro`)")
            if path is None:
                missing.append(f"{e} seed {s}")
            else:
                found.setdefault(e, {})[s] = read_results(path)
    return found, missing


def require_runs(runs_dir: str | Path | list[str | Path], experiments: list[str],
                 seeds: list[int]) -> dict[str, list[dict]]:
    """{experiment: [results of each seed]} under `runs_dir` (or a list of folders); a missing run is an error."""
    found = load_subset(runs_dir, experiments, seeds, strict=True)[0]
    return {e: [found[e][s] for s in seeds] for e in experiments}


def long_reads(study: dict, runs_dir: str | Path, seeds: list[int]) -> tuple[list[int], list[str | Path]]:
    """(`seeds` then `report.<study>.long`'s seeds, once each; [`runs_dir`, the long runs' folder]):
    where a report reads its rows in the long profile, for `require_runs`."""
    return list(dict.fromkeys([*seeds, *study["long"]["seeds"]])), [runs_dir, study["long"]["runs"]]


def complete(found: dict[str, dict[int, dict]], seeds) -> dict[str, list[dict]]:
    """{experiment: [results in `seeds` order]} of `load_subset`'s experiments with every seed."""
    return {e: [by_seed[s] for s in seeds] for e, by_seed in found.items() if all(s in by_seed for s in seeds)}


def mean_std(values) -> tuple[float, float]:
    v = np.asarray(values, float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def fmt(m: float, s: float) -> str:
    return f"{m:.1f} ± {s:.1f}"


def over_seeds(values) -> str:
    """Mean ± sample std over seeds, or "m (1 seed)" (never "± 0.0")."""
    v = np.asarray(values, float)
    return fmt(*mean_std(v)) if len(v) > 1 else f"{v.mean():.1f} (1 seed)"


def per_seed(rs: list[dict], fn, *args) -> dict:
    """{column: [value per seed]} from fn(r, *args) -> {column: value}."""
    rows = [fn(r, *args) for r in rs]
    return {k: [row[k] for row in rows] for k in rows[0]}


def mean_frame(runs: dict, fn, *args) -> pd.DataFrame:
    """Rows: the keys of `runs` ({label: [its runs]}); columns: fn(r, *args)'s keys; cells: seed means."""
    return pd.DataFrame({exp: {k: float(np.mean(v)) for k, v in per_seed(rs, fn, *args).items()}
                         for exp, rs in runs.items()}).T


def shown_frame(runs: dict, fn, *args) -> pd.DataFrame:
    """`mean_frame` for the eye: cells as `over_seeds` where some row ran several seeds, except in a
    column no seed moves (a setting such as steps per task)."""
    if all(len(rs) == 1 for rs in runs.values()):
        return mean_frame(runs, fn, *args)
    seeded = {exp: per_seed(rs, fn, *args) for exp, rs in runs.items()}
    columns = set().union(*seeded.values())
    fixed = {k for k in columns if all(np.ptp(np.asarray(c[k], float)) == 0 for c in seeded.values() if k in c)}
    return pd.DataFrame({exp: {k: float(np.mean(v)) if k in fixed else over_seeds(v) for k, v in cols.items()}
                         for exp, cols in seeded.items()}).T


def final_metrics(r: dict) -> dict[str, float]:
    """The final model on the whole stream's pools (the last cumulative row)."""
    return r["cumulative"][-1]["test"]


def final_table(runs: dict[str, list[dict]], metrics=RETRIEVAL + MAP + MAP_STD) -> pd.DataFrame:
    """The final model's metrics per experiment, over seeds."""
    return pd.DataFrame.from_dict({exp: {m: over_seeds([final_metrics(r)[m] for r in rs]) for m in metrics}
                                   for exp, rs in runs.items()}, orient="index")


def matrix(r: dict, eval_set: str = "unseen_style", metric: str = "Rm") -> np.ndarray:
    return np.asarray(r["matrix"][eval_set][metric], float)


def continual_table(runs: dict[str, list[dict]], eval_set: str = "unseen_style", metric: str = "Rm") -> pd.DataFrame:
    """Final average, average incremental, forgetting, BWT of a[i][j] and CTP's cumulative BWT."""
    def row(r: dict) -> dict:
        a = matrix(r, eval_set, metric)
        return {"final avg": continual.final_average(a), "avg incremental": continual.average_incremental(a),
                "forgetting": continual.forgetting(a), "BWT": continual.bwt(a),
                "CTP BWT (cum. Rm)": continual.ctp_bwt([c["test"]["Rm"] for c in r["cumulative"]],
                                                       [c["Rm"] for c in r["final_cumulative"]])}
    return pd.DataFrame.from_dict({exp: {k: over_seeds(v) for k, v in per_seed(rs, row).items()}
                                   for exp, rs in runs.items()}, orient="index")


def curve(rs: list[dict], metric: str = "Rm", key: str = "cumulative") -> tuple[np.ndarray, np.ndarray]:
    """Mean and std over seeds of the cumulative-pool metric after each task."""
    v = np.asarray([[c["test"][metric] for c in r[key]] for r in rs], float)
    return v.mean(0), v.std(0, ddof=1) if len(v) > 1 else np.zeros(v.shape[1])


def timing_table(runs: dict[str, list[dict]]) -> pd.DataFrame:
    """Per experiment: training and evaluation seconds, samples, their rate, FLOPs per step and peak memory."""
    def row(rs: list[dict]) -> dict:
        train, ev, samples = ([sum(t[k] for t in r["train"]) for r in rs]
                              for k in ("seconds", "eval_seconds", "samples"))
        return {"train s": over_seeds(train), "eval s": over_seeds(ev), "samples": int(np.mean(samples)),
                "samples/s": f"{np.mean([n / s for n, s in zip(samples, train)]):.0f}",
                "GFLOPs/step": f"{rs[0].get('flops_per_step', 0) / 1e9:.2f}",
                "peak MB": f"{max(t['peak_memory_mb'] for r in rs for t in r['train']):.0f}"}
    return pd.DataFrame.from_dict({exp: row(rs) for exp, rs in runs.items()}, orient="index")


def iter_results(runs) -> list[dict]:
    """Every results dict (one with a `train` list) in a run collection, however it nests them."""
    if isinstance(runs, dict) and isinstance(runs.get("train"), list):
        return [runs]
    if isinstance(runs, (dict, list, tuple)):
        return [r for v in (runs.values() if isinstance(runs, dict) else runs) for r in iter_results(v)]
    return []


def run_seconds(r: dict) -> float:
    """A run's own wall clock (`wall_seconds`, every attempt), else its training and evaluation seconds."""
    return r.get("wall_seconds") or sum(t["seconds"] + t.get("eval_seconds", 0.0) for t in r["train"])


def time_line(*collections) -> str:
    """A report header's line: how many runs it reads, how long they took by their own clocks, and a warning
    when their `versions.cpu_capability` differ."""
    def key(r):   # a run loaded twice (two tables reading one experiment's seed) counts once
        return (r["experiment"], r["seed"], r.get("config_hash")) if "experiment" in r and "seed" in r else id(r)
    rs = list({key(r): r for c in collections for r in iter_results(c)}.values())
    if not rs:
        return "No runs read."
    secs, caps = sum(run_seconds(r) for r in rs), Counter((r.get("versions") or {}).get("cpu_capability") for r in rs)
    unknown, mixed = caps.pop(None, 0), ""
    if len(caps) >= 2:   # AVX2 and AVX512 kernels round otherwise: a seed is not one draw across them
        mixed = (" **These runs mix CPU capabilities** ("
                 + ", ".join(f"{n} on {cap}" for cap, n in sorted(caps.items()))
                 + (f", {unknown} unrecorded" if unknown else "") + "): their kernels round otherwise, so a seed is "
                 "not the same draw across them; re-run the study on one host (`dvc repro --force` its stages) "
                 "before reading small differences.")
    return (f"**{len(rs)} run{'s' if len(rs) != 1 else ''}**, **{secs / 60:.1f} min** by their own clocks (the longest "
            f"{max(run_seconds(r) for r in rs) / 60:.1f} min). The pipeline runs some side by side: its stage "
            "times are in the performance report." + mixed)


def step_time(r: dict, skip_first: bool = True) -> float:
    """Seconds per training step, over the tasks after the first (where the methods differ)."""
    rows = r["train"][1:] if skip_first and len(r["train"]) > 1 else r["train"]
    return sum(t["seconds"] for t in rows) / max(1, sum(t["steps"] for t in rows))


def _passes_counted(r: dict) -> bool:
    """Whether every task with its step's FLOPs has its per-task pass FLOPs (None: not counted; absent: 0)."""
    return all(t.get("task_pass_flops", 0) is not None for t in r["train"] if t.get("flops_per_step", 0) is not None)


def fill_pass_flops(runs: list[dict]) -> list[dict]:
    """The seeds of one experiment, those that did not count their per-task passes given (as copies)
    the counts of the first that did, task by task: the passes' FLOPs depend on shapes, not seeds."""
    counted = next((r for r in runs if _passes_counted(r)), None)
    if counted is None:
        return list(runs)

    def filled(r: dict) -> dict:
        if r.get("experiment") != counted.get("experiment") or r.get("tasks") != counted.get("tasks"):
            raise ValueError(f"fill_pass_flops: {r.get('experiment')} and {counted.get('experiment')} are not "
                             "runs of one experiment over the same tasks")
        train = [t if t.get("task_pass_flops", 0) is not None else {**t, "task_pass_flops": c["task_pass_flops"]}
                 for t, c in zip(r["train"], counted["train"])]
        return {**r, "train": train, "pass_flops_from_seed": counted.get("seed")}

    return [r if _passes_counted(r) else filled(r) for r in runs]


def flops_per_step(r: dict) -> float:
    """FLOPs per training step with the method's per-task passes amortised: the step-weighted mean over
    the tasks that recorded theirs, else the run's `flops_per_step` (task 0's first step)."""
    per_task = [t for t in r["train"] if t.get("flops_per_step")]
    if not _passes_counted({"train": per_task}):
        seeds = r.get("config", {}).get("train", {}).get("pass_flops_seeds")
        raise ValueError(f"{r.get('experiment')} seed {r.get('seed')}: its per-task passes were not counted "
                         f"(train.pass_flops_seeds: {seeds}); take them "
                         "from a seed that counted them with report.results.fill_pass_flops")
    if not per_task:
        return float(r.get("flops_per_step") or float("nan"))
    flops = sum(t["flops_per_step"] * t.get("steps", 1) + t.get("task_pass_flops", 0) for t in per_task)
    return float(flops / sum(t.get("steps", 1) for t in per_task))


def final_rm(r: dict) -> float:
    """The final model's Rm on the cumulative test pool (every task)."""
    return final_metrics(r)["Rm"]


def first_task_gain(r: dict) -> float:
    """Task 1's Rm after task 1 − the starting model's, on the unseen style."""
    return matrix(r)[0, 0] - r["zero_shot"]["unseen_style"]["Rm"][0]


def first_task_drop(r: dict) -> float:
    """Task 1's Rm after task 1 − after the last task, on the unseen style."""
    return matrix(r)[0, 0] - matrix(r)[-1, 0]


def forgetting(r: dict) -> float:
    """Max-based forgetting of the unseen style's Rm matrix (`vlcp.eval.continual.forgetting`)."""
    return continual.forgetting(matrix(r))


MEASURES = MappingProxyType({f.__name__: f for f in (final_rm, first_task_gain, first_task_drop, forgetting)})
