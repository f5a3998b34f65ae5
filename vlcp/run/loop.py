"""The one continual loop: every stream's run, task by task.

`run_stream` builds the method and the stream's data and model, resumes from the run's
checkpoint when one matches its config, evaluates the starting model, then per task trains
(`vlcp.run.accounting.train_counted`), stops on non-finite weights, evaluates, records, prints a
progress line and checkpoints; it writes `results.json` (atomic) at the end, with the seconds of
each phase of the run (`run_seconds`, `vlcp.run.timing`). What differs between streams is the
stream's (`vlcp.run.stream.Stream`).
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

from vlcp.config import ExperimentCfg
from vlcp.methods import get_method
from vlcp.run.accounting import measure_step_flops, train_counted
from vlcp.run.requirements import check_pairing
from vlcp.run.state import (RESULTS_FORMAT, check_finite, checkpoint_due, cuda_math, load_model_state,
                            pick_device, record_time, rng_state, set_rng_state, versions)
from vlcp.run.stream import Stream
from vlcp.run.timing import RunClock, RunSeconds, startup
from vlcp.train import budget
from vlcp.train.checkpoint import Checkpoints
from vlcp.train.distributed import barrier, init_distributed, is_main, rank_and_size, seed_rank, unwrap, wrap_ddp
from vlcp.train.loop import autocast
from vlcp.train.schedules import lr_fn, plan_for
from vlcp.utils import config_hash, derive_seed, seed_everything, write_results


def run_stream(stream_cls: type[Stream], cfg: ExperimentCfg, out_dir: str | Path, ckpt_dir: str | Path | None,
               resume: bool, stop_after_task: int | None, bad_checkpoint: str) -> dict:
    """Train and evaluate `cfg` on its stream; see `vlcp.run.run_experiment`."""
    started = time.time()
    began = startup(started)   # the process's start-up, charged to its first run
    clock = RunClock()         # this attempt's phases
    out_dir = Path(out_dir)
    with clock("build"):
        device = pick_device(cfg.train.device)
        cuda_math(device, cfg.train.precision)
        init_distributed(str(device), cfg.train.ddp_timeout_minutes)
        _, world = rank_and_size()
        torch.set_num_threads(cfg.train.num_threads)
        seed_everything(derive_seed(cfg.seed, "init"))
        method_cls = get_method(cfg.method.name)
        check_pairing(cfg, method_cls, stream_cls)
        stream_cls.check(cfg, method_cls)   # (vlcp.run.requirements.check_config: the same two, for vlcp run's up-front check)
        method = method_cls(method_cls.Config(**cfg.method.args), seed=derive_seed(cfg.seed, "method"))

        stream = stream_cls(cfg, device)
        stream.build(method)
        stream.reference_cost()
        method.prepare_model(stream.model)
        steps = stream.budget(method)
        prior = stream.prior_steps()   # earlier runs' tasks a meta-schedule continues over (vlcp update)
        plan = plan_for(cfg.train, prior + steps)
        n = stream.num_tasks

        count_passes = cfg.train.pass_flops_seeds is None or cfg.seed in cfg.train.pass_flops_seeds
        chash = config_hash(cfg.to_dict())
        ckpts = Checkpoints(ckpt_dir or out_dir, chash, bad_checkpoint, f"{cfg.name} seed {cfg.seed}",
                            keep_tasks=cfg.train.keep_task_checkpoints)
        results = {"format": RESULTS_FORMAT, "experiment": cfg.name, "seed": cfg.seed, "config": cfg.to_dict(),
                   "config_hash": chash, **stream.header(), "world_size": world, "device": str(device),
                   "versions": versions(), **stream.environment(), "zero_shot": None, **stream.records(), "train": []}
    clock.move(stream.data_seconds, "build", "data")
    start = 0
    with clock("checkpoint"):
        state = ckpts.resume() if resume else ckpts.ignore_existing()
    with clock("build"):
        stream.restore(state, method)
    if state is not None:
        with clock("checkpoint"):
            load_model_state(stream.model, state)
            method.load_state_dict(state["method"])
        set_rng_state(state.get("rng"))   # the global stream as after the finished task (the next modules' init)
        results, start = state["results"], state["task"] + 1
        stream.bad_images.restore(results.get("data", {}).get("bad_images"))   # skipped before: counted once
        if is_main():
            print(f"resuming {cfg.name} seed {cfg.seed} after task {start}/{n} ({stream.task_label(start - 1)})")
    earlier = list(results.get("attempt_seconds", []))
    earlier_phases = RunSeconds.from_dict(results.get("run_seconds"))

    def record_phases():   # after record_time: this attempt's phases so far, added to the earlier attempts'
        results["run_seconds"] = (earlier_phases + clock.close(results["attempt_seconds"][-1], began)).to_dict()

    model = wrap_ddp(stream.model) if world > 1 and stream.wraps_ddp else stream.model
    if results["zero_shot"] is None and is_main():   # the model before any task: the curves' start
        with clock("zero_shot_eval"), autocast(device, cfg.train.precision):   # evaluation encodes at the training precision
            results["zero_shot"] = stream.zero_shot(unwrap(model))
    stream.ready()

    for t in range(start, n):
        ctx = stream.context(t)
        ctx.steps = steps[t]
        label = stream.task_label(t)
        if t == start:
            with clock("build"):
                stream.before_training(model, method, ctx, sum(steps[start:]))
        if stream.first_step_flops and "flops_per_step" not in results:
            with clock("flops"):
                results["flops_per_step"] = measure_step_flops(model, method, ctx, cfg, device)
        seed_rank(cfg.seed, t)   # dropout: each rank's own stream (vlcp.train.distributed.seed_rank)
        t0 = time.time()
        stats, seconds, task_flops, pass_flops = train_counted(
            model, method, ctx, steps[t], cfg, device, lr_fn(cfg.train.schedule, plan, len(prior) + t),
            f"{cfg.name} s{cfg.seed} task {t + 1}/{n} {label}", count_passes, stream.start_passes,
            stream.counts_flops)
        clock.add("train", seconds)
        clock.add("flops", time.time() - t0 - seconds)   # train_counted's counting, outside its timed region
        check_finite(model, method, cfg, t, n, label, ckpts)
        t1 = time.time()
        with autocast(device, cfg.train.precision):
            row = stream.evaluate(unwrap(model), t) if is_main() else None
        stream.record(results, t, row)
        if len(stream.bad_images):
            results.setdefault("data", {})["bad_images"] = stream.bad_images.summary()
        task_flops, pass_flops = stream.fixed_flops() or (task_flops, pass_flops)
        eval_seconds = time.time() - t1
        clock.add("eval", eval_seconds)
        results["train"].append({"task": stream.task_key(t), "steps": steps[t], "seconds": round(seconds, 3),
                                 "eval_seconds": round(eval_seconds, 3), "samples": stats["samples"],
                                 "loss": stats["loss"], "terms": stats["terms"],
                                 "flops_per_step": task_flops, "task_pass_flops": pass_flops,
                                 "peak_memory_mb": round(budget.peak_memory_mb(device), 1),
                                 "phase_seconds": stats["phase_seconds"]})
        if is_main() and row is not None:
            print(f"[{cfg.name} seed {cfg.seed}] task {t + 1}/{n} {label}: loss {stats['loss']:.3f} "
                  f"{stream.progress(row)} ({seconds:.0f}s)", flush=True)
        if checkpoint_due(t, n, cfg.train.checkpoint_every, stop_after_task):
            record_time(results, earlier, started)
            record_phases()
            with clock("checkpoint"):
                ckpts.save({"config_hash": chash, "task": t, "model": unwrap(model).state_dict(),
                            **stream.checkpoint_extras(), "method": method.state_dict(), "rng": rng_state(),
                            "results": results})
        if stop_after_task is not None and t >= stop_after_task and t < n - 1:
            return results

    with clock("finish"), autocast(device, cfg.train.precision):
        stream.finish(unwrap(model), results)
    if len(stream.bad_images):
        results.setdefault("data", {})["bad_images"] = stream.bad_images.summary()
    if is_main():
        record_time(results, earlier, started)   # the whole run's: every attempt's time
        record_phases()
        write_results(out_dir / "results.json", results)
    barrier()
    return results
