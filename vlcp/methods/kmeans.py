"""Kmeans replay as the CTP paper compares it (Zhu et al., ICCV 2023, Table 1): MoF's task-end
exemplar buffer (`mof.ExemplarReplay`) with k-means selection: the task's features are clustered
into k = quota clusters (scikit-learn KMeans, k-means++, `kmeans_iters` iterations, seeded per
task) and the item nearest each centroid is kept (`vlcp.data.buffer.kmeans_exemplars`): distinct
picks, largest cluster first, so a shrinking quota keeps the biggest clusters' representatives.
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
