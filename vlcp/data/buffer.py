"""Replay buffers over sample ids (indices into the stream's training pairs).

Storing ids, not tensors, keeps the buffer cheap, checkpointable and identical on every DDP
rank (all ranks see the same global batch ids). Two buffers share one API (`len`, `add`,
`sample(n, generator)`, `state_dict`): `ReservoirBuffer` (ER: online reservoir sampling) and
`TaskQuotaBuffer` (CTP's MoF/Kmeans/iCaRL/LUCIR: per-task quotas ∝ task size, filled at task
end in priority order by a selection function: `herding` or `kmeans_exemplars`).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F


def _sample(ids: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """n ids drawn uniformly with replacement (the replay batch of every buffer)."""
    if len(ids) == 0 or n == 0:
        return torch.empty(0, dtype=torch.long)
    return ids[torch.randint(0, len(ids), (n,), generator=generator)]


class ReservoirBuffer:
    """Reservoir sampling (Vitter's algorithm R): after n offered ids, each is kept with
    probability capacity / n. Deterministic given its generator seed."""

    def __init__(self, capacity: int, seed: int = 0):
        if capacity < 0:
            raise ValueError(f"buffer capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.ids = torch.empty(0, dtype=torch.long)
        self.seen = 0
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: torch.Tensor) -> None:
        for i in ids.tolist():
            if len(self.ids) < self.capacity:
                self.ids = torch.cat([self.ids, torch.tensor([i])])
            else:
                j = int(torch.randint(0, self.seen + 1, (1,), generator=self.gen))
                if j < self.capacity:
                    self.ids[j] = i
            self.seen += 1

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        return _sample(self.ids, n, generator)

    def state_dict(self) -> dict:
        return {"ids": self.ids.clone(), "seen": self.seen, "gen": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.ids, self.seen = state["ids"].clone(), state["seen"]
        self.gen.set_state(state["gen"])


# ------------------------------------------------------------------ exemplar (task-quota) buffers

def task_quotas(sizes: Sequence[int], capacity: int) -> list[int]:
    """Per-task quotas of a class-balanced-by-task buffer (CTP's MoF/Kmeans/iCaRL/LUCIR):
    quota_i = round(|task_i| / Σ|tasks seen| · capacity), with Python's round (half to even, as
    the CTP code), capped at the task's size. Rounding can overshoot the capacity (by up to half
    the number of tasks); the excess is taken, one at a time, from the task rounded up the most
    (ties: the latest), so the quotas never sum past the capacity."""
    total = sum(sizes)
    if total == 0:
        return [0] * len(sizes)
    exact = [s / total * capacity for s in sizes]
    quotas = [min(s, round(e)) for s, e in zip(sizes, exact)]
    while sum(quotas) > capacity:
        i = max(range(len(quotas)), key=lambda j: (quotas[j] - exact[j], j))
        quotas[i] -= 1
    return quotas


def herding(features: torch.Tensor, m: int) -> torch.Tensor:
    """iCaRL's herding (Rebuffi et al. 2017, Alg. 4), as CTP's `update_memory`: the rows are
    L2-normalised, μ is their mean, and the k-th pick is the not-yet-picked row x maximising
    x·(k·μ − S), S the sum of the k−1 earlier picks, i.e. the pick that brings the running mean
    of the picks closest to μ (iCaRL's Alg. 4; the iCaRL/CTP code also let the argmax land on a
    row already picked, which then only shifted the target, so it could pick differently).
    Returns min(m, n) row indices **in priority (pick) order** (CTP returned them in dataset
    order). Deterministic; ties go to the lower index."""
    x = F.normalize(features.detach().double(), dim=1)
    n, m = len(x), max(0, min(m, len(x)))
    mu = x.mean(0)
    total = torch.zeros_like(mu)
    free = torch.ones(n, dtype=torch.bool, device=x.device)
    picks = []
    for k in range(1, m + 1):
        scores = (x @ (k * mu - total)).masked_fill(~free, float("-inf"))
        i = int(scores.argmax())
        picks.append(i)
        free[i] = False
        total += x[i]
    return torch.tensor(picks, dtype=torch.long)


def kmeans_exemplars(features: torch.Tensor, m: int, seed: int = 0, max_iter: int = 500) -> torch.Tensor:
    """k-means exemplars (CTP's `kmeans_faiss`): cluster the L2-normalised rows into k = m
    clusters (scikit-learn KMeans, k-means++ init, one run, `max_iter` iterations; CTP: faiss GPU
    k-means, random init, niter 500) and keep the row nearest each centroid. The picks are
    distinct (a centroid whose nearest row is taken gets its nearest free row) and ordered by
    cluster size, largest first (ties: centroid order), so a reduced quota keeps the exemplars of
    the biggest clusters. With m >= n every row is returned, in order."""
    from sklearn.cluster import KMeans

    n, m = len(features), max(0, min(m, len(features)))
    if m == 0 or m == n:
        return torch.arange(m)
    x = F.normalize(features.detach().double(), dim=1).cpu().numpy()
    km = KMeans(n_clusters=m, init="k-means++", n_init=1, max_iter=max_iter, random_state=seed).fit(x)
    dist = torch.cdist(torch.from_numpy(km.cluster_centers_), torch.from_numpy(x))   # [m, n]
    sizes = torch.bincount(torch.from_numpy(km.labels_).long(), minlength=m)
    order = sorted(range(m), key=lambda c: (-int(sizes[c]), c))
    free = torch.ones(n, dtype=torch.bool)
    picks = []
    for c in order:
        i = int(dist[c].masked_fill(~free, float("inf")).argmin())
        picks.append(i)
        free[i] = False
    return torch.tensor(picks, dtype=torch.long)


class TaskQuotaBuffer:
    """A class-balanced-by-task exemplar buffer: per task, ids in priority order (herding rank,
    k-means order), at most its `task_quotas` share of the capacity. `add_task` records a
    finished task and reduces every older task to its new quota by keeping its *first* ids, the
    best-ranked ones (CTP kept the first ids in dataset order). Same `__len__`/`sample`/
    `state_dict` API as `ReservoirBuffer`; `add` (the per-step offer) ignores its ids, since the
    buffer is filled at task end."""

    def __init__(self, capacity: int):
        if capacity < 0:
            raise ValueError(f"buffer capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.sizes: list[int] = []                 # training-set size of every task added
        self.per_task: list[torch.Tensor] = []     # per task: ids in priority order
        self.ids = torch.empty(0, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: torch.Tensor) -> None:
        """The replay loop's per-step offer: an exemplar buffer takes its items at task end."""

    def quotas(self, new_task_size: int | None = None) -> list[int]:
        """The quotas of the tasks added so far, plus a new task of `new_task_size` if given."""
        sizes = self.sizes + ([] if new_task_size is None else [new_task_size])
        return task_quotas(sizes, self.capacity)

    def reduce(self, quotas: Sequence[int]) -> None:
        """Keep the first (best-ranked) quotas[i] ids of each stored task."""
        self.per_task = [ids[:q] for ids, q in zip(self.per_task, quotas)]
        self._join()

    def add_task(self, ranked_ids: torch.Tensor, task_size: int) -> None:
        """Record a finished task of `task_size` training items: reduce the older tasks to their
        new quotas, then keep the first quota of `ranked_ids` (its candidates, priority order)."""
        q = self.quotas(task_size)
        self.sizes.append(int(task_size))
        self.per_task.append(torch.as_tensor(ranked_ids, dtype=torch.long).cpu()[: q[-1]].clone())
        self.reduce(q)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        return _sample(self.ids, n, generator)

    def _join(self) -> None:
        self.ids = torch.cat(self.per_task) if self.per_task else torch.empty(0, dtype=torch.long)

    def state_dict(self) -> dict:
        return {"sizes": list(self.sizes), "per_task": [ids.clone() for ids in self.per_task]}

    def load_state_dict(self, state: dict) -> None:
        self.sizes = list(state["sizes"])
        self.per_task = [ids.clone() for ids in state["per_task"]]
        self._join()
