"""MoF (mean-of-feature) replay as the CTP paper compares it (Zhu et al., ICCV 2023, Table 1;
iCaRL's herding, Rebuffi et al. 2017), and `ExemplarReplay`, the task-end exemplar logic it
shares with Kmeans, LUCIR and iCaRL.

At the end of every task its training items are embedded by the model just trained (normalised
multi-modal features, `vlcp.models.multimodal_features`; un-augmented via
`ctx.materialize_plain` when the loop provides it, in batches of `feature_batch_size`), a
selection function ranks them (MoF: herding towards the task's mean feature,
`vlcp.data.buffer.herding`) and a `TaskQuotaBuffer` keeps each task's best-ranked
quota_i = round(|task_i| / Σ|tasks| · buffer_size), never past the capacity. ER's compute-matched
replay then draws `replay_fraction` of every batch from the buffer. Under DDP every rank selects
on all-gathered features, so all hold the same buffer.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vlcp.fields import ranged
from vlcp.data.buffer import TaskQuotaBuffer, herding
from vlcp.losses import gather_features
from vlcp.methods import register
from vlcp.methods.er import ER
from vlcp.models import multimodal_features

def plain_materializer(ctx):
    """ids -> Batch without augmentation: the runner's `ctx.materialize_plain` when it
    provides one, else the training materializer."""
    return ctx.materialize_plain or ctx.materialize


@torch.no_grad()
def task_features(model: torch.nn.Module, ids: torch.Tensor, ctx, batch_size: int) -> torch.Tensor:
    """Normalised multi-modal features [len(ids), D] (float, CPU) of training items, in eval
    mode and no_grad batches. Under DDP the materializer returns this rank's slice of each
    batch; the slices are all-gathered (batches are padded to a multiple of the world size)."""
    materialize = plain_materializer(ctx)
    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    was_training = model.training
    model.eval()
    feats = []
    try:
        for chunk in ids.split(batch_size):
            pad = -len(chunk) % world
            padded = torch.cat([chunk, chunk[-1:].expand(pad)]) if pad else chunk
            b = materialize(padded)
            f = multimodal_features(model, b.images, b.tokens).float()
            if len(b.images) < len(padded):
                f = gather_features(f)
            feats.append(f[: len(chunk)].cpu())
    finally:
        model.train(was_training)
    return torch.cat(feats) if feats else torch.empty(0)


class ExemplarReplay(ER):
    """ER's compute-matched replay over a `TaskQuotaBuffer` filled at each task's end by
    `select` (not a method itself: MoF, Kmeans and LUCIR differ only in `select`/`loss`)."""

    @dataclass
    class Config(ER.Config):
        feature_batch_size: int = ranged(256, ge=1)   # items per no_grad batch of the task-end feature pass

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.buffer = TaskQuotaBuffer(self.cfg.buffer_size)

    def select(self, features: torch.Tensor, m: int, ctx) -> torch.Tensor:
        """Row indices of `features` (the task's items), at most m, in priority order."""
        raise NotImplementedError

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        ids = ctx.task_ids[ctx.task]
        quota = self.buffer.quotas(len(ids))[-1]
        if quota:
            ranked = ids[self.select(task_features(model, ids, ctx, self.cfg.feature_batch_size), quota, ctx)]
        else:
            ranked = ids[:0]
        self.buffer.add_task(ranked, len(ids))


@register
class MoF(ExemplarReplay):
    name = "mof"

    def select(self, features, m, ctx):
        return herding(features, m)
