"""ER: experience replay from a reservoir buffer of past pairs.

Compute-matched: whenever the buffer holds pairs, a fraction `replay_fraction` of every batch is
drawn from it instead of the current task. `memory_update` says when pairs are offered to the
reservoir (Vitter's algorithm R):

- `online` (default; CTP's ER): every current sample of a step, after that step, so replayed
  rows include pairs of the current task.
- `after_task` (IncCLIP §3.3): at the task's end, each of the task's training pairs once, in
  dataset order; the buffer is frozen during a task, so task t replays only tasks < t.
"""
from dataclasses import dataclass

import torch

from vlcp.fields import check_ranges, ranged
from vlcp.data.buffer import ReservoirBuffer
from vlcp.errors import ConfigError
from vlcp.methods import register
from vlcp.methods.base import Method

MEMORY_UPDATES = ("online", "after_task")


@register
class ER(Method):
    name = "er"
    needs = frozenset({"pixels", "replay"})

    @dataclass
    class Config:
        buffer_size: int = ranged(200, ge=0)
        replay_fraction: float = ranged(0.5, ge=0, lt=1)
        memory_update: str = "online"   # online (after every step, the step's current pairs) | after_task (the task's pairs at its end)

        def __post_init__(self):
            check_ranges(self)
            if self.memory_update not in MEMORY_UPDATES:
                raise ConfigError(f"memory_update: must be one of {', '.join(MEMORY_UPDATES)}, "
                                  f"got {self.memory_update!r}")

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        self.buffer = ReservoirBuffer(self.cfg.buffer_size, seed=seed)

    def make_batch(self, ids, ctx):
        n_replay = int(round(len(ids) * self.cfg.replay_fraction)) if len(self.buffer) else 0
        if n_replay:
            ids = torch.cat([ids[: len(ids) - n_replay], self.buffer.sample(n_replay, ctx.generator)])
        ctx.extras["current_ids"] = ids[: len(ids) - n_replay]
        return ctx.materialize(ids)

    def after_step(self, model, batch, ctx):
        super().after_step(model, batch, ctx)
        current = ctx.extras.pop("current_ids")
        if self.cfg.memory_update == "online":
            self.buffer.add(current)

    def after_task(self, model, ctx):
        super().after_task(model, ctx)
        if self.cfg.memory_update == "after_task":
            self.buffer.add(ctx.task_ids[ctx.task])

    def state_dict(self):
        return super().state_dict() | {"buffer": self.buffer.state_dict()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.buffer.load_state_dict(state["buffer"])
