"""Run one experiment (config + seed) over its task stream and write `results.json`.

`run_experiment` is what `vlcp run` calls: it builds the benchmark, model and method, trains
task by task through `vlcp.train.loop.train_task`, evaluates after every task, checkpoints after
every task (atomic, verified on load: `vlcp.train.checkpoint`) and resumes from the last
finished task when a matching checkpoint exists.
"""
from __future__ import annotations

import contextlib
import copy
import platform
import time
from pathlib import Path

import torch

import vlcp
from vlcp.config import ExperimentCfg
from vlcp.data.augment import train_transform
from vlcp.data.load import load_benchmark
from vlcp.errors import NonFiniteError, VlcpError
from vlcp.eval.evaluate import Evaluator
from vlcp.methods import get_method
from vlcp.methods.base import Method, TaskContext
from vlcp.models import create_model
from vlcp.train import budget
from vlcp.train.checkpoint import CHECKPOINT, PREVIOUS, Checkpoints, first_non_finite, run_lock
from vlcp.train.distributed import barrier, init_distributed, is_main, rank_and_size, unwrap, wrap_ddp
from vlcp.train.schedules import lr_fn, plan_for
from vlcp.train.loop import Materializer, PhaseClock, autocast, draw_ids, train_task
from vlcp.utils import config_hash, derive_seed, seed_everything, write_json

RESULTS_FORMAT = 1


def pick_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise VlcpError("train.device: cuda requested but no GPU is available")
    return torch.device(name)


def _versions() -> dict:
    import open_clip
    return {"vlcp": vlcp.__version__, "torch": torch.__version__, "open_clip": open_clip.__version__,
            "python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine()}


@contextlib.contextmanager
def exclusive_run(cfg: ExperimentCfg, out_dir: str | Path, ckpt_dir: str | Path | None):
    """Hold the run's folders (`out_dir`, `ckpt_dir`) for the block: a second run on them
    refuses (`vlcp.train.checkpoint.run_lock`); the temporary folders of the run's own atomic
    writes that a killed run left there are removed. Joins the process group first (rank 0 holds
    the locks)."""
    init_distributed(str(pick_device(cfg.train.device)))
    folders: dict[Path, tuple[str, ...]] = {}
    for folder, names in ((Path(ckpt_dir or out_dir), (CHECKPOINT, PREVIOUS)), (Path(out_dir), ("results.json",))):
        key = next((f for f in folders if f.resolve() == folder.resolve()), folder)
        folders[key] = folders.get(key, ()) + names
    with run_lock(folders, f"{cfg.name} seed {cfg.seed}"):
        yield


def _save_checkpoint(ckpts: Checkpoints, state: dict) -> None:
    """Write the run's checkpoint (rank 0; every rank waits): `Checkpoints.save`."""
    ckpts.save(state)


def rng_state() -> dict:
    """torch's global random streams (CPU, and every GPU's), for the checkpoint: what a method
    draws from them at the next task's start (peft's LoRA init, new adapters' nn.Linear init)
    continues as in an uninterrupted run."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict | None) -> None:
    """Restore `rng_state` (a checkpoint without one, or another GPU count's: left as is)."""
    if not state:
        return
    torch.set_rng_state(state["cpu"])
    if torch.cuda.is_available() and len(state.get("cuda", ())) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def record_time(results: dict, earlier: list, started: float) -> None:
    """`attempt_seconds`: the seconds of each attempt of the run (a resumed run's earlier
    attempts up to their last checkpoint, then this one's so far); `wall_seconds`: their sum."""
    results["attempt_seconds"] = [*earlier, round(time.time() - started, 2)]
    results["wall_seconds"] = round(sum(results["attempt_seconds"]), 2)


def check_finite(model, method, cfg: ExperimentCfg, task: int, num_tasks: int, task_name, ckpts: Checkpoints) -> None:
    """Stop the run (a `NonFiniteError`, a `VlcpError`) when a task left a NaN or an infinity
    in the model's parameters (or persistent buffers) or the method's state that feeds the next
    task, e.g. weights that blew up at the task's last step, after its last loss: nothing of that
    task is evaluated, checkpointed or written."""
    bad = first_non_finite(unwrap(model), method.state_dict())
    if bad is not None:
        raise NonFiniteError(f"{cfg.name} seed {cfg.seed}: task {task + 1}/{num_tasks} ({task_name}, index {task}) "
                             f"left non-finite values in {bad}; the run stops without evaluating or writing "
                             f"anything of it; {ckpts.kept()}")


def counted_task(task: int, num_tasks: int, every: int) -> bool:
    """Every `every`-th task (0-based `task`: every-1, 2·every-1, ...) and the last."""
    return (task + 1) % every == 0 or task == num_tasks - 1


def checkpoint_due(task: int, num_tasks: int, every: int, stop_after_task: int | None) -> bool:
    """Whether the checkpoint is written after `task` (0-based): every `every` tasks, after the
    last task (the final model: `vlcp pretrain` reads it) and where the run stops
    (`stop_after_task`). A run interrupted between two checkpoints resumes from the earlier one."""
    return counted_task(task, num_tasks, every) or (stop_after_task is not None and task >= stop_after_task)


def run_experiment(cfg: ExperimentCfg, out_dir: str | Path, ckpt_dir: str | Path | None = None,
                   resume: bool = True, stop_after_task: int | None = None, bad_checkpoint: str = "error") -> dict:
    """Train and evaluate; returns the results dict (also written to out_dir/results.json).

    The checkpoint after each task (`train.checkpoint_every`: model + method state + results so far) goes to
    `ckpt_dir/checkpoint.pt` (default: out_dir), the one it replaces to `checkpoint.prev.pt`;
    after the last task it holds the final model (`vlcp.train.checkpoint`: tensors and plain data
    with a checksum). `stop_after_task`: stop (as if interrupted) after finishing that task,
    leaving only the checkpoint; a later call resumes from it. `bad_checkpoint`: what a
    checkpoint that fails to load or verify does: "error" (one line saying what to do),
    "restart" (moved aside to checkpoint.pt.bad, the run starts over), "previous" (moved aside,
    the run resumes from checkpoint.prev.pt). The run holds `out_dir` and `ckpt_dir` (a lock
    file) while it runs; a task that leaves non-finite weights stops it (`check_finite`)."""
    if cfg.data.stream == "language":
        from vlcp.runner_language import run_language_experiment
        return run_language_experiment(cfg, out_dir, ckpt_dir, resume, stop_after_task, bad_checkpoint)
    if cfg.data.stream == "concepts":
        from vlcp.runner_fomo import run_fomo_experiment
        return run_fomo_experiment(cfg, out_dir, ckpt_dir, resume, stop_after_task, bad_checkpoint)
    with exclusive_run(cfg, out_dir, ckpt_dir):
        return _run_groups(cfg, out_dir, ckpt_dir, resume, stop_after_task, bad_checkpoint)


def _run_groups(cfg: ExperimentCfg, out_dir: str | Path, ckpt_dir: str | Path | None, resume: bool,
                stop_after_task: int | None, bad_checkpoint: str) -> dict:
    started = time.time()
    out_dir = Path(out_dir)
    device = pick_device(cfg.train.device)
    init_distributed(str(device))
    rank, world = rank_and_size()
    torch.set_num_threads(cfg.train.num_threads)
    seed_everything(derive_seed(cfg.seed, "init"))

    bench = load_benchmark(cfg.data)
    tasks = bench.task_names
    train = bench.pairs("train", cfg.data.train_styles)
    sets = {"test": bench.pairs("test", cfg.data.train_styles)}
    if cfg.data.unseen_styles:
        sets["unseen_style"] = bench.pairs(("train", "val", "test", "query"), cfg.data.unseen_styles)
    gallery = train if bench.gallery_split == "train" else bench.pairs(bench.gallery_split, cfg.data.train_styles)
    downstream = None
    if cfg.data.benchmark == "cc" and cfg.eval.heldout:   # IncCLIP's suite: the real downstream datasets
        from vlcp.data.real import load_downstream
        downstream = load_downstream(cfg)
    evaluator = Evaluator(sets, bench.pairs("query", cfg.data.train_styles), gallery,
                          bench.class_names if bench.named_classes else [], len(tasks), cfg.eval, bench.group_names,
                          downstream, progress=cfg.train.progress)

    corpus = [c for caps in train.captions for c in caps]
    model, tokenizer = create_model(cfg.model.name, cfg.model.pretrained, device, cfg.data.image_size,
                                    bench.caption_corpus())
    tokens = tokenizer(corpus).view(len(train.captions), -1, tokenizer.context_length)
    mask = tokenizer.masker() if hasattr(tokenizer, "masker") else None  # models with an MLM head
    materializer = Materializer(train.images, train.image_text, tokens, device, cfg.train.augment, mask=mask,
                                transform=train_transform(cfg.data.transform))
    plain = Materializer(train.images, train.image_text, tokens, device, augment=False)
    task_ids = [(train.image_tasks == t).nonzero().squeeze(1) for t in range(len(tasks))]
    steps = budget.allocate_steps(cfg.train.steps, [len(i) for i in task_ids], cfg.train.steps_split)
    plan = plan_for(cfg.train, steps)
    method = get_method(cfg.method.name)(get_method(cfg.method.name).Config(**cfg.method.args),
                                        seed=derive_seed(cfg.seed, "method"))
    method.prepare_model(model)
    compile_model(model, cfg)

    count_passes = cfg.train.pass_flops_seeds is None or cfg.seed in cfg.train.pass_flops_seeds
    chash = config_hash(cfg.to_dict())
    ckpts = Checkpoints(ckpt_dir or out_dir, chash, bad_checkpoint, f"{cfg.name} seed {cfg.seed}",
                        keep_tasks=cfg.train.keep_task_checkpoints)
    results = {
        "format": RESULTS_FORMAT, "experiment": cfg.name, "seed": cfg.seed, "config": cfg.to_dict(),
        "config_hash": chash, "tasks": tasks, "task_sizes": [len(i) for i in task_ids],
        "steps_per_task": steps, "world_size": world, "device": str(device), "versions": _versions(),
        "zero_shot": None, "matrix": {}, "cumulative": [], "train": [],
    }
    start = 0
    if resume and (state := resume_from(ckpts, model, method, cfg)):
        results, start = state
    elif not resume:
        ckpts.ignore_existing()
    earlier = list(results.get("attempt_seconds", []))

    if world > 1:
        model = wrap_ddp(model)
    if results["zero_shot"] is None and is_main():  # the model before any task: the curves' start
        results["zero_shot"] = evaluator(unwrap(model), tokenizer, device, 0)["matrix"]

    for t in range(start, len(tasks)):
        gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "task", t))
        ctx = TaskContext(task=t, num_tasks=len(tasks), train_set=train, task_ids=task_ids,
                          pool=task_ids[t], materialize=lambda ids, g=gen: materializer(ids, g), generator=gen,
                          materialize_plain=lambda ids, g=torch.Generator().manual_seed(derive_seed(cfg.seed, "plain", t)):
                          plain(ids, g))
        if "flops_per_step" not in results:
            results["flops_per_step"] = measure_step_flops(model, method, ctx, cfg, device)
        stats, seconds, task_flops, pass_flops = train_counted(
            model, method, ctx, steps[t], cfg, device, lr_fn(cfg.train.schedule, plan, t),
            f"{cfg.name} s{cfg.seed} task {t + 1}/{len(tasks)} {tasks[t]}", count_passes)
        check_finite(model, method, cfg, t, len(tasks), tasks[t], ckpts)
        t1 = time.time()
        row = evaluator(unwrap(model), tokenizer, device, t) if is_main() else None
        for name, metrics in (row or {}).get("matrix", {}).items():
            for m, vals in metrics.items():
                results["matrix"].setdefault(name, {}).setdefault(m, []).append(vals)
        if row:
            results["cumulative"].append(row["cumulative"])
            if "heldout" in row:
                results.setdefault("heldout", []).append(row["heldout"])
        results["train"].append({"task": tasks[t], "steps": steps[t], "seconds": round(seconds, 3),
                                 "eval_seconds": round(time.time() - t1, 3), "samples": stats["samples"],
                                 "loss": stats["loss"], "terms": stats["terms"],
                                 "flops_per_step": task_flops, "task_pass_flops": pass_flops,
                                 "peak_memory_mb": round(budget.peak_memory_mb(device), 1),
                                 "phase_seconds": stats["phase_seconds"]})
        if is_main() and row:
            c = row["cumulative"]["test"]
            maps = f" mAP@10 {c['mAP@10']:.1f}" if "mAP@10" in c else ""   # (no query set: cc)
            print(f"[{cfg.name} seed {cfg.seed}] task {t + 1}/{len(tasks)} {tasks[t]}: loss {stats['loss']:.3f} "
                  f"cumulative Rm {c['Rm']:.1f}{maps} ({seconds:.0f}s)", flush=True)
        if checkpoint_due(t, len(tasks), cfg.train.checkpoint_every, stop_after_task):
            record_time(results, earlier, started)
            _save_checkpoint(ckpts, {"config_hash": chash, "task": t, "model": unwrap(model).state_dict(),
                                     "method": method.state_dict(), "rng": rng_state(), "results": results})
        if stop_after_task is not None and t >= stop_after_task and t < len(tasks) - 1:
            return results

    if is_main():
        results["final_cumulative"] = evaluator.final_pools(unwrap(model), tokenizer, device)
        record_time(results, earlier, started)   # the whole run's: every attempt's time
        write_json(out_dir / "results.json", results)
    barrier()
    return results


def compile_model(model: torch.nn.Module, cfg: ExperimentCfg) -> None:
    """`train.compile`: compile the model's forward with that torch.compile backend, in place
    (`nn.Module.compile`: parameter names, state dicts and the methods' attribute access stay
    as they are). The language runner does not call it: its token embedding grows every task."""
    if cfg.train.compile:
        model.compile(backend=cfg.train.compile)


def resume_from(ckpts: Checkpoints, model, method, cfg: ExperimentCfg) -> tuple[dict, int] | None:
    """(results so far, next task) from the verified checkpoint of this config
    (`Checkpoints.resume`: loaded with weights_only=True, checksum checked, the run's
    `bad_checkpoint` policy applied), with the model's and the method's state loaded; None when
    there is no checkpoint, it is from another config, or a bad one was set aside to restart."""
    state = ckpts.resume()
    if state is None:
        return None
    load_model_state(model, state)
    method.load_state_dict(state["method"])
    set_rng_state(state.get("rng"))
    if is_main():
        print(f"resuming {cfg.name} seed {cfg.seed} after task {state['task'] + 1}")
    return state["results"], state["task"] + 1


def load_model_state(model, state: dict) -> None:
    """The checkpoint's model weights into `model`; a checkpoint that does not fit the model its
    config builds (written by another vlcp version) is a one-line error naming the file."""
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise VlcpError(f"{state['path']}: checkpoint does not fit the model of its config ("
                        f"{' '.join(str(e).split())[:200]}); run again with `--no-resume` to start over") from None


def _task_start(model, method, ctx, train_cfg):
    method.before_task(model, ctx)
    method.make_optimizer(model, train_cfg)


def _task_end(model, method, ctx, train_cfg):
    method.after_task(model, ctx)


TASK_START = (_task_start, ("before_task", "make_optimizer"))
TASK_END = (_task_end, ("after_task",))


def train_counted(model, method, ctx: TaskContext, steps: int, cfg: ExperimentCfg, device, lr_at, desc: str,
                  count_passes: bool, start_passes: bool = True) -> tuple[dict, float, int | None, int | None]:
    """Train one task and run its `after_task`: (train_task's stats, `after_task` in its
    phase_seconds; seconds of both; FLOPs of a step with the task's method state (teachers,
    buffers); FLOPs of the per-task passes or None when `count_passes` is off). Peak memory is reset at the start; the counting runs outside the timed
    region. `start_passes=False` counts the after-task passes only (the language methods' before_task
    grows vocabularies, embeddings, adapters and prompts: no matrix products, ~0.2 s to re-run).
    A task `train.flops_every` skips (`counted_task`) counts nothing: None and None."""
    pass_flops = None
    counted = counted_task(ctx.task, ctx.num_tasks, cfg.train.flops_every)
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


def measure_step_flops(model, method, ctx: TaskContext, cfg: ExperimentCfg, device) -> int:
    """FLOPs of one training step's forward + backward (method batch and loss included). The
    measurement leaves the run's random stream and the context's extras as they were."""
    gen_state, extras = ctx.generator.get_state(), dict(ctx.extras)
    ids = draw_ids(ctx, cfg.train.batch_size)
    batch = method.make_batch(ids, ctx)
    ctx.generator.set_state(gen_state)

    def step():
        with autocast(device, cfg.train.precision):
            loss = sum(method.loss(model, batch, ctx).values())
        loss.backward()
        model.zero_grad(set_to_none=True)
    flops = budget.flops_per_step(step)
    ctx.extras.clear()
    ctx.extras.update(extras)
    return flops
