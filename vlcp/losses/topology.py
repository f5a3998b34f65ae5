"""CTP's losses as pure functions, gather-aware like `clip_loss`.

- `momentum_contrast`: each current feature against [the momentum model's features of the
  (global) batch ; a queue of older momentum features], one-hot target on its own momentum
  feature (MoCo-style, τ = 0.07), symmetric over the two modalities. Given each row's and each
  queue entry's item, the entries of a row's own item are left out of its negatives
  (`queue_own_item`).
- `topology_kl`: KL(reference ‖ current) between the rows of a similarity matrix (local rows ×
  global columns), the reference side from the previous-task model. Same-modal matrices mask
  the self-similarity (the global diagonal) with −1000 before the softmax, on both sides.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from vlcp.losses.contrastive import gather_features, gather_ids, gather_pair, world


def _own_columns(rows: int, device) -> torch.Tensor:
    """Global column index of each local row (rank-major, as `gather_features` lays them out)."""
    rank, _ = world()
    return torch.arange(rows, device=device) + rank * rows


def queue_own_item(item_ids: torch.Tensor, queue_ids: torch.Tensor, batch_columns: int) -> torch.Tensor:
    """bool [B, batch_columns + K]: True at the queue columns whose entry is of the row's own item
    (`item_ids` [B], this rank's rows; `queue_ids` [K], −1 for an entry of no item, which never
    matches). The batch columns are never marked: the row's own pair is its target there."""
    if queue_ids.dim() != 1 or item_ids.dim() != 1:
        raise ValueError(f"queue_own_item: item ids must be 1-D, got {tuple(item_ids.shape)} and {tuple(queue_ids.shape)}")
    own = item_ids.to(queue_ids.device)[:, None] == queue_ids[None, :]
    return torch.cat([own.new_zeros(len(item_ids), batch_columns), own], 1)


def momentum_contrast(image: torch.Tensor, text: torch.Tensor, mom_image: torch.Tensor, mom_text: torch.Tensor,
                      scale: torch.Tensor | float, image_queue: torch.Tensor | None = None,
                      text_queue: torch.Tensor | None = None, item_ids: torch.Tensor | None = None,
                      queue_ids: torch.Tensor | None = None) -> torch.Tensor:
    """(CE_i2t + CE_t2i) / 2 of current unit features against the momentum features of the
    global batch (+ the other modality's queue [K, D]); the target is the row's own pair.
    `item_ids` [B] and `queue_ids` [K] (both or neither): queue entries of a row's own item are
    no negatives of that row (their logits −inf; `queue_own_item`)."""
    cols_t, cols_i = gather_pair(mom_text.detach(), mom_image.detach())
    batch_columns = len(cols_t)
    if text_queue is not None:
        cols_t, cols_i = torch.cat([cols_t, text_queue]), torch.cat([cols_i, image_queue])
    target = _own_columns(image.shape[0], image.device)
    logits_i2t, logits_t2i = scale * image @ cols_t.T, scale * text @ cols_i.T
    if (item_ids is None) != (queue_ids is None):
        raise ValueError("momentum_contrast: item_ids and queue_ids go together")
    if item_ids is not None and text_queue is not None:
        if len(queue_ids) != len(text_queue):
            raise ValueError(f"momentum_contrast: {len(queue_ids)} queue ids for a queue of {len(text_queue)}")
        own = queue_own_item(item_ids, queue_ids, batch_columns).to(logits_i2t.device)
        logits_i2t, logits_t2i = logits_i2t.masked_fill(own, float("-inf")), logits_t2i.masked_fill(own, float("-inf"))
    return (F.cross_entropy(logits_i2t, target) + F.cross_entropy(logits_t2i, target)) / 2


def topology_kl(a: torch.Tensor, b: torch.Tensor, ref_a: torch.Tensor, ref_b: torch.Tensor,
                scale: torch.Tensor | float, mask_self: bool = False) -> torch.Tensor:
    """KL(softmax(scale·ref_a·ref_bᵀ) ‖ softmax(scale·a·bᵀ)), batch mean over local rows; the
    columns (b, ref_b) are gathered over ranks (b with gradients). `mask_self`: a and b are the
    same modality and each row's own column is set to −1000 (CTP's same-modal topology)."""
    sim = scale * a @ gather_features(b).T
    with torch.no_grad():
        ref = scale * ref_a @ gather_features(ref_b).T
    if mask_self:
        idx = _own_columns(a.shape[0], a.device)[:, None]
        sim = sim.scatter(1, idx, -1000.0)
        ref = ref.scatter(1, idx, -1000.0)
    return F.kl_div(F.log_softmax(sim, 1), F.log_softmax(ref, 1), reduction="batchmean", log_target=True)


def update_queue(queue: torch.Tensor, ptr: int, feats: torch.Tensor) -> int:
    """Write the (gathered) `feats` into the ring buffer `queue` [K, D] at `ptr` (in place,
    wrapping around); returns the new pointer. Integer `feats` (item ids into a [K] queue of
    ids) are gathered without autograd."""
    feats = feats.detach()
    feats = (gather_features(feats) if feats.is_floating_point() else gather_ids(feats))[: len(queue)]
    idx = (ptr + torch.arange(len(feats), device=queue.device)) % len(queue)
    queue[idx] = feats.to(device=queue.device, dtype=queue.dtype)
    return int((ptr + len(feats)) % len(queue))
