"""Compute accounting: steps per task, FLOPs per step, peak memory."""
from __future__ import annotations

import resource

import torch


def allocate_steps(total: int, sizes: list[int], mode: str = "size") -> list[int]:
    """Split `total` steps over tasks, ∝ task size ("size") or evenly ("equal"), largest
    remainder first; every task gets at least one step."""
    weights = [float(s) for s in sizes] if mode == "size" else [1.0] * len(sizes)
    norm = sum(weights) or 1.0
    raw = [total * w / norm for w in weights]
    steps = [max(1, int(r)) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - int(raw[i]), reverse=True)
    for i in order[: max(0, total - sum(steps))]:
        steps[i] += 1
    return steps


def flops_per_step(step_fn) -> int:
    """FLOPs of one call of `step_fn` (forward + backward), counted by torch's flop counter."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step_fn()
    return int(counter.get_total_flops())


def peak_memory_mb(device: torch.device) -> float:
    """Peak GPU memory since the last reset, or the process's peak RSS on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
