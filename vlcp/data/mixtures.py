"""FoMo-in-Flux data mixtures: every training batch mixes three sources.

- **pretraining** (P): the pretraining pool (λP),
- **update** (D): the current task's adaptation data (λD),
- **buffer** (B): all earlier tasks' adaptation data, unbounded ("unlimited replay buffer", λB).

The three sub-batches are drawn separately and concatenated into one contrastive batch.
Sub-batch sizes follow FoMo-in-Flux's code (`calculate_individual_batch_sizes` and the task-0
adjustment of its training loop); see `mixture_sizes`. Indices of different sources live in
different index spaces (pretraining pool vs adaptation data): `sample_mixture` returns a
source label with every index.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch

from vlcp.config import MIXTURE_SOURCES, validate_mixture
from vlcp.errors import ConfigError, VlcpError

SOURCES = MIXTURE_SOURCES   # the sources in λ order: pretraining, update, buffer
PRETRAINING, UPDATE, BUFFER = range(3)

# The mixtures of the paper's Fig. 16 (Sec. 7.2), as (λP, λD, λB), under the paper's names.
PAPER_MIXTURES: dict[str, tuple[float, float, float]] = {
    "reference": (0.33, 0.34, 0.33),       # the default of every other experiment
    "no-buffer": (0.5, 0.5, 0.0),
    "pretrain-heavy": (0.8, 0.1, 0.1),
    "ibrahim": (0.05, 0.48, 0.47),         # "Ibrahim et al. [77]": the ratio of LLM continual pretraining
    "iidify": (0.0, 0.1, 0.9),             # "IIDify"
}


class MixtureSizes(NamedTuple):
    """Per-source sub-batch sizes (sum = batch size)."""

    pretraining: int
    update: int
    buffer: int


def mixture_sizes(batch_size: int, lam_p: float, lam_d: float, lam_b: float, first_task: bool,
                  field: str = "data.mixture") -> MixtureSizes:
    """Sub-batch sizes of one batch, as FoMo-in-Flux computes them.

    Each source gets int(B·λ); the remainder is handed out +1 per source in key order
    (pretraining, update, buffer). On the first task the buffer is empty and its share
    b = int(B·λB) (+ remainder) moves: update += ceil(b/2) and pretraining += floor(b/2)
    when the pretraining sub-batch is non-empty, else update += b. At B=512 and
    .33/.34/.33: 169/175/168, and 253/259/0 on the first task.

    One deliberate difference from FoMo's code: the remainder skips sources with λ = 0
    (FoMo hands it out regardless, so "IIDify" (λP = 0) got 1 pretraining sample per batch
    and 230 of 512 on task 0); with every λ > 0 the sizes are identical.
    """
    validate_mixture(lam_p, lam_d, lam_b, field)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"batch_size: must be an integer >= 1, got {batch_size!r}")
    lams = (float(lam_p), float(lam_d), float(lam_b))
    sizes = [int(batch_size * lam) for lam in lams]
    live = [k for k, lam in enumerate(lams) if lam > 0]
    k = 0
    while sum(sizes) < batch_size:  # at most 2 rounds' worth (3 fractional parts < 3)
        sizes[live[k % len(live)]] += 1
        k += 1
    while sum(sizes) > batch_size:  # only possible within the 1e-6 tolerance above 1
        sizes[max(range(3), key=lambda s: (sizes[s], s))] -= 1
    p, d, b = sizes
    if first_task and b:
        if p > 0:
            d, p = d + (b + 1) // 2, p + b // 2
        else:
            d += b
        b = 0
    return MixtureSizes(p, d, b)


def buffer_pool(task_pools: Sequence[torch.Tensor], task: int) -> torch.Tensor:
    """The buffer of `task`: the union of the sample-index pools of tasks 0..task-1, in task
    order (a repeated index is kept once). Empty for task 0."""
    if isinstance(task, bool) or not isinstance(task, (int, np.integer)) or not 0 <= task <= len(task_pools):
        raise VlcpError(f"task: must be in [0, {len(task_pools)}], got {task!r}")
    if task == 0:
        return torch.empty(0, dtype=torch.long)
    ids = torch.cat([torch.as_tensor(p, dtype=torch.long).cpu().reshape(-1) for p in task_pools[:task]])
    _, first = np.unique(ids.numpy(), return_index=True)
    return ids[torch.from_numpy(np.sort(first))]


def sample_mixture(pools: Sequence[torch.Tensor], sizes: Sequence[int], generator: torch.Generator
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one mixed batch: sizes[k] indices uniformly with replacement from pools[k], for the
    sources in order (pretraining, update, buffer), from `generator`.

    Returns (indices, source): both int64 of length sum(sizes), concatenated in source order;
    source[i] is 0/1/2 = `SOURCES` position. A source with size 0 draws nothing (and does not
    advance the generator); a non-empty draw from an empty pool is an error.
    """
    if len(pools) != 3 or len(sizes) != 3:
        raise VlcpError(f"sample_mixture: need 3 pools and 3 sizes ({', '.join(SOURCES)}), "
                        f"got {len(pools)} and {len(sizes)}")
    idx, src = [], []
    for k, (name, pool, n) in enumerate(zip(SOURCES, pools, sizes)):
        n = int(n)
        if n < 0:
            raise VlcpError(f"sample_mixture: negative {name} size {n}")
        if n == 0:
            continue
        pool = torch.as_tensor(pool, dtype=torch.long).reshape(-1)
        if len(pool) == 0:
            hint = " (on the first task use mixture_sizes(..., first_task=True))" if k == BUFFER else ""
            raise VlcpError(f"sample_mixture: {n} {name} samples requested but the {name} pool is empty{hint}")
        idx.append(pool[torch.randint(0, len(pool), (n,), generator=generator)])
        src.append(torch.full((n,), k, dtype=torch.long))
    if not idx:
        return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    return torch.cat(idx), torch.cat(src)

