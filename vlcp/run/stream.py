"""A stream: what differs between the kinds of continual stream, and nothing else.

The loop (`vlcp.run.loop.run_stream`) owns the device, seeds, method, checkpoints, resume, FLOP
and memory accounting, the per-task record, the results file and the progress output. A stream
supplies its data and model (`build`), its tasks and each task's training context (`context`),
the steps per task (`budget`), how a model is evaluated before the first task (`zero_shot`) and
after each (`evaluate`, `record`), and the fields of the results file only it has. A new stream is
one file in `vlcp/run/streams/` and one line in `vlcp.registry.STREAMS`.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, ClassVar

import torch

from vlcp.config import ExperimentCfg
from vlcp.data.formats import BadImages
from vlcp.methods.base import Method, TaskContext


class Stream:
    """The protocol, with the defaults most streams want. After `build`, `model` is the model the
    method trains and `task_ids[t]` task t's training ids; `steps` is set by `budget`; `bad_images`
    counts the unreadable images of a real dataset the stream loads with it (results' `data.bad_images`);
    `data_seconds` the seconds `build` spent in `loading` blocks (results' `run_seconds.data`)."""

    # Accounting: FLOPs of a step counted per task (`train.flops_every`) and per-task passes
    # (`train.pass_flops_seeds`); `start_passes`: before_task/make_optimizer are counted too;
    # `first_step_flops`: `results["flops_per_step"]` is measured before the first task.
    counts_flops: ClassVar[bool] = True
    start_passes: ClassVar[bool] = True
    first_step_flops: ClassVar[bool] = False
    wraps_ddp: ClassVar[bool] = True        # False: the stream's model is not wrapped (the loop averages gradients)
    # what the stream supplies to a method (vlcp.run.requirements.CAPABILITIES; the model adds its own)
    provides: ClassVar[frozenset[str]] = frozenset({"pixels", "replay"})

    @classmethod
    def check(cls, cfg: ExperimentCfg, method_cls: type[Method]) -> None:
        """Refuse, before any data loads, what this stream cannot run (a ConfigError naming the field)."""

    def __init__(self, cfg: ExperimentCfg, device: torch.device):
        self.cfg, self.device = cfg, device
        self.model: torch.nn.Module | None = None
        self.task_ids: list[torch.Tensor] = []
        self.steps: list[int] = []
        self.bad_images = BadImages(cfg.data.max_bad_images)
        self.data_seconds = 0.0

    @contextlib.contextmanager
    def loading(self):
        """Count the block as loading the run's data (`data_seconds`), not as building."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.data_seconds += time.perf_counter() - t0

    def build(self, method: Method) -> None:
        """Load the data (in `loading` blocks), create the model and the tasks."""
        raise NotImplementedError

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    def reference_cost(self) -> None:
        """Measure what the budget compares against, before the method prepares the model."""

    def probe_context(self, method: Method) -> TaskContext | None:
        """The context a budget measures `method`'s step in after its `budget_probe_task`'s `before_task`
        (`vlcp.run.accounting.step_cost`), or None when that is the first task."""
        t = method.budget_probe_task
        return self.context(t) if 0 < t < self.num_tasks else None

    def budget(self, method: Method) -> list[int]:
        """Steps per task (after `method.prepare_model`)."""
        raise NotImplementedError

    def prior_steps(self) -> list[int]:
        """Steps of earlier runs' tasks that the learning-rate plan continues from (a meta-schedule
        over successive `vlcp update` calls); none for the studies' streams."""
        return []

    def header(self) -> dict:
        """The results fields after `config_hash` (tasks, sizes, steps per task, ...)."""
        raise NotImplementedError

    def environment(self) -> dict:
        """The results fields after `versions`."""
        return {}

    def records(self) -> dict:
        """The empty per-task records, after `zero_shot`."""
        return {}

    def restore(self, state: dict | None, method: Method) -> None:
        """Before a checkpoint's weights load (`state`; None on a fresh start)."""

    def checkpoint_extras(self) -> dict:
        """Stream state saved after the model's weights."""
        return {}

    def zero_shot(self, model) -> Any:
        raise NotImplementedError

    def before_training(self, model, method: Method, ctx: TaskContext, steps_left: int) -> None:
        """Called once per attempt, before its first task trains (`ctx`: that task's context;
        `steps_left`: the training steps still to run). Default: nothing."""

    def ready(self) -> None:
        """After the starting model's evaluation (or the resume that skips it), before the first task."""

    def context(self, t: int) -> TaskContext:
        raise NotImplementedError

    def task_label(self, t: int) -> str:
        raise NotImplementedError

    def task_key(self, t: int) -> Any:
        """The `task` of the train row."""
        return self.task_label(t)

    def evaluate(self, model, t: int) -> Any:
        """The model after task t (main rank)."""
        raise NotImplementedError

    def record(self, results: dict, t: int, row: Any) -> None:
        """Add an evaluation to the results (every rank; `row` is None off the main rank)."""
        raise NotImplementedError

    def fixed_flops(self) -> tuple[int, int] | None:
        """(step FLOPs, per-task pass FLOPs) of every train row, for a stream that does not count."""
        return None

    def progress(self, row: Any) -> str:
        return ""

    def finish(self, model, results: dict) -> None:
        """After the last task, every rank."""
