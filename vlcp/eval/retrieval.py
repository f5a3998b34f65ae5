"""Retrieval metrics as pure functions over features.

A query and a gallery item match when their *labels* are equal: the pair id for cross-modal
retrieval (an image may have several captions, a caption several images), the class for
multi-modal retrieval.

- Cross-modal: TR@K (image→text), IR@K (text→image), Rm = mean of the six (K = 1, 5, 10).
- Multi-modal: mAP@N with the CTP code's `hits` normaliser or the standard `min(N, |relevant|)`.

Scores are computed in query chunks with top-k, so a large gallery never materialises; a small
gallery ranks each query's best match instead (`match_ranks`). Ties never reward a query: a
non-match that scores as high as a match ranks before it (both paths agree), and a non-finite
score ranks below every finite one, so a collapsed encoder scores chance or worse, never 100.
"""
from __future__ import annotations

import torch

KS = (1, 5, 10)


def _scores(query: torch.Tensor, gallery: torch.Tensor) -> torch.Tensor:
    """query x gallery similarities with every non-finite score (NaN, ±inf) set to -inf: such a
    score ranks below all finite ones and ties with the other non-finite ones. In fp32 under
    evaluation's autocast (bf16 scores would tie and reorder near matches)."""
    with torch.autocast(query.device.type, enabled=False):
        sim = query @ gallery.T
    return sim.masked_fill(~torch.isfinite(sim), float("-inf"))


def _pessimistic_order(sim: torch.Tensor, match: torch.Tensor, k: int) -> torch.Tensor:
    """Indices [Q, k] of the k best-scoring items per row, ties broken against the query
    (non-matches before matches among equal scores): a stable sort by score after putting the
    non-matches first."""
    first = torch.argsort(match.to(torch.uint8), dim=1, stable=True)   # non-matches, then matches
    order = torch.sort(sim.gather(1, first), dim=1, descending=True, stable=True).indices
    return first.gather(1, order[:, :k])


def ranked_hits(query: torch.Tensor, gallery: torch.Tensor, q_labels: torch.Tensor,
                g_labels: torch.Tensor, k: int, chunk: int = 2048) -> torch.Tensor:
    """bool [Q, min(k, G)]: is the j-th most similar gallery item a match of the query? Ties are
    ordered against the query (non-matches first): top-k's order is kept for the rows whose k
    best scores are all distinct and whose last is a non-match (no tie can change their flags),
    the others are re-ranked exactly by `_pessimistic_order`."""
    k = min(k, len(gallery))
    out = []
    for s in range(0, len(query), chunk):
        sim = _scores(query[s:s + chunk], gallery)
        val, idx = sim.topk(k, dim=1)
        hits = g_labels[idx] == q_labels[s:s + chunk, None]
        if k:
            tied = (val[:, 1:] == val[:, :-1]).any(1) | hits[:, -1]   # rows whose flags a tie could change
            if tied.any():
                rows = tied.nonzero().squeeze(1)
                match = g_labels[None, :] == q_labels[s:s + chunk][rows, None]
                hits[rows] = match.gather(1, _pessimistic_order(sim[rows], match, k))
        out.append(hits)
    return torch.cat(out) if out else torch.zeros(0, k, dtype=torch.bool)


def recall_at_k(hits: torch.Tensor, ks=KS) -> dict[int, float]:
    """% of queries with a match in their top K, from `ranked_hits`."""
    return {k: 100.0 * hits[:, :k].any(1).float().mean().item() for k in ks}


NO_MATCH = torch.iinfo(torch.long).max
RANK_GALLERY = 640   # galleries up to this size: recall from `match_ranks` (1 core, queries x gallery:
#                      [564, 282] and [282, 564] 1.0 vs 1.9 ms with top-k; [700, 700] 3.1 vs 3.1; [1000, 1000] 6.9 vs 5.7)


def match_ranks(query: torch.Tensor, gallery: torch.Tensor, q_labels: torch.Tensor,
                g_labels: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """long [Q]: the rank (0 = first) of each query's best-scoring match: how many non-matching
    gallery items score at least as high (a tie counts against the query, as in `ranked_hits`;
    non-finite scores rank last); `NO_MATCH` for a query without a match. A query has a match in
    its top K when its rank is < K. Per chunk: the scores, the match mask and one masked copy
    (for small galleries: `cross_modal` uses it up to `RANK_GALLERY` items)."""
    out = [torch.full((len(query),), NO_MATCH)] if len(gallery) == 0 else []
    for s in range(0, len(query) if len(gallery) else 0, chunk):
        sim = _scores(query[s:s + chunk], gallery)
        match = g_labels[None, :] == q_labels[s:s + chunk, None]
        best = sim.masked_fill(~match, float("-inf")).amax(1, keepdim=True)
        out.append(torch.where(match.any(1), ((sim >= best) & ~match).sum(1), NO_MATCH))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


def recall_from_ranks(ranks: torch.Tensor, ks=KS) -> dict[int, float]:
    """% of queries whose best match ranks in their top K, from `match_ranks`."""
    return {k: 100.0 * (ranks < k).float().mean().item() for k in ks}


def cross_modal(image_feats: torch.Tensor, text_feats: torch.Tensor, image_labels: torch.Tensor,
                text_labels: torch.Tensor, ks=KS, chunk: int = 2048) -> dict[str, float]:
    """TR@K, IR@K and Rm (all in %). `chunk`: the queries scored at once."""
    def recall(query, gallery, q_labels, g_labels):
        if len(gallery) <= RANK_GALLERY:
            return recall_from_ranks(match_ranks(query, gallery, q_labels, g_labels, chunk), ks)
        return recall_at_k(ranked_hits(query, gallery, q_labels, g_labels, max(ks), chunk), ks)
    tr = recall(image_feats, text_feats, image_labels, text_labels)
    ir = recall(text_feats, image_feats, text_labels, image_labels)
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
