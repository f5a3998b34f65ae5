"""Compute accounting: steps per task, FLOPs per step, peak memory, time per loop phase."""
from __future__ import annotations

import resource
import weakref
from collections import defaultdict

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


PHASE_LABEL = "vlcp/"                     # prefix of the loop's profiler labels (`vlcp.train.loop.PhaseClock`)
PYTHON = "(Python, outside torch ops)"   # a phase's own time: interpreter work between its ops


def _self_times(event, into: dict[str, float]) -> None:
    """Self CPU microseconds of `event` and its descendants, summed by op name."""
    into[event.name] += event.self_cpu_time_total
    for child in event.cpu_children:
        _self_times(child, into)


def phase_profile(events, steps: int, top: int = 5) -> dict:
    """Where a run's time went, from torch.profiler's events of a run of `steps` optimiser steps:
    {"ms_per_step": {phase: CPU ms per step, children included}, "top_ops": {phase: [[op, ms per
    step], ...] (the `top` largest self times among its descendants; the label's own self time, the
    Python between ops, is `PYTHON`)}}. Phases are the loop's labels (`vlcp.train.loop.PHASES`
    and `TASK_PHASES`); per-task phases are spread over the steps, as the runs' step times are."""
    total: dict[str, float] = defaultdict(float)
    ops: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for e in events:
        if not e.name.startswith(PHASE_LABEL):
            continue
        name = e.name[len(PHASE_LABEL):]
        total[name] += e.cpu_time_total
        ops[name][PYTHON] += e.self_cpu_time_total
        for child in e.cpu_children:
            _self_times(child, ops[name])
    return {"ms_per_step": {p: round(us / 1e3 / steps, 4) for p, us in total.items()},
            "top_ops": {p: [[op, round(us / 1e3 / steps, 4)] for op, us in sorted(o.items(), key=lambda kv: -kv[1])[:top]]
                        for p, o in ops.items()}}


def peak_memory_mb(device: torch.device) -> float:
    """Peak GPU memory since the last reset; on CPU the process's peak resident set since the
    last reset (Linux: VmHWM, which `reset_peak_memory` resets), else since the process started."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak: CUDA's peak statistics, or on Linux the process's VmHWM (writing 5 to
    /proc/self/clear_refs), so each task of a study process that runs many experiments gets its own
    peak rather than the largest of every earlier run."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


# --------------------------------------------------------------------------- MAFs (FoMo-in-Flux)

def _storage(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


def _tensor_bytes(tensors) -> int:
    seen = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            ptr, n = _storage(t)
            seen[ptr] = n
    return sum(seen.values())


class _Saved:
    """A tensor autograd saved for backward, held by the graph that saved it: when that graph is
    freed (after backward, or early when a forward's result is dropped) this holder dies."""
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor):
        self.tensor = tensor


class _LiveSaves:
    """Saved-for-backward storages alive at each moment, and the peak of their bytes. Each save
    holds its tensor until its graph frees it, so no storage alive here can be reused by a later
    one; a storage saved twice counts once."""

    def __init__(self, exclude: set[int]):
        self.exclude, self.live, self.bytes, self.peak = exclude, {}, 0, 0

    def pack(self, t):
        if not isinstance(t, torch.Tensor):
            return t
        ptr, n = _storage(t)
        if ptr in self.exclude:
            return t
        entry = self.live.setdefault(ptr, [n, 0])
        if entry[1] == 0:
            self.bytes += n
            self.peak = max(self.peak, self.bytes)
        entry[1] += 1
        held = _Saved(t)
        weakref.finalize(held, self._release, ptr)
        return held

    @staticmethod
    def unpack(held):
        return held.tensor if isinstance(held, _Saved) else held

    def _release(self, ptr):
        entry = self.live[ptr]
        entry[1] -= 1
        if entry[1] == 0:
            self.bytes -= entry[0]
            del self.live[ptr]


def training_memory_bytes(model: torch.nn.Module, step_fn, optimizer: torch.optim.Optimizer | None = None,
                          extra_state=()) -> dict[str, int]:
    """Memory of one training step by tensor accounting (device independent, deterministic):
    parameters, gradients of trainable parameters, optimizer state, the activations autograd
    saves for backward during `step_fn()` (the peak over the step of the distinct non-parameter
    storages saved by graphs still alive: a save whose graph is dropped mid-forward, as peft's
    DoRA does with the identity it pushes through lora_A and lora_B, is freed there and counts
    only while alive), and `extra_state` tensors a method keeps (Fisher, anchors, teachers). On a
    GPU `torch.cuda.max_memory_allocated` measures the same step with the allocator's overheads;
    on CPU the process RSS is useless for this (it only grows), hence the accounting.
    `step_fn` runs forward + backward; the optimizer should have stepped once (state allocated)."""
    params = list(model.parameters())
    saves = _LiveSaves({_storage(p)[0] for p in params})
    with torch.autograd.graph.saved_tensors_hooks(saves.pack, saves.unpack):
        step_fn()
    opt_state = [] if optimizer is None else [v for s in optimizer.state.values() for v in s.values()
                                              if isinstance(v, torch.Tensor)]
    out = {"parameters": _tensor_bytes(params),
           "gradients": sum(p.numel() * p.element_size() for p in params if p.requires_grad),
           "optimizer": _tensor_bytes(opt_state),
           "activations": saves.peak,
           "method": _tensor_bytes(extra_state)}
    out["total"] = sum(out.values())
    return out


def memory_multiplier(peak: float, reference_peak: float) -> float:
    """A method's peak memory relative to full fine-tuning's (FoMo-in-Flux Table 4)."""
    return peak / reference_peak


def mafs(flops: float, peak: float, reference_peak: float) -> float:
    """Memory-adjusted FLOPs: FLOPs × memory multiplier."""
    return flops * memory_multiplier(peak, reference_peak)


def steps_for_budget(reference_steps: int, reference_mafs: float, method_mafs: float) -> int:
    """Steps a method may take for the MAFs full fine-tuning spends in `reference_steps` steps
    (floor, at least 1): 1420 × 63,394.76 / 47,407.84 → 1898 for LoRA r=4 in Table 4."""
    return max(1, int(reference_steps * reference_mafs / method_mafs))
