"""JointT: joint training on all data seen so far; a model after every task (upper bound).

At task t the loop samples from the union of tasks 0..t (same steps and batch as the others,
so it is compute-matched, not epoch-matched)."""
import torch

from vlcp.methods import register
from vlcp.methods.base import Method


@register
class JointT(Method):
    name = "jointt"

    def before_task(self, model, ctx):
        ctx.pool = torch.cat(ctx.task_ids[: ctx.task + 1])
