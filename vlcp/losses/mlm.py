"""Masked language modelling as pure functions (ALBEF / CTP): BERT's masking rule and the MLM
loss and its distillation, scored on the masked positions only (averaged over every rank's
masked positions under DDP, so N processes train like one on the global batch)."""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from vlcp.losses.contrastive import world


def global_mean(rows: torch.Tensor) -> torch.Tensor:
    """The mean of per-row losses over every rank's rows, as this rank's share: local sum ×
    world / global count. DDP averages gradients over ranks, so this gives exactly the
    gradient of the global-batch mean even when ranks hold different numbers of rows (masked
    positions differ per rank). The plain mean at world size 1."""
    _, size = world()
    if size == 1:
        return rows.mean() if rows.numel() else rows.sum() * 0.0
    n = torch.tensor(float(rows.numel()), device=rows.device)
    dist.all_reduce(n)
    return rows.sum() * size / n.clamp_min(1)


def mask_tokens(tokens: torch.Tensor, generator: torch.Generator, vocab_size: int, mask_id: int,
                special_ids: tuple[int, ...], prob: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking, as the CTP code does it: each token that is not special (PAD, CLS; SEP is
    *not* excluded in the CTP code — pass the ids to exclude) is picked with probability `prob`;
    of the picked, 80% become `mask_id`, 10% a random id in [0, vocab_size), 10% stay.
    Returns (masked input, labels: the original id at picked positions, -100 elsewhere).
    Draws on CPU from `generator`, so the result does not depend on the device."""
    t = tokens.cpu()
    picked = torch.rand(t.shape, generator=generator) < prob
    for s in special_ids:
        picked &= t != s
    labels = torch.where(picked, t, torch.full_like(t, -100))
    r = torch.rand(t.shape, generator=generator)
    rand_ids = torch.randint(0, vocab_size, t.shape, generator=generator)
    masked = torch.where(picked & (r < 0.8), torch.full_like(t, mask_id), t)
    masked = torch.where(picked & (r >= 0.8) & (r < 0.9), rand_ids, masked)
    return masked.to(tokens.device), labels.to(tokens.device)


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of `logits` [M, V] (the M masked positions, row-major) against `labels`
    [B, L] (-100 where not masked). Zero (with a graph) when nothing is masked."""
    target = labels[labels != -100]
    return global_mean(F.cross_entropy(logits.float(), target, reduction="none"))


def soft_distill(logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Soft cross-entropy −Σ softmax(teacher/T)·log_softmax(student/T), mean over rows (CTP's
    and ALBEF's MLM distillation, T = 1). Zero when there are no rows."""
    p = F.softmax(teacher_logits.float() / temperature, dim=-1)
    return global_mean(-(p * F.log_softmax(logits.float() / temperature, dim=-1)).sum(-1))
