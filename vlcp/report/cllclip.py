"""CLL-CLIP's tables from our runs of the language stream (pure functions of results dicts;
the notebook `cllclip_teir` lays them out beside the paper's numbers).

a[i][j] = Recall@1 on language j after task i (columns in stream order, None before language j
is learned). AR = mean over the learned languages of the final row; F = mean over j < T of
max_{k < T} a[k][j] − a[T][j] (max-based, as the paper and CLFM's gather.py). I2T = TR@1, T2I =
IR@1. "in" = unseen items in the training styles (MSCOCO36's role), "out" = the same items in
the held-out style (XM3600's role).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

SETS = {"in": "in_domain", "out": "out_domain"}
DIRECTIONS = {"I2T": "TR@1", "T2I": "IR@1"}


def accuracy_matrix(r: dict, eval_set: str = "in_domain", metric: str = "IR@1") -> np.ndarray:
    """float [tasks, languages], NaN where a language was not yet learned."""
    rows = r["matrix"][eval_set][metric]
    return np.array([[np.nan if v is None else v for v in row] for row in rows], float)


def ar(a: np.ndarray) -> float:
    return float(np.nanmean(a[-1]))


def forgetting(a: np.ndarray) -> float | None:
    """Max-based forgetting of the final model over the languages learned before the last task
    (None for one task: joint training)."""
    if len(a) < 2:
        return None
    earlier = a[:-1]
    cols = [j for j in range(a.shape[1]) if not np.isnan(earlier[:, j]).all()]
    return float(np.mean([np.nanmax(earlier[:, j]) - a[-1, j] for j in cols]))


def ar_curve(a: np.ndarray) -> np.ndarray:
    """AR_i after every task i (the per-task curve)."""
    return np.array([np.nanmean(row) for row in a])


def summary(r: dict, eval_set_suffix: str = "") -> dict[tuple[str, str, str], float | None]:
    """{(in|out, I2T|T2I, AR|F): value} of one run."""
    out = {}
    for s, name in SETS.items():
        key = name + eval_set_suffix
        if key not in r["matrix"]:
            continue
        for d, metric in DIRECTIONS.items():
            a = accuracy_matrix(r, key, metric)
            out[(s, d, "AR")] = ar(a)
            out[(s, d, "F")] = forgetting(a)
    return out


def table(runs: dict[str, dict], suffix: str = "") -> pd.DataFrame:
    """Rows = experiments, columns = (set, direction, AR|F)."""
    df = pd.DataFrame({exp: summary(r, suffix) for exp, r in runs.items()}).T
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    return df


def table2(runs: dict[str, dict], methods: list[str], prefix: str = "cll") -> pd.DataFrame:
    """The paper's Table 2 layout: per method (experiments `<prefix>-<method>[-teir]`; † where it
    needs the language at inference) rows plain / with TEIR / Δ (TEIR − plain), then joint
    (`<prefix>-joint`). Columns = (set, direction, AR|F)."""
    rows = {}
    for m in methods:
        name = m + (" †" if runs[f"{prefix}-{m}"]["needs_task_id"] else "")
        plain, teir = summary(runs[f"{prefix}-{m}"]), summary(runs[f"{prefix}-{m}-teir"])
        rows[(name, "plain")], rows[(name, "with TEIR")] = plain, teir
        rows[(name, "Δ (TEIR − plain)")] = {c: None if plain.get(c) is None or teir.get(c) is None else teir[c] - plain[c]
                                            for c in plain}
    rows[("joint", "")] = summary(runs[f"{prefix}-joint"])
    df = pd.DataFrame(rows).T
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    return df


def binomial_floor(r: dict, n_items: int, eval_set: str = "in_domain", metric: str = "IR@1") -> float:
    """Noise floor for a single-seed AR difference: 2·√2 × the binomial standard error of AR,
    treating each language's R@1 over its `n_items` test captions as independent (an
    approximation: one seed, no measured seed spread)."""
    p = accuracy_matrix(r, eval_set, metric)[-1] / 100
    p = p[~np.isnan(p)]
    se = np.sqrt(np.mean(p * (1 - p) / n_items) / len(p))
    return float(2 * np.sqrt(2) * se * 100)


def convergence_frame(runs: dict[str, dict]) -> pd.DataFrame:
    return pd.DataFrame({exp: r["convergence"] for exp, r in runs.items() if "convergence" in r}).T[["loss", "fisher_trace"]]


def train_seconds(r: dict) -> float:
    return float(sum(t["seconds"] for t in r["train"]))
