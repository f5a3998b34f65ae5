"""What a run counts: FLOPs of a training step and of a method's per-task passes (torch's flop
counter, outside the timed region), and a step's training memory (the FoMo-in-Flux budget's
MAFs). `train_counted` trains one task through `vlcp.train.loop.train_task` and counts."""
from __future__ import annotations

import copy
import time

import torch

from vlcp.config import ExperimentCfg
from vlcp.methods.base import Method, TaskContext
from vlcp.run.state import counted_task
from vlcp.train import budget
from vlcp.train.distributed import unwrap
from vlcp.train.loop import PhaseClock, autocast, draw_ids, train_task


def task_start(model, method, ctx, train_cfg):
    method.before_task(model, ctx)
    method.make_optimizer(model, train_cfg)


def task_end(model, method, ctx, train_cfg):
    method.after_task(model, ctx)


TASK_START = (task_start, ("before_task", "make_optimizer"))
TASK_END = (task_end, ("after_task",))


def train_counted(model, method, ctx: TaskContext, steps: int, cfg: ExperimentCfg, device, lr_at, desc: str,
                  count_passes: bool, start_passes: bool = True, counts: bool = True
                  ) -> tuple[dict, float, int | None, int | None]:
    """Train one task and run its `after_task`: (train_task's stats, `after_task` in its
    phase_seconds; seconds of both; FLOPs of a step with the task's method state (teachers,
    buffers); FLOPs of the per-task passes or None when `count_passes` is off). Peak memory is reset at the start; the counting runs outside the timed
    region. `start_passes=False` counts the after-task passes only (the language methods' before_task
    grows vocabularies, embeddings, adapters and prompts: no matrix products, ~0.2 s to re-run).
    A task `train.flops_every` skips (`counted_task`) counts nothing: None and None; so does every
    task with `counts=False` (a stream whose cost is measured once for its budget: the concepts')."""
    pass_flops = None
    counted = counts and counted_task(ctx.task, ctx.num_tasks, cfg.train.flops_every)
    count_passes = count_passes and counted
    if count_passes:
        pass_flops = task_pass_flops(model, method, ctx, TASK_START, cfg.train) if start_passes else 0
    budget.reset_peak_memory(device)
    clock = PhaseClock()
    t0 = time.time()
    stats = train_task(model, method, ctx, steps, cfg.train, device, lr_at=lr_at, desc=desc, clock=clock)
    seconds = time.time() - t0
    task_flops = measure_step_flops(model, method, ctx, cfg, device) if counted else None
    if count_passes:
        pass_flops += task_pass_flops(model, method, ctx, TASK_END, cfg.train)
    t0 = time.time()
    with clock("after_task"):
        method.after_task(unwrap(model), ctx)
    stats["phase_seconds"] = clock.rounded()
    return stats, seconds + time.time() - t0, task_flops, pass_flops


def task_pass_flops(model, method, ctx: TaskContext, hooks, train_cfg) -> int:
    """FLOPs of a method's per-task passes outside the training steps (EWC's and MAS's
    importance passes, AFEC's expansion, exemplar features), counted by torch's flop counter on
    copies of the model and method, outside the timed region (the counter slows small ops by
    15-40%); the run's random streams, step and extras are left as they were. 0 when the method
    overrides none of the hooks."""
    run, names = hooks
    if all(getattr(type(method), n) is getattr(Method, n) for n in names):
        return 0
    gen, rng, step, extras = ctx.generator.get_state(), torch.get_rng_state(), ctx.step, dict(ctx.extras)
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    shared = {id(ctx): ctx, id(ctx.train_set): ctx.train_set}   # the data is not copied
    model_copy, method_copy = copy.deepcopy((unwrap(model), method), shared)
    flops = budget.flops_per_step(lambda: run(model_copy, method_copy, ctx, train_cfg))
    del model_copy, method_copy
    ctx.generator.set_state(gen)
    torch.set_rng_state(rng)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    ctx.step = step
    ctx.extras.clear()
    ctx.extras.update(extras)
    return flops


def _probe_step(model, method, ctx: TaskContext, cfg: ExperimentCfg, device):
    """One training step's forward + backward on a batch of the task (method batch and loss
    included; no optimiser update), as a closure, and a function that puts the context's extras
    back. Drawing the batch leaves the run's random stream as it was."""
    gen_state, extras = ctx.generator.get_state(), dict(ctx.extras)
    ids = draw_ids(ctx, cfg.train.batch_size)
    batch = method.make_batch(ids, ctx)
    ctx.generator.set_state(gen_state)

    def step():
        with autocast(device, cfg.train.precision):
            loss = sum(method.loss(model, batch, ctx).values())
        loss.backward()
        model.zero_grad(set_to_none=True)

    def restore():
        ctx.extras.clear()
        ctx.extras.update(extras)
    return step, restore


def measure_step_flops(model, method, ctx: TaskContext, cfg: ExperimentCfg, device) -> int:
    """FLOPs of one training step's forward + backward (method batch and loss included). The
    measurement leaves the run's random stream and the context's extras as they were."""
    step, restore = _probe_step(model, method, ctx, cfg, device)
    flops = budget.flops_per_step(step)
    restore()
    return flops


def measure_step_seconds(model, method, ctx: TaskContext, cfg: ExperimentCfg, device) -> float:
    """Wall seconds of one training step's forward + backward, timed after one untimed step (the
    first pays for lazy set-up); the optimiser's update is left out. What `vlcp update` scales its
    time estimate by. Leaves the run's random stream and the context's extras as they were."""
    step, restore = _probe_step(model, method, ctx, cfg, device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    step()
    sync()
    t0 = time.perf_counter()
    step()
    sync()
    seconds = time.perf_counter() - t0
    restore()
    return seconds


def held_tensors(state) -> list[torch.Tensor]:
    """Every tensor in a method's `state_dict()`, nested dicts, lists and tuples included
    (EWC's {"fisher": {name: F}, "anchors": {name: θ*}})."""
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        state = list(state.values())
    if isinstance(state, (list, tuple)):
        return [t for v in state for t in held_tensors(v)]
    return []


def step_cost(model, method: Method, ctx: TaskContext, cfg: ExperimentCfg, device,
              probe: TaskContext | None = None) -> dict:
    """FLOPs of one step (forward + backward, torch's counter) and its training memory (tensor
    accounting: parameters, gradients, optimizer state after one step, saved activations, and
    with `fomo.state_memory: device` the method's state), measured on copies so the run is
    untouched. The copies first go through one task's `before_task`/`after_task` (no training
    steps), so the state a method keeps from the second task on (its `state_dict`: EWC's Fisher
    and anchor, SI's importances and anchor, a merge's θ0) exists. By default
    (`state_memory: offloaded`) that state is not counted: the paper's implementation keeps it
    in CPU memory ("CPU offloading for model weights ... for the EWC, SI and Merge methods",
    FoMo-in-Flux App. C), and its multipliers are device memory (Table 4: EWC 1.0132, SI
    1.0013, merges 1). Under DDP: one rank's (its slice of the batch; the budget's ratios to
    full fine-tuning's are taken on the same slice). `probe`: a later task's context, where the
    step is measured after that task's `before_task` (a method whose steps cost more from the
    second task on, `Method.budget_probe_task`: a teacher's forward)."""
    model, method = copy.deepcopy(unwrap(model)), copy.deepcopy(method)
    gen_state = ctx.generator.get_state()
    method.before_task(model, ctx)
    task_flops = budget.flops_per_step(lambda: method.after_task(model, ctx))  # Fisher passes, merges
    ctx.generator.set_state(gen_state)
    if probe is not None:
        ctx, gen_state = probe, probe.generator.get_state()
        method.before_task(model, ctx)
        ctx.generator.set_state(gen_state)
    batch = method.make_batch(draw_ids(ctx, cfg.train.batch_size), ctx)
    ctx.generator.set_state(gen_state)
    opt = method.make_optimizer(model, cfg.train)

    def step():
        with autocast(device, cfg.train.precision):
            loss = sum(method.loss(model, batch, ctx).values())
        loss.backward()

    step()
    opt.step()
    model.zero_grad(set_to_none=True)
    flops = budget.flops_per_step(step)
    model.zero_grad(set_to_none=True)
    state = held_tensors(method.state_dict()) if cfg.fomo.state_memory == "device" else []
    mem = budget.training_memory_bytes(model, step, opt, state)
    return {"flops": flops, "task_flops": task_flops, "memory": mem}


def mafs_steps(steps: int, ref: dict, own: dict, use_mafs: bool = True, tasks: int = 1) -> tuple[int, dict]:
    """Steps for a method under FoMo-in-Flux's MAFs budget, and the measurements behind them.
    `steps`: full fine-tuning's steps over `tasks` tasks (one task: the concept stream's per-task budget;
    a whole stream: the group stream's total); `ref`, `own`: `step_cost` of full fine-tuning (the model
    before `prepare_model`) and of the method. The method gets the memory-adjusted FLOPs full fine-tuning
    spends in `steps` steps, less its per-task work (a Fisher pass, paid once per task from the
    budget); `use_mafs=False`: equal steps (the measurements are still returned)."""
    mult = budget.memory_multiplier(own["memory"]["total"], ref["memory"]["total"])
    mafs, task_mafs = own["flops"] * mult, own["task_flops"] * mult
    if use_mafs:
        steps = budget.steps_for_budget(1, steps * ref["flops"] - tasks * task_mafs, mafs)
    return steps, {"method": own, "full_ft": ref, "memory_multiplier": mult, "mafs": mafs, "task_mafs": task_mafs,
                   "full_ft_mafs": ref["flops"], "steps_per_task": steps}
