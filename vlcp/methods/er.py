"""ER: experience replay from a reservoir buffer of past pairs.

Compute-matched: from task 1 on, a fraction `replay_fraction` of every batch is drawn from the
buffer instead of the current task, so ER sees as many samples per step as SeqF. Every current
sample is offered to the reservoir after the step."""
from dataclasses import dataclass

import torch

from vlcp.config import check_ranges, ranged
from vlcp.data.buffer import ReservoirBuffer
from vlcp.methods import register
from vlcp.methods.base import Method


@register
class ER(Method):
    name = "er"

    @dataclass
    class Config:
        buffer_size: int = ranged(200, ge=0)
        replay_fraction: float = ranged(0.5, ge=0, lt=1)

        def __post_init__(self):
            check_ranges(self)

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
        self.buffer.add(ctx.extras.pop("current_ids"))

    def state_dict(self):
        return super().state_dict() | {"buffer": self.buffer.state_dict()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.buffer.load_state_dict(state["buffer"])
