"""FoMo-in-Flux concept streams: orderings of (dataset, class) concepts, task cuts, stream files.

A *concept* is one class of one dataset. A stream is an ordered list of concepts; tasks are
contiguous chunks of it cut by concept count (`cut_tasks`), and a task's data is every training
sample of its concepts. The six orderings of the paper (Roth et al. 2024, Sec. 3.3) are pure
functions of the concepts plus side information the caller computes and passes in (losses,
counts, embeddings, years), so nothing here loads a model or a dataset:

| config name    | paper (Sec. 3.3; label in Fig. 15)              | function              | side information      |
|----------------|-------------------------------------------------|-----------------------|-----------------------|
| `easy-to-hard` | Easy-To-Hard Ordering ("performance")           | `easy_to_hard`        | base-model loss       |
| `frequency`    | Concept Frequency Ordering ("concept-frequency")| `by_frequency`        | count per concept     |
| `similarity`   | Concept Similarity Ordering ("similarity")      | `by_similarity`       | class-name embeddings |
| `time`         | Time-incremental Ordering ("time")              | `by_time`             | year per concept      |
| `dataset`      | Dataset-Incremental Ordering ("dataset")        | `dataset_incremental` | dataset order         |
| `random`       | Random Ordering ("random")                      | `random_order`        | seed                  |

`reverse` gives the paper's reversed streams (FoMo's `*_reverse_*` files are exact list
reversals). Stream files use FoMo's format: a flat JSON list of `"DATASET+++classname"` strings.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Hashable, Mapping, NamedTuple, Sequence, TypeVar

import numpy as np

from vlcp.errors import ConfigError, VlcpError
from vlcp.utils import atomic_path

SEP = "+++"
T = TypeVar("T")


class Concept(NamedTuple):
    """One class of one dataset: the unit that streams order and tasks group."""

    dataset: str
    classname: str


def format_entry(concept: Concept) -> str:
    """The stream-file string of a concept: `"DATASET+++classname"`."""
    dataset, classname = concept
    return f"{dataset}{SEP}{classname}"


def parse_entry(entry: Any) -> Concept:
    """`"DATASET+++classname"` -> Concept (split at the first `+++`, so class names may contain it).

    Raises VlcpError for anything else: a non-string, no separator, an empty dataset or class.
    """
    if not isinstance(entry, str) or SEP not in entry:
        raise VlcpError(f"{entry!r} is not a 'DATASET{SEP}classname' string")
    dataset, classname = entry.split(SEP, 1)
    if not dataset or not classname:
        raise VlcpError(f"{entry!r} has an empty {'dataset' if not dataset else 'class name'}")
    return Concept(dataset, classname)


# ----------------------------------------------------------------------------- validation helpers

def _as_concepts(concepts: Sequence[Sequence[str]]) -> list[Concept]:
    """A new list of Concepts; rejects malformed and duplicate concepts (streams are sets)."""
    out, seen = [], set()
    for c in concepts:
        if (not isinstance(c, tuple) or len(c) != 2 or not all(isinstance(p, str) and p for p in c)):
            raise VlcpError(f"concept {c!r} is not a (dataset, class name) pair of non-empty strings")
        c = Concept(*c)
        if c in seen:
            raise VlcpError(f"concept {format_entry(c)!r} appears twice; a stream lists each concept once")
        seen.add(c)
        out.append(c)
    return out


def _per_concept(concepts: list[Concept], values: Mapping[Hashable, float] | Sequence[float],
                 what: str, nonnegative: bool = False) -> list[float]:
    """Side information aligned with `concepts`: a mapping keyed by concept, or a sequence in order."""
    if isinstance(values, Mapping):
        missing = [c for c in concepts if c not in values]
        if missing:
            raise VlcpError(f"{what}: no value for concept {format_entry(missing[0])!r}")
        vals = [values[c] for c in concepts]
    else:
        vals = list(values)
        if len(vals) != len(concepts):
            raise VlcpError(f"{what}: {len(vals)} values for {len(concepts)} concepts")
    out = []
    for c, v in zip(concepts, vals):
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise VlcpError(f"{what}: value {v!r} of concept {format_entry(c)!r} is not a number") from None
        if not math.isfinite(v) or (nonnegative and v < 0):
            raise VlcpError(f"{what}: value {v!r} of concept {format_entry(c)!r} must be "
                            f"{'a finite number >= 0' if nonnegative else 'finite'}")
        out.append(v)
    return out


# ----------------------------------------------------------------------------- orderings

def easy_to_hard(concepts: Sequence[Concept], difficulty: Mapping[Hashable, float] | Sequence[float]
                 ) -> list[Concept]:
    """Easy-To-Hard ordering (the paper's "performance" stream): ascending difficulty.

    `difficulty` is the base model's mean contrastive loss per concept (the paper: 50 of the
    concept's pairs + 50 pretraining-pool pairs through CLIP ViT-L/14, loss averaged per
    concept; lower = easier), as a mapping keyed by concept or a sequence aligned with
    `concepts`. Ties keep the input order (stable sort).
    """
    cs = _as_concepts(concepts)
    d = _per_concept(cs, difficulty, "difficulty")
    return [cs[i] for i in sorted(range(len(cs)), key=d.__getitem__)]


def by_frequency(concepts: Sequence[Concept], frequency: Mapping[Hashable, float] | Sequence[float]
                 ) -> list[Concept]:
    """Concept Frequency ordering ("concept-frequency"): least frequent concept first.

    `frequency` is a count (>= 0) per concept, as a mapping keyed by concept or a sequence
    aligned with `concepts`; ties keep the input order. The paper counted each class name's
    occurrences in C4 through the WIMBD search index; vlcp's frequency source is the count of
    the class name's words in the pretraining pool's captions (the pool the model was trained
    on, which is what "rare in pretraining" means here).
    """
    cs = _as_concepts(concepts)
    f = _per_concept(cs, frequency, "frequency", nonnegative=True)
    return [cs[i] for i in sorted(range(len(cs)), key=f.__getitem__)]


# Cosine similarities are quantised to multiples of 2**-30 before the greedy search, so that
# equal similarities are exactly equal (ties are then broken by concept index, and path
# totals are exact integer sums that do not depend on summation order).
_SIM_SCALE = 2 ** 30
_VISITED = np.iinfo(np.int32).min  # below every quantised similarity (|q| <= 2**30)


def by_similarity(concepts: Sequence[Concept], embeddings: Any, start: int | Concept | None = None
                  ) -> list[Concept]:
    """Concept Similarity ordering ("similarity"): a greedy nearest-neighbour path.

    `embeddings` is an (n, d) array or tensor aligned with `concepts` (the paper: CLIP
    ViT-L/14 text embeddings of templated class names); rows are L2-normalised and the
    distance between concepts is 1 - cosine similarity. From the start concept, each step
    goes to the most similar unvisited concept (ties: the lowest index in `concepts`).
    `start` is an index or a concept; with `start=None` every concept is tried as the start
    and the path with the smallest total distance is kept ("best start", as the paper does;
    ties: the lowest start index). The best-start search costs O(n^3) time (n greedy paths
    of n steps, run batched); pass `start` for very long streams.
    """
    cs = _as_concepts(concepts)
    n = len(cs)
    if hasattr(embeddings, "detach"):  # torch tensor
        embeddings = embeddings.detach().cpu().numpy()
    e = np.asarray(embeddings, dtype=np.float64)
    if e.ndim != 2 or e.shape[0] != n:
        raise VlcpError(f"embeddings: need shape ({n}, d) for {n} concepts, got {tuple(e.shape)}")
    if n == 0:
        return []
    norms = np.linalg.norm(e, axis=1, keepdims=True)
    if not np.isfinite(e).all() or (norms == 0).any():
        raise VlcpError("embeddings: every row must be finite and non-zero")
    e = e / norms
    sim = e @ e.T
    q = np.rint((sim + sim.T) / 2 * _SIM_SCALE).astype(np.int32)
    if start is None:
        starts = np.arange(n)
    else:
        if isinstance(start, tuple):
            if Concept(*start) not in cs:
                raise VlcpError(f"start: concept {format_entry(start)!r} is not in the stream")
            start = cs.index(Concept(*start))
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or not 0 <= start < n:
            raise VlcpError(f"start: must be a concept or an index in [0, {n}), got {start!r}")
        starts = np.array([int(start)])
    best_path, best_total = None, None
    chunk = max(1, (1 << 22) // n)  # bound the (starts x concepts) work arrays to ~16 MB each
    for lo in range(0, len(starts), chunk):
        paths, totals = _greedy_paths(q, starts[lo:lo + chunk])
        i = int(np.argmax(totals))  # first maximum = lowest start index
        if best_total is None or totals[i] > best_total:
            best_path, best_total = paths[i], int(totals[i])
    return [cs[i] for i in best_path.tolist()]


def _greedy_paths(q: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy most-similar-next paths from each start, batched; (paths, summed similarity)."""
    n, k = q.shape[0], len(starts)
    rows = np.arange(k)
    paths = np.empty((k, n), dtype=np.int64)
    paths[:, 0] = starts
    cap = np.full((k, n), np.iinfo(np.int32).max, dtype=np.int32)  # visited -> _VISITED
    cap[rows, starts] = _VISITED
    totals = np.zeros(k, dtype=np.int64)
    sims = np.empty((k, n), dtype=np.int32)
    cur = starts
    for step in range(1, n):
        np.take(q, cur, axis=0, out=sims)
        np.minimum(sims, cap, out=sims)
        nxt = sims.argmax(axis=1)  # first maximum = lowest index
        totals += sims[rows, nxt]
        cap[rows, nxt] = _VISITED
        paths[:, step] = nxt
        cur = nxt
    return paths, totals


def by_time(concepts: Sequence[Concept], year: Mapping[Hashable, float] | Sequence[float],
            seed: int | None = None) -> list[Concept]:
    """Time-incremental ordering ("time"): ascending year, oldest first.

    `year` is a year per concept (a mapping keyed by concept or a sequence aligned with
    `concepts`), e.g. the emoji version that introduced it, or a dataset's release year
    (the paper only had dataset-level dates). Within a year the input order is kept, or,
    with `seed`, shuffled by a seeded generator (the paper orders concepts randomly within
    a year). For FoMo's `dschunked` variant (datasets kept contiguous, ordered by date) use
    `dataset_incremental` with the datasets sorted by date.
    """
    cs = _as_concepts(concepts)
    y = _per_concept(cs, year, "year")
    order = sorted(range(len(cs)), key=y.__getitem__)
    if seed is not None:
        rng = np.random.default_rng(seed)
        out, i = [], 0
        while i < len(order):
            j = i
            while j < len(order) and y[order[j]] == y[order[i]]:
                j += 1
            out.extend(order[i + p] for p in rng.permutation(j - i).tolist())
            i = j
        order = out
    return [cs[i] for i in order]


def dataset_incremental(concepts: Sequence[Concept], dataset_order: Sequence[str]) -> list[Concept]:
    """Dataset-incremental ordering ("dataset"): each dataset's concepts contiguous, datasets in
    `dataset_order` (the paper samples it at random), class order within a dataset kept.

    Every concept's dataset must be listed, once, and every listed dataset must have concepts.
    """
    cs = _as_concepts(concepts)
    order = list(dataset_order)
    if len(set(order)) != len(order):
        dup = next(d for d in order if order.count(d) > 1)
        raise VlcpError(f"dataset_order: dataset {dup!r} is listed twice")
    rank = {d: i for i, d in enumerate(order)}
    unlisted = [c for c in cs if c.dataset not in rank]
    if unlisted:
        raise VlcpError(f"dataset_order: dataset {unlisted[0].dataset!r} (of concept "
                        f"{format_entry(unlisted[0])!r}) is not listed")
    empty = set(order) - {c.dataset for c in cs}
    if empty:
        raise VlcpError(f"dataset_order: dataset {next(d for d in order if d in empty)!r} has no concepts")
    return sorted(cs, key=lambda c: rank[c.dataset])  # stable: class order within a dataset kept


def random_order(concepts: Sequence[Concept], seed: int) -> list[Concept]:
    """Random ordering ("random"): a seeded permutation of the concepts."""
    cs = _as_concepts(concepts)
    return [cs[i] for i in np.random.default_rng(seed).permutation(len(cs)).tolist()]


def reverse(order: Sequence[T]) -> list[T]:
    """The reversed stream (the paper's reversed orderings; FoMo's `_reverse_` files)."""
    return list(order)[::-1]


ORDERINGS: dict[str, Callable[..., list[Concept]]] = {
    "easy-to-hard": easy_to_hard,
    "frequency": by_frequency,
    "similarity": by_similarity,
    "time": by_time,
    "dataset": dataset_incremental,
    "random": random_order,
}


# ----------------------------------------------------------------------------- tasks

def cut_tasks(order: Sequence[T], num_tasks: int) -> list[list[T]]:
    """Cut a stream into `num_tasks` contiguous tasks by concept count, as FoMo-in-Flux does:
    every task gets len // T concepts and the first len % T tasks one more
    (18,381 concepts into 20 tasks: one of 920, then 19 of 919)."""
    n = len(order)
    if isinstance(num_tasks, bool) or not isinstance(num_tasks, (int, np.integer)) or not 1 <= num_tasks <= n:
        raise ConfigError(f"num_tasks: must be an integer in [1, {n}] for a stream of {n} concepts, "
                          f"got {num_tasks!r}")
    base, extra = divmod(n, int(num_tasks))
    tasks, lo = [], 0
    for t in range(int(num_tasks)):
        hi = lo + base + (t < extra)
        tasks.append(list(order[lo:hi]))
        lo = hi
    return tasks


# ----------------------------------------------------------------------------- stream files

def read_stream(path: str | os.PathLike) -> list[Concept]:
    """Read a FoMo-in-Flux stream file: a flat JSON list of `"DATASET+++classname"` strings.

    Errors (VlcpError) name the file and, for a bad entry, its position and text: a missing
    or non-JSON file, a non-list, a malformed entry, a duplicate entry.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise VlcpError(f"{path}: no such stream file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise VlcpError(f"{path}: not a readable JSON stream file ({e})") from None
    if not isinstance(data, list):
        raise VlcpError(f"{path}: a stream file is a JSON list of 'DATASET{SEP}classname' strings, "
                        f"got a JSON {type(data).__name__}")
    out, first = [], {}
    for i, entry in enumerate(data):
        try:
            c = parse_entry(entry)
        except VlcpError as e:
            raise VlcpError(f"{path}: entry {i}: {e}") from None
        if c in first:
            raise VlcpError(f"{path}: entry {i} {entry!r} duplicates entry {first[c]}")
        first[c] = i
        out.append(c)
    return out


def write_stream(path: str | os.PathLike, order: Sequence[Concept]) -> None:
    """Write a stream file in FoMo-in-Flux's format, atomically (nothing is written on error).

    Rejects duplicates and concepts that would not read back as themselves (empty parts, a
    dataset containing `+++`); `read_stream(path) == order` afterwards, exactly.
    """
    path = Path(path)
    entries, first = [], {}
    for i, c in enumerate(order):
        if (not isinstance(c, tuple) or len(c) != 2 or not all(isinstance(p, str) and p for p in c)
                or SEP in c[0]):
            raise VlcpError(f"{path}: entry {i} {c!r} is not a (dataset, class name) pair of non-empty "
                            f"strings with no {SEP!r} in the dataset")
        c = Concept(*c)
        if c in first:
            raise VlcpError(f"{path}: entry {i} {format_entry(c)!r} duplicates entry {first[c]}")
        first[c] = i
        entries.append(format_entry(c))
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(entries, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
