"""Learning-rate schedules as pure functions of the step (open_clip / nanoGPT shape), and
FoMo-in-Flux's meta-schedules over a stream of tasks (its Sec. 6.1, Fig. 10), named as the paper's
text names them.

Per task (restarting at every task): `cosine_with_warmup` and `rsqrt_with_cooldown` (Zhai et al.'s
"infinite" schedule: warmup, η_min + √(W/s)(η − η_min), a linear cooldown over the last C steps).
A meta-schedule derives each task's schedule from a hypothetical one spanning tasks 0..t
(`Plan.horizon`: N' = Σ N_k steps, warmup W' the same fraction of N' as the task's own); with p the
steps of earlier tasks, a task warms up to the hypothetical schedule's value at p + W_t (paper
eq. 3). For t = 0 every meta-schedule equals its base schedule. `SCHEDULES` maps the config names
(`train.schedule`) to functions (plan, task, step) -> LR.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


def cosine_with_warmup(step: int, total: int, base_lr: float, warmup: int = 0, min_lr: float = 0.0) -> float:
    """Linear warmup from base_lr/warmup to base_lr over `warmup` steps, then cosine to `min_lr`
    at step `total` (and `min_lr` after it). Steps are 0-based within one task."""
    if warmup > 0 and step < warmup:
        return base_lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * progress))


def rsqrt_decay(step: int, base_lr: float, warmup: int, min_lr: float = 0.0) -> float:
    """The rsqrt curve after warmup: η_min + √(W/step)·(η − η_min) (= η at step W)."""
    return min_lr + math.sqrt(max(warmup, 1) / max(step, 1)) * (base_lr - min_lr)


def rsqrt_with_cooldown(step: int, total: int, base_lr: float, warmup: int = 0, cooldown: int = 0,
                        min_lr: float = 0.0) -> float:
    """Linear warmup, rsqrt decay, then the decayed value scaled linearly to 0 over the last
    `cooldown` steps (exactly 0 at step total − 1)."""
    if warmup > 0 and step < warmup:
        return base_lr * (step + 1) / warmup
    lr = rsqrt_decay(step, base_lr, warmup, min_lr)
    if cooldown > 0 and step >= total - cooldown:
        lr *= max(0, total - 1 - step) / cooldown
    return lr


@dataclass(frozen=True)
class Plan:
    """The stream's shape: steps, warmup and cooldown steps per task, peak and floor LR."""
    steps: tuple[int, ...]
    warmup: tuple[int, ...]
    cooldown: tuple[int, ...]
    base_lr: float
    min_lr: float = 0.0

    @classmethod
    def from_fractions(cls, steps, base_lr: float, min_lr: float = 0.0, warmup_frac: float = 0.1,
                       cooldown_frac: float = 0.1, warmup_steps: int | None = None) -> "Plan":
        """Warmup/cooldown as a fraction of each task's steps (ceil, as FoMo's code), or a fixed
        `warmup_steps` per task."""
        steps = tuple(int(s) for s in steps)
        if warmup_steps is not None:
            warm = tuple(warmup_steps for _ in steps)
        else:
            warm = tuple(math.ceil(warmup_frac * s) for s in steps)
        cool = tuple(max(0, min(math.ceil(cooldown_frac * s), s - w)) for s, w in zip(steps, warm))
        return cls(steps, warm, cool, base_lr, min_lr)

    def before(self, task: int) -> int:
        return sum(self.steps[:task])

    def horizon(self, task: int) -> tuple[int, int]:
        """(N', W') of the hypothetical schedule over tasks 0..task."""
        total = self.before(task) + self.steps[task]
        frac = self.warmup[task] / max(self.steps[task], 1)
        return total, round(frac * total)


def _warm(plan: Plan, task: int, step: int, peak: float) -> float:
    return peak * (step + 1) / plan.warmup[task]


def per_task_cosine(plan: Plan, task: int, step: int) -> float:
    return cosine_with_warmup(step, plan.steps[task], plan.base_lr, plan.warmup[task], plan.min_lr)


def per_task_rsqrt(plan: Plan, task: int, step: int) -> float:
    return rsqrt_with_cooldown(step, plan.steps[task], plan.base_lr, plan.warmup[task], plan.cooldown[task],
                               plan.min_lr)


def _cosine_peak(plan: Plan, task: int) -> float:
    total, warm = plan.horizon(task)
    return cosine_with_warmup(plan.before(task) + plan.warmup[task], total, plan.base_lr, warm, plan.min_lr)


def _rsqrt_peak(plan: Plan, task: int) -> float:
    _, warm = plan.horizon(task)
    return rsqrt_decay(plan.before(task) + plan.warmup[task], plan.base_lr, warm, plan.min_lr)


def autoregressive_cosine(plan: Plan, task: int, step: int) -> float:
    """Cosine from the hypothetical schedule's value at p + W_t down to η_min within the task (with equal
    tasks and 10 % warmup the peaks are η·½(1 + cos(π·t/(t+1))), as the original code's)."""
    peak = _cosine_peak(plan, task)
    return cosine_with_warmup(step, plan.steps[task], peak, plan.warmup[task], plan.min_lr)


def continued_cosine(plan: Plan, task: int, step: int) -> float:
    """"Continued dynamic" cosine: warmup to the hypothetical peak, then the hypothetical cosine at p + s."""
    if step < plan.warmup[task]:
        return _warm(plan, task, step, _cosine_peak(plan, task))
    total, warm = plan.horizon(task)
    return cosine_with_warmup(plan.before(task) + step, total, plan.base_lr, warm, plan.min_lr)


def autoregressive_rsqrt(plan: Plan, task: int, step: int) -> float:
    """The paper's (iii): rsqrt with cooldown from the hypothetical schedule's value at p + W_t, within the
    task (the original code's `recovery_mode: autoregressive`)."""
    return rsqrt_with_cooldown(step, plan.steps[task], _rsqrt_peak(plan, task), plan.warmup[task],
                               plan.cooldown[task], plan.min_lr)


def _cool(plan: Plan, task: int, step: int, lr: float) -> float:
    n, c = plan.steps[task], plan.cooldown[task]
    return lr * max(0, n - 1 - step) / c if c > 0 and step >= n - c else lr


def _rsqrt_clock(plan: Plan, task: int) -> int:
    """k_t: the decay steps of the tasks before `task` (their steps less warmup and cooldown)."""
    return sum(n - w - c for n, w, c in zip(plan.steps[:task], plan.warmup[:task], plan.cooldown[:task]))


def continued_rsqrt(plan: Plan, task: int, step: int) -> float:
    """The paper's (iv), "Continued Dynamic" (the original code's `recovered`): the base rsqrt on a clock
    of the earlier tasks' decay steps, η_min + √(W/(s + k_t))·(η − η_min) with k_t = `_rsqrt_clock`,
    cooling down at the task's end; each task warms up to the clock's value at s = W."""
    clock, w = _rsqrt_clock(plan, task), plan.warmup[task]
    if step < w:
        return _warm(plan, task, step, rsqrt_decay(w + clock, plan.base_lr, w, plan.min_lr))
    return _cool(plan, task, step, rsqrt_decay(step + clock, plan.base_lr, w, plan.min_lr))


def peaks_match_rsqrt(plan: Plan, task: int, step: int) -> float:
    """The paper's (v), "Peaks match Rsqrt" (the original code's `continued`): peak
    b_t = η_min + √(W/(W + k_t))·(η − η_min), the continued dynamic's value at the end of the warmup,
    then a per-task rsqrt from b_t with the cooldown."""
    w = plan.warmup[task]
    peak = rsqrt_decay(w + _rsqrt_clock(plan, task), plan.base_lr, w, plan.min_lr)
    return rsqrt_with_cooldown(step, plan.steps[task], peak, w, plan.cooldown[task], plan.min_lr)


SCHEDULES = {
    "cosine": per_task_cosine,
    "rsqrt": per_task_rsqrt,
    "autoregressive-cosine": autoregressive_cosine,
    "continued-cosine": continued_cosine,
    "autoregressive-rsqrt": autoregressive_rsqrt,
    "continued-rsqrt": continued_rsqrt,
    "peaks-match-rsqrt": peaks_match_rsqrt,
}


def lr_fn(name: str, plan: Plan, task: int):
    """step -> LR of task `task` under schedule `name` (a key of SCHEDULES)."""
    fn = SCHEDULES[name]
    return lambda step: fn(plan, task, step)


def plan_for(cfg, steps) -> Plan:
    """The Plan of a TrainCfg (`warmup_frac` > 0 overrides `warmup_steps`) over per-task steps."""
    return Plan.from_fractions(steps, cfg.lr, cfg.lr * cfg.min_lr_ratio, cfg.warmup_frac, cfg.cooldown_frac,
                               warmup_steps=None if cfg.warmup_frac > 0 else cfg.warmup_steps)
