"""IncCLIP's tables from our runs (pure functions of results dicts; the notebook
`incclip_ablations` lays them out beside the paper's numbers).

Our stand-ins for the paper's evaluation sets (held-out suite, `Evaluator.heldout`):
zero-shot classification (prompt ensembles) by subgroup and by group on the unseen items in the
training styles and on every item in the unseen style, by shape and colour on the procedural
shapes, and by object count and background on the procedural scenes — the paper's eight
classification sets; zero-shot retrieval on the unseen items (the
in-domain set, Flickr30K's role) and on the unseen style (out of domain, MSCOCO's role)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from vlcp.eval.continual import bwt

CLASSIFICATION = {"test/subgroup": "subgroup (unseen items)", "test/group": "group (unseen items)",
                  "unseen_style/subgroup": "subgroup (unseen style)", "unseen_style/group": "group (unseen style)",
                  "shapes/shape": "shape (shapes)", "shapes/colour": "colour (shapes)",
                  "scenes/count": "count (scenes)", "scenes/background": "background (scenes)"}
RETRIEVAL_SETS = {"test": "unseen items", "unseen_style": "unseen style"}
HEADLINE = "test/subgroup"   # the ImageNet column's role: the classes the stream is cut by


def classification(r: dict, step: int = -1) -> dict[str, float]:
    """Zero-shot top-1 (%) per held-out set after `step`, plus their mean ("Average")."""
    acc = r["heldout"][step]["classification"]
    row = {name: acc[key] for key, name in CLASSIFICATION.items() if key in acc}
    row["Average"] = float(np.mean(list(row.values())))
    return row


def retrieval(r: dict, step: int = -1, ks=(1, 5, 10)) -> dict[tuple[str, str, str], float]:
    """{(set, "I2T"|"T2I", "R@k"): %} on the whole held-out sets after `step`."""
    out = {}
    for key, name in RETRIEVAL_SETS.items():
        cell = r["heldout"][step]["retrieval"][key]
        for k in ks:
            out[(name, "I2T", f"R@{k}")] = cell[f"TR@{k}"]
        for k in ks:
            out[(name, "T2I", f"R@{k}")] = cell[f"IR@{k}"]
    return out


def per_seed(rs: list[dict], fn, *args) -> dict:
    """{column: [value per seed]} from fn(r, *args) -> {column: value}."""
    rows = [fn(r, *args) for r in rs]
    return {k: [row[k] for row in rows] for k in rows[0]}


def mean_frame(runs: dict[str, list[dict]], fn, *args) -> pd.DataFrame:
    """Rows = experiments, columns = fn's keys, cells = mean over seeds."""
    return pd.DataFrame({exp: {k: float(np.mean(v)) for k, v in per_seed(rs, fn, *args).items()}
                         for exp, rs in runs.items()}).T


def curve(rs: list[dict], key: str = "Average") -> np.ndarray:
    """Mean over seeds of a classification column after every step (Fig. 3)."""
    return np.mean([[classification(r, i)[key] for i in range(len(r["heldout"]))] for r in rs], axis=0)


def chunk_bwt(r: dict, metric: str = "Rm", eval_set: str = "test") -> float:
    """The paper's BWT (Table 7): mean over chunks j < T of a[T][j] - a[j][j], a[i][j] = the
    score of the model after step i on chunk j's held-out items (negative = forgetting)."""
    return bwt(np.asarray(r["matrix"][eval_set][metric], float))
