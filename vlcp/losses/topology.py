"""CTP's losses as pure functions (anchors-ctp-clfm.md A3), gather-aware like `clip_loss`.

- `momentum_contrast`: each current feature against [the momentum model's features of the
  (global) batch ; a queue of older momentum features], one-hot target on its own momentum
  feature (MoCo-style, τ = 0.07), symmetric over the two modalities.
- `topology_kl`: KL(reference ‖ current) between the rows of a similarity matrix (local rows ×
  global columns), the reference side from the previous-task model. Same-modal matrices mask
  the self-similarity (the global diagonal) with −1000 before the softmax, on both sides.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from vlcp.losses.contrastive import gather_features, gather_pair, world


def _own_columns(rows: int, device) -> torch.Tensor:
    """Global column index of each local row (rank-major, as `gather_features` lays them out)."""
    rank, _ = world()
    return torch.arange(rows, device=device) + rank * rows


def momentum_contrast(image: torch.Tensor, text: torch.Tensor, mom_image: torch.Tensor, mom_text: torch.Tensor,
                      scale: torch.Tensor | float, image_queue: torch.Tensor | None = None,
                      text_queue: torch.Tensor | None = None) -> torch.Tensor:
    """(CE_i2t + CE_t2i) / 2 of current unit features against the momentum features of the
    global batch (+ the other modality's queue [K, D]); the target is the row's own pair."""
    cols_t, cols_i = gather_pair(mom_text.detach(), mom_image.detach())
    if text_queue is not None:
        cols_t, cols_i = torch.cat([cols_t, text_queue]), torch.cat([cols_i, image_queue])
    target = _own_columns(image.shape[0], image.device)
    return (F.cross_entropy(scale * image @ cols_t.T, target) + F.cross_entropy(scale * text @ cols_i.T, target)) / 2


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
    wrapping around); returns the new pointer."""
    feats = gather_features(feats.detach())[: len(queue)]
    idx = (ptr + torch.arange(len(feats), device=queue.device)) % len(queue)
    queue[idx] = feats.to(queue.dtype)
    return int((ptr + len(feats)) % len(queue))
