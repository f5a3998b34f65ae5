"""Retrieval metrics as pure functions over features (design §8).

A query and a gallery item match when their *labels* are equal. For cross-modal retrieval the
label is the pair id (an emoji item, a COCO image), so an image may have several captions and a
caption several images; for multi-modal retrieval it is the class.

- Cross-modal: TR@K (image→text), IR@K (text→image), Rm = mean of the six (K = 1, 5, 10).
- Multi-modal: mAP@N with the CTP code's `hits` normaliser or the standard `min(N, |relevant|)`.

Scores are computed in query chunks with top-k, so a 50k × 50k gallery never materialises.
"""
from __future__ import annotations

import torch

KS = (1, 5, 10)


def ranked_hits(query: torch.Tensor, gallery: torch.Tensor, q_labels: torch.Tensor,
                g_labels: torch.Tensor, k: int, chunk: int = 2048) -> torch.Tensor:
    """bool [Q, min(k, G)]: is the j-th most similar gallery item a match of the query?"""
    out = []
    for s in range(0, len(query), chunk):
        idx = (query[s:s + chunk] @ gallery.T).topk(min(k, len(gallery)), dim=1).indices
        out.append(g_labels[idx] == q_labels[s:s + chunk, None])
    return torch.cat(out) if out else torch.zeros(0, min(k, len(gallery)), dtype=torch.bool)


def recall_at_k(hits: torch.Tensor, ks=KS) -> dict[int, float]:
    """% of queries with a match in their top K, from `ranked_hits`."""
    return {k: 100.0 * hits[:, :k].any(1).float().mean().item() for k in ks}


def cross_modal(image_feats: torch.Tensor, text_feats: torch.Tensor, image_labels: torch.Tensor,
                text_labels: torch.Tensor, ks=KS, chunk: int = 2048) -> dict[str, float]:
    """TR@K, IR@K and Rm (all in %)."""
    tr = recall_at_k(ranked_hits(image_feats, text_feats, image_labels, text_labels, max(ks), chunk), ks)
    ir = recall_at_k(ranked_hits(text_feats, image_feats, text_labels, image_labels, max(ks), chunk), ks)
    out = {f"TR@{k}": tr[k] for k in ks} | {f"IR@{k}": ir[k] for k in ks}
    out["Rm"] = sum(out.values()) / len(out)
    return out


def average_precision(hits: torch.Tensor, n_relevant: torch.Tensor, n: int,
                      normalizer: str = "standard") -> torch.Tensor:
    """AP@n per query from ranked match flags `hits` (bool [Q, >= n]).

    standard: sum_{k<=n} P(k)·rel(k) / min(n, |relevant|).
    hits (the CTP code): walk only the first min(n, |relevant|) ranks and divide by the number
    of matches found there (0 without matches); P(k) = (matches before k + 1) / k at a match."""
    h = hits[:, :n].float()
    prec = h.cumsum(1) / torch.arange(1, h.shape[1] + 1)
    if normalizer == "standard":
        denom = n_relevant.clamp(max=n).float()
        return torch.where(denom > 0, (prec * h).sum(1) / denom.clamp(min=1), torch.zeros_like(denom))
    if normalizer == "hits":
        walk = (torch.arange(h.shape[1])[None, :] < n_relevant.clamp(max=n)[:, None]).float()
        found = (h * walk).sum(1)
        return torch.where(found > 0, (prec * h * walk).sum(1) / found.clamp(min=1), torch.zeros_like(found))
    raise ValueError(f"normalizer must be 'standard' or 'hits', got {normalizer!r}")


def mean_average_precision(query: torch.Tensor, gallery: torch.Tensor, q_labels: torch.Tensor,
                           g_labels: torch.Tensor, ns=KS, normalizer: str = "standard",
                           chunk: int = 2048) -> dict[int, float]:
    """mAP@N (%) with positives = gallery items with the query's label (labels >= 0)."""
    hits = ranked_hits(query, gallery, q_labels, g_labels, max(ns), chunk)
    size = int(max(q_labels.max(), g_labels.max())) + 1 if len(query) and len(gallery) else 1
    n_rel = torch.bincount(g_labels, minlength=size)[q_labels]
    return {n: 100.0 * average_precision(hits, n_rel, n, normalizer).mean().item() for n in ns}
