"""Does the stream teach? Per task t, the gain of training on it on its own evaluation pool (the
score after task t minus after task t−1, or the starting model's before task 0), against noise: the
seed std of the gain, or with one seed the sampling SE on the pool's size. A task *teaches* when its
mean gain exceeds 2 × noise."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from vlcp.errors import VlcpError

ZERO_SHOT = "starting model"          # the model before task 0 (the run's zero_shot row)
PREVIOUS = "after task t−1"


def _who(r: dict) -> str:
    return f"{r.get('experiment', 'run')} seed {r.get('seed', '?')}"


def _lookup(r: dict, key: str, eval_set: str | None, metric: str):
    try:
        return r[key][eval_set][metric]
    except (KeyError, TypeError):
        sets = r.get(key) or {}   # what it has: the set's metrics, else its sets
        have = sorted(sets[eval_set]) if isinstance(sets.get(eval_set), dict) else sorted(sets)
        raise VlcpError(f"teach: {_who(r)}: no {key}[{eval_set!r}][{metric!r}] in its results "
                        f"(has: {', '.join(map(str, have)) or 'none'})") from None


def _matrix_parts(r: dict, metric: str, eval_set: str, pool_sizes: Sequence[int] | None) -> list[dict]:
    a, z = _lookup(r, "matrix", eval_set, metric), _lookup(r, "zero_shot", eval_set, metric)
    tasks = r.get("tasks") or [f"task {t + 1}" for t in range(len(a))]
    if pool_sizes is not None and len(pool_sizes) != len(tasks):
        raise VlcpError(f"teach: pool_sizes: {len(pool_sizes)} sizes for the {len(tasks)} tasks of {_who(r)}")
    return [{"t": t, "task": str(tasks[t]), "part": str(tasks[t]), "weight": 1.0,
             "before": z[t] if t == 0 else a[t - 1][t], "after": a[t][t],
             "n": np.nan if pool_sizes is None else pool_sizes[t], "baseline": ZERO_SHOT if t == 0 else PREVIOUS}
            for t in range(len(a))]   # the tasks trained so far (a partial run has fewer rows)


def _language_parts(r: dict, metric: str, eval_set: str, pool_sizes: Mapping[str, int] | None) -> list[dict]:
    a, z = _lookup(r, "matrix", eval_set, metric), _lookup(r, "zero_shot", eval_set, metric)
    rows = []
    for t in range(len(a)):
        learn = r["task_languages"][t]
        for lang in learn:
            j = r["languages"].index(lang)
            before, baseline = (a[t - 1][j], PREVIOUS) if t > 0 and a[t - 1][j] is not None else (z[j], ZERO_SHOT)
            rows.append({"t": t, "task": r["tasks"][t], "part": lang, "weight": 1.0 / len(learn), "before": before,
                         "after": a[t][j], "n": (pool_sizes or {}).get(lang, np.nan), "baseline": baseline})
    return rows


def _fomo_parts(r: dict, metric: str) -> list[dict]:
    from vlcp.data.concepts import format_entry, parse_entry

    if metric != "A_KA":
        raise VlcpError(f"teach: {_who(r)}: a FoMo-in-Flux run's per-task score is its adaptation accuracy: metric "
                        f"'A_KA' (its datasets), not {metric!r}")
    points = [r["zero_shot"], *r["trajectory"]]
    per_class = all("classes" in p for p in points)
    adaptation = {d for d, info in r["datasets"].items() if info["role"] == "adaptation"}
    rows = []
    for t in range(len(r["trajectory"])):
        concepts = [parse_entry(e) for e in r["tasks"][t]]
        unknown = [c.dataset for c in concepts if c.dataset not in adaptation]
        if unknown:
            raise VlcpError(f"teach: {_who(r)}: task {t + 1}'s concepts come from {unknown[0]!r}, not an adaptation "
                            "dataset of its results (`datasets`)")
        base = {"t": t, "task": f"task {t + 1}", "baseline": ZERO_SHOT if t == 0 else PREVIOUS}
        own = [c for c in concepts if per_class and c.classname in points[t]["classes"].get(c.dataset, {})]
        for c in own:   # the concept's own test images
            rows.append({**base, "part": format_entry(c), "weight": 1 / len(concepts),
                         "before": points[t]["classes"][c.dataset][c.classname],
                         "after": points[t + 1]["classes"][c.dataset][c.classname],
                         "n": r["datasets"][c.dataset].get("class_n", {}).get(c.classname, np.nan)})
        for d, k in Counter(c.dataset for c in concepts if c not in own).items():   # the dataset's score stands in
            rows.append({**base, "part": d, "weight": k / len(concepts), "before": points[t]["datasets"][d],
                         "after": points[t + 1]["datasets"][d], "n": r["datasets"][d]["n"]})
    return rows


def pool_scores(r: dict, metric: str, eval_set: str | None = None,
                pool_sizes: Sequence[int] | Mapping[str, int] | None = None) -> pd.DataFrame:
    """One run: per task t, a row per part of its pool (the task, a language, a FoMo concept or dataset): its `weight`
    in the task's score, its score `before` and `after` (%), its size `n` (NaN: unknown) and which model is `before`."""
    if "trajectory" in r:
        rows = _fomo_parts(r, metric)
    elif "task_languages" in r:
        rows = _language_parts(r, metric, eval_set or "in_domain", pool_sizes)
    else:
        rows = _matrix_parts(r, metric, eval_set or "test", pool_sizes)
    df = pd.DataFrame(rows, columns=["t", "task", "part", "weight", "before", "after", "n", "baseline"])
    return df.astype({"before": float, "after": float, "n": float, "weight": float})


def sampling_se(before, after, n, weight) -> float:
    """The sampling SE (points) of a difference of two weighted means of proportions (in %):
    √(Σ w² (p_b(1−p_b) + p_a(1−p_a)) / n), w summing to 1; NaN if any n is."""
    pb, pa = (np.clip(np.asarray(x, float) / 100, 0, 1) for x in (before, after))
    n, w = np.asarray(n, float), np.asarray(weight, float)
    return float(100 * np.sqrt(np.sum((w / w.sum()) ** 2 * (pb * (1 - pb) + pa * (1 - pa)) / n)))


def run_gains(r: dict, metric: str, eval_set: str | None = None,
              pool_sizes: Sequence[int] | Mapping[str, int] | None = None) -> pd.DataFrame:
    """One run: per task its `before`, `after`, `gain` (points), pool size `n` and sampling SE `se`."""
    parts = pool_scores(r, metric, eval_set, pool_sizes)
    rows = []
    for t, p in parts.groupby("t", sort=True):
        w = p["weight"] / p["weight"].sum()
        before, after = float((w * p["before"]).sum()), float((w * p["after"]).sum())
        rows.append({"t": t, "task": p["task"].iloc[0], "baseline": " / ".join(dict.fromkeys(p["baseline"])),
                     "before": before, "after": after, "gain": after - before, "n": float(p["n"].sum(min_count=len(p))),
                     "se": sampling_se(p["before"], p["after"], p["n"], w)})
    return pd.DataFrame(rows).set_index("t")


def task_gains(results_by_seed: Sequence[dict], metric: str, eval_set: str | None = None,
               pool_sizes: Sequence[int] | Mapping[str, int] | None = None) -> pd.DataFrame:
    """Per task of one experiment (a run per seed): the means of `before`, `after` and the gain over
    seeds, the `noise` and its source, and `teaches` (gain_mean > 2 × noise; False where unknown)."""
    if not results_by_seed:
        raise VlcpError("teach: task_gains: no runs given (results_by_seed is empty)")
    per = [run_gains(r, metric, eval_set, pool_sizes) for r in results_by_seed]
    tasks = list(per[0]["task"])
    for r, g in zip(results_by_seed[1:], per[1:]):
        if list(g["task"]) != tasks:
            raise VlcpError(f"teach: {_who(r)} has tasks {list(g['task'])}, {_who(results_by_seed[0])} "
                            f"{tasks}: not runs of one experiment")
    seeds, gains = len(per), np.stack([g["gain"].to_numpy() for g in per])
    out = per[0][["task", "baseline", "n"]].assign(before=np.mean([g["before"] for g in per], axis=0),
                                                   after=np.mean([g["after"] for g in per], axis=0),
                                                   gain_mean=gains.mean(axis=0))
    if seeds >= 2:
        out["noise"] = gains.std(axis=0, ddof=1)
        out["noise_source"] = f"seed std of the gain ({seeds} seeds)"
    else:
        out["noise"] = per[0]["se"].to_numpy()
        out["noise_source"] = [("sampling SE, difference of two proportions" + (f" (n = {n:.0f})" if n == n else "")
                                if se == se else "unknown (one seed, pool size not given)")
                               for n, se in zip(out["n"], out["noise"])]
    out["n_seeds"] = seeds
    out["teaches"] = (out["gain_mean"] > 2 * out["noise"]).astype(bool)
    return out[["task", "baseline", "before", "after", "gain_mean", "noise", "noise_source", "n", "n_seeds", "teaches"]]


def recorded_gains(results_by_seed: Sequence[dict], metric: str, eval_set: str = "test") -> pd.DataFrame | None:
    """`task_gains` of one experiment's matrix runs on `eval_set`, None when a run holds no per-task
    scores there; with one seed, the pools' sizes are read from the run's data."""
    if not results_by_seed or not all((r.get("zero_shot") or {}).get(eval_set) and (r.get("matrix") or {}).get(eval_set)
                                      for r in results_by_seed):
        return None
    sizes = pool_sizes(results_by_seed[0], eval_set) if len(results_by_seed) < 2 else None
    return task_gains(results_by_seed, metric, eval_set, sizes)


def teach_sentence(gains: pd.DataFrame, who: str = "") -> str:
    """"<who>: training teaches on k of T tasks (gain > 2 × noise); median gain x points" of a `task_gains` frame."""
    k, total = int(gains["teaches"].sum()), len(gains)
    median = float(np.median(gains["gain_mean"])) if total else float("nan")
    sources = "; ".join(dict.fromkeys(s.split(" (n = ")[0] for s in gains["noise_source"]))
    return (f"{who + ': ' if who else ''}training teaches on {k} of {total} tasks (gain > 2 × noise); "
            f"median gain {median:+.1f} points (noise: {sources}).")


def gains_frame(gains: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Several runs' `task_gains` side by side, rounded: a row per task, columns (run, quantity)."""
    cols = {}
    for label, g in gains.items():
        kinds = dict.fromkeys("seed std" if s.startswith("seed std") else "sampling SE" if s.startswith("sampling")
                              else "unknown" for s in g["noise_source"])
        idx = pd.MultiIndex.from_arrays([g["task"], g["baseline"]], names=["task", "before = the model"])
        for name, col, digits in (("before", "before", 1), ("after", "after", 1), ("gain", "gain_mean", 2),
                                  (f"noise ({', '.join(kinds)})", "noise", 2)):
            cols[(label, name)] = pd.Series(g[col].to_numpy(), index=idx).round(digits)
        cols[(label, "teaches")] = pd.Series(g["teaches"].to_numpy(), index=idx)
    return pd.DataFrame(cols)


def pool_sizes(r: dict, eval_set: str = "test") -> list[int]:
    """The images of each task in `eval_set` ("test": the test split in the training styles, "unseen_style": every
    split in the unseen ones) of a matrix run, from the prepared benchmark it names (results do not record them)."""
    import torch

    from vlcp.config import DataCfg, build
    from vlcp.data.load import load_benchmark

    cfg = build(DataCfg, r["config"]["data"], "data")
    if not Path(cfg.root).exists() and cfg.benchmark == "emoji":
        raise VlcpError(f"teach: {_who(r)}: its data ({cfg.root}) is not here; pool sizes come from it")
    bench = load_benchmark(cfg)
    sets = {"test": ("test", cfg.train_styles), "unseen_style": (("train", "val", "test", "query"), cfg.unseen_styles)}
    if eval_set not in sets or not sets[eval_set][1]:
        raise VlcpError(f"teach: pool_sizes: {_who(r)} has no evaluation set {eval_set!r} "
                        f"(data.unseen_styles: {cfg.unseen_styles}; known sets: {', '.join(sets)})")
    return torch.bincount(bench.pairs(*sets[eval_set]).image_tasks, minlength=len(bench.task_names)).tolist()


def testable_line(gains: pd.DataFrame, needs_teaching: Sequence[str], who: str) -> str:
    """What the study can test, from `who`'s `task_gains` (its least regularised run): whether
    training teaches on at least half of the tasks, else which claims (`needs_teaching`) it cannot."""
    k, total = int(gains["teaches"].sum()), len(gains)
    if total and 2 * k >= total:
        return (f"**The stream teaches** ({who}: gain > 2 × noise on {k} of {total} tasks): the claims about "
                "learning and forgetting the stream's tasks are testable on it.")
    items = "; ".join(needs_teaching) or "every claim about learning the stream's tasks"
    return (f"**The stream does not clearly teach** ({who}: gain > 2 × noise on only {k} of {total} tasks). This "
            f"study therefore cannot test: {items}. The ledger's rows on these measure how the methods keep the "
            "starting model, not how they learn and keep new tasks.")
