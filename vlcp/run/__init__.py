"""Run one experiment (config + seed) over its task stream and write `results.json`.

`run_experiment` is what `vlcp run` calls, `pretrain` what `vlcp pretrain` and the notebooks'
live sections call. The one loop (`vlcp.run.loop`) trains task by task through
`vlcp.train.loop.train_task`, evaluates after every task, checkpoints (atomic, verified on load:
`vlcp.train.checkpoint`) and resumes from the last checkpointed task when a matching
checkpoint exists; the stream named by `data.stream` (`vlcp.registry.STREAMS`: group, class,
instance, language, concepts; one file each in `vlcp/run/streams/`) supplies what differs.
"""
from __future__ import annotations

from pathlib import Path

import torch

from vlcp.config import ExperimentCfg
from vlcp.registry import load_stream
from vlcp.run.loop import run_stream
from vlcp.run.state import exclusive_run
from vlcp.train.checkpoint import CHECKPOINT, load_checkpoint
from vlcp.utils import atomic_path


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
    stream_cls = load_stream(cfg.data.stream)
    with exclusive_run(cfg, out_dir, ckpt_dir):
        return run_stream(stream_cls, cfg, out_dir, ckpt_dir, resume, stop_after_task, bad_checkpoint)


def pretrain(cfg: ExperimentCfg, weights: str | Path, out_dir: str | Path, ckpt_dir: str | Path | None = None,
             bad_checkpoint: str = "error") -> Path:
    """Train `cfg` (`run_experiment` into `out_dir`, resuming from `ckpt_dir` as it does) and keep its
    final model as the weights file `weights`: the model's state dict, read back from the last
    checkpoint (verified), which `model.pretrained: <file>` loads. Returns `weights`."""
    ckpt_dir = Path(out_dir if ckpt_dir is None else ckpt_dir)
    run_experiment(cfg, out_dir, ckpt_dir, bad_checkpoint=bad_checkpoint)
    state = load_checkpoint(ckpt_dir / CHECKPOINT)["model"]
    with atomic_path(weights) as tmp:
        torch.save(state, tmp)
    return Path(weights)


def step_costs(cfg: ExperimentCfg, device: str = "cpu") -> dict:
    """What FoMo-in-Flux's budget rule compares, on `cfg`'s stream without training: full fine-tuning's
    `step_cost` on the model before the method prepares it, the method's after (from the task its
    `budget_probe_task` names), the stream's number of tasks and the parameters the method trains."""
    from vlcp.methods import get_method
    from vlcp.methods.seqf import SeqF
    from vlcp.run.accounting import step_cost
    from vlcp.utils import derive_seed, seed_everything

    device = torch.device(device)
    seed_everything(derive_seed(cfg.seed, "init"))
    method_cls = get_method(cfg.method.name)
    method = method_cls(method_cls.Config(**cfg.method.args), seed=derive_seed(cfg.seed, "method"))
    stream = load_stream(cfg.data.stream)(cfg, device)
    stream.build(method)
    full_ft = step_cost(stream.model, SeqF(), stream.context(0), cfg, device)
    method.prepare_model(stream.model)
    own = step_cost(stream.model, method, stream.context(0), cfg, device, stream.probe_context(method))
    trainable = sum(p.numel() for p in stream.model.parameters() if p.requires_grad)
    return {"full_ft": full_ft, "method": own, "num_tasks": stream.num_tasks, "trainable_params": trainable}


__all__ = ["pretrain", "run_experiment", "step_costs"]
