"""Kmeans replay, as the CTP paper compares it (Zhu et al., ICCV 2023, Table 1; CTP's
train_Kmeans.py): MoF's task-end exemplar buffer (`mof.ExemplarReplay`: per-task quotas ∝ task
size, normalised multi-modal features of the task's items, ER's compute-matched replay) with
k-means selection: the task's features are clustered into k = quota clusters and the item
nearest each centroid is kept (`vlcp.data.buffer.kmeans_exemplars`).

Paper constants: 10,000-pair buffer (≈1% of P9D), k-means with 500 iterations
(`kmeans_iters`); our default `buffer_size` is 200.

What differs from the CTP code, and why:
- scikit-learn KMeans (k-means++ init, one run, seeded per task from the method seed) on the
  CPU instead of faiss GPU k-means (random init): no faiss dependency, deterministic.
- The picks are distinct (faiss's nearest-row search could return one item for two centroids)
  and ordered by cluster size, largest first, so when a later task shrinks this task's quota
  the buffer keeps the representatives of the biggest clusters (CTP kept the first ids in
  dataset order).
- Everything else as MoF (see `mof.py`: replay fraction instead of dataset concatenation, quotas
  capped at the capacity, un-augmented features when the loop provides them).
"""
from __future__ import annotations

from dataclasses import dataclass

from vlcp.fields import ranged
from vlcp.data.buffer import kmeans_exemplars
from vlcp.methods import register
from vlcp.methods.mof import ExemplarReplay
from vlcp.utils import derive_seed


@register
class Kmeans(ExemplarReplay):
    name = "kmeans"

    @dataclass
    class Config(ExemplarReplay.Config):
        kmeans_iters: int = ranged(500, ge=1)   # CTP: faiss niter 500

    def select(self, features, m, ctx):
        seed = derive_seed(self.seed, "kmeans", ctx.task) % 2**32
        return kmeans_exemplars(features, m, seed=seed, max_iter=self.cfg.kmeans_iters)
