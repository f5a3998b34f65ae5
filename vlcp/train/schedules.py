"""Learning-rate schedules as pure functions of the step (open_clip / nanoGPT shape)."""
from __future__ import annotations

import math


def cosine_with_warmup(step: int, total: int, base_lr: float, warmup: int = 0, min_lr: float = 0.0) -> float:
    """Linear warmup from base_lr/warmup to base_lr over `warmup` steps, then cosine to `min_lr`
    at step `total` (and `min_lr` after it). Steps are 0-based within one task."""
    if warmup > 0 and step < warmup:
        return base_lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * progress))
