"""The CLIP contrastive loss, gather-aware (open_clip's design, as pure functions).

Under DDP each rank holds B local pairs; features are all-gathered *with gradients*
(`torch.distributed._functional_collectives.all_gather_single`, differentiable: its backward
reduce-scatters the gradients) and each rank scores its own rows against all columns
("local loss", labels offset by rank·B). Averaged over ranks (DDP's gradient averaging) this is
exactly the loss and gradient of one process on the global batch. At world size 1 it is the
plain symmetric InfoNCE.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F


def world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_features(x: torch.Tensor) -> torch.Tensor:
    """Concatenate `x` over ranks (rank order), keeping gradients flowing to every rank."""
    if world()[1] == 1:
        return x
    from torch.distributed import _functional_collectives as funcol   # (torch.distributed.nn's all_gather is deprecated)

    return funcol.wait_tensor(funcol.all_gather_single(x, 0, dist.group.WORLD))


def gather_pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`gather_features` of two [B, ·] tensors in one collective (concatenated along dim 1 for
    the exchange): the image and text features of a contrastive step."""
    if world()[1] == 1:
        return a, b
    both = gather_features(torch.cat([a, b.to(a.dtype)], 1))
    return both[:, :a.shape[1]], both[:, a.shape[1]:].to(b.dtype)


def gather_ids(x: torch.Tensor) -> torch.Tensor:
    _, size = world()
    if size == 1:
        return x
    out = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(out, x)
    return torch.cat(out)


def clip_loss(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor,
              extra_text: torch.Tensor | None = None, anchors: torch.Tensor | None = None,
              pair_ids: torch.Tensor | None = None, reduction: str = "mean") -> torch.Tensor:
    """Symmetric InfoNCE over the (global) batch.

    `extra_text`: optional extra text features used as negatives in the image→text direction
    only (e.g. IncCLIP's pseudo texts); they are local to each rank.
    `anchors`: optional bool mask over the local rows; only those rows are anchors (their
    losses are averaged), the others are negatives only (Co2L's asymmetric contrastive loss).
    `pair_ids`: optional long [B]; rows with equal ids are all positives of each other, with
    the target mass split evenly (CLFM's multi-positive targets: one image, several captions).
    `reduction`: "mean" (the loss) or "none": the local rows' losses [B], row i being
    (image i's image→text loss + text i's text→image loss) / 2, whose mean is the loss
    (CLL-CLIP Fig. 3's per-sample Fisher trace). Not with `anchors`.
    """
    if reduction not in ("mean", "none"):
        raise ValueError(f"clip_loss: reduction must be 'mean' or 'none', got {reduction!r}")
    if reduction == "none" and anchors is not None:
        raise ValueError("clip_loss: reduction='none' with anchors is not defined (anchors average a subset of rows)")
    rank, _ = world()
    all_img, all_txt = gather_pair(image_features, text_features)
    labels = torch.arange(image_features.shape[0], device=image_features.device) + rank * image_features.shape[0]
    txt_cols = all_txt if extra_text is None else torch.cat([all_txt, extra_text], 0)
    logits_i2t = logit_scale * image_features @ txt_cols.T
    logits_t2i = logit_scale * text_features @ all_img.T
    if pair_ids is not None:
        same = (pair_ids[:, None] == gather_ids(pair_ids)[None, :]).float()
        if extra_text is not None:
            same_i2t = torch.cat([same, same.new_zeros(len(same), len(extra_text))], 1)
        else:
            same_i2t = same
        soft = lambda s: s / s.sum(1, keepdim=True)  # noqa: E731
        return (F.cross_entropy(logits_i2t, soft(same_i2t), reduction=reduction)
                + F.cross_entropy(logits_t2i, soft(same), reduction=reduction)) / 2
    if anchors is None:
        return (F.cross_entropy(logits_i2t, labels, reduction=reduction)
                + F.cross_entropy(logits_t2i, labels, reduction=reduction)) / 2
    rows = (F.cross_entropy(logits_i2t, labels, reduction="none") + F.cross_entropy(logits_t2i, labels, reduction="none")) / 2
    return rows[anchors].sum() / anchors.sum().clamp_min(1)
