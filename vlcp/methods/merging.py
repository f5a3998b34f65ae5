"""Model merging for continual pretraining (FoMo-in-Flux, Roth et al. 2024, §5.2 and Fig. 8):
pure functions on state dicts plus `WeightMerge`, the base of the merge methods.

After every task t, θ_t = w · old + (1 − w) · θ'_t (θ'_t: the weights trained on task t, θ_t the
evaluated and checkpointed merge, θ_{-1} = θ0; w the weight of the old side). A method sets

- `merge_with`: the old side, "merge" (θ_{t−1}), "init" (θ0) or None (no merge);
- `train_from`: where task t+1 starts, "merge" (θ_t) or "init" (θ0).

    EMA-Merge  merge_with="merge"  train_from="merge"
    FT-Merge   merge_with="init"   train_from="merge"
    ZS-Merge   merge_with="merge"  train_from="init"
    isolated   merge_with=None     train_from="init"

Every floating-point `state_dict()` entry is interpolated (new + w·(old − new), so frozen entries
come back bit for bit); other entries come from the just-trained model. A merge runs once per
task, so `extra_cost` is 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from vlcp.fields import check_ranges, ranged
from vlcp.errors import ConfigError
from vlcp.methods.base import Method

StateDict = dict[str, torch.Tensor]
SIDES = ("merge", "init")


def interpolate(old: StateDict, new: StateDict, w: float) -> StateDict:
    """w·old + (1 − w)·new for every floating-point entry; non-float entries are `new`'s.

    Both dicts must have the same keys (a `ValueError` names the first key, in `old`'s order and
    then `new`'s, found in only one of them) and the same shapes per key. The arithmetic runs in
    at least float32 (computed as new + w·(old − new), so equal entries stay exactly equal) and
    the result has `new`'s dtype and device. Inputs are not modified; float outputs are new
    tensors."""
    missing = next((k for k in old if k not in new), None)
    if missing is not None:
        raise ValueError(f"interpolate: key {missing!r} is in the old state dict but not in the new one")
    extra = next((k for k in new if k not in old), None)
    if extra is not None:
        raise ValueError(f"interpolate: key {extra!r} is in the new state dict but not in the old one")
    out = {}
    for k, b in new.items():
        a = old[k]
        if a.shape != b.shape:
            raise ValueError(f"interpolate: key {k!r} has shape {tuple(a.shape)} in the old state dict "
                             f"and {tuple(b.shape)} in the new one")
        if not b.is_floating_point():
            out[k] = b
            continue
        acc = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
        out[k] = torch.lerp(b.to(acc), a.to(device=b.device, dtype=acc), w).to(b.dtype)
    return out


def snapshot(model: torch.nn.Module) -> StateDict:
    """A detached CPU copy of the model's whole state dict."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


@dataclass
class MergeConfig:
    # weight of the old side (θ_{t−1} or θ0); paper ablates 0.85/0.9/0.95, its code used 0.5
    w: float = ranged(0.9, gt=0, lt=1)

    def __post_init__(self):
        check_ranges(self)
        if isinstance(self.w, bool) or not isinstance(self.w, (int, float)) or not 0 < self.w < 1:
            raise ConfigError(f"w: the old-new mixing coefficient must be in (0, 1), got {self.w!r}")


class WeightMerge(Method):
    """Shared base of EMA-, FT- and ZS-Merge (see the module docstring); not registered itself.

    Keeps, as CPU tensors, θ0 (when the merge or the task start uses it) and the running merge
    θ_{t−1} (when the merge's old side is it); both are in `state_dict`, so a resumed run merges
    with exactly the tensors an uninterrupted run would. θ0 is taken at `before_task` of task 0,
    after `prepare_model` and any other hooks that shape the parameter set."""
    Config = MergeConfig
    merge_with: ClassVar[str | None] = "merge"   # None: no merge (isolated)
    train_from: ClassVar[str] = "merge"

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        assert self.merge_with in SIDES + (None,) and self.train_from in SIDES, (self.merge_with, self.train_from)
        self.init: StateDict | None = None     # θ0
        self.merged: StateDict | None = None   # θ_{t−1}, the merge's old side for merge_with="merge"

    @property
    def keeps_init(self) -> bool:
        return "init" in (self.merge_with, self.train_from)

    @torch.no_grad()
    def before_task(self, model, ctx):
        if ctx.task == 0:
            theta0 = snapshot(model)
            self.init = theta0 if self.keeps_init else None
            self.merged = theta0 if self.merge_with == "merge" else None
        elif self.train_from == "init":
            if self.init is None:
                raise RuntimeError(f"{self.name}: no θ0 stored before task {ctx.task} (state not restored?)")
            model.load_state_dict(self.init)
        super().before_task(model, ctx)   # other plugins see the task's training start

    @torch.no_grad()
    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        if self.merge_with is None:   # no merge: the trained model is θ_t
            return
        old = self.merged if self.merge_with == "merge" else self.init
        if old is None:
            raise RuntimeError(f"{self.name}: no {self.merge_with!r} weights to merge with after task {ctx.task}")
        merged = interpolate(old, snapshot(model), self.cfg.w)
        model.load_state_dict(merged)   # the evaluated (and checkpointed) model is θ_t
        if self.merge_with == "merge":
            self.merged = merged

    def state_dict(self):
        return super().state_dict() | {"init": self.init, "merged": self.merged}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.init, self.merged = state["init"], state["merged"]
