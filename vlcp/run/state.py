"""What every run does around its tasks, whatever the stream: the device, the run's folders
held for the run, the code versions recorded, torch's random streams in the checkpoint, the
attempt times, the non-finite check after a task, when checkpoints are due, loading weights."""
from __future__ import annotations

import contextlib
import platform
import time
from pathlib import Path

import torch

import vlcp
from vlcp.config import ExperimentCfg
from vlcp.errors import NonFiniteError, VlcpError
from vlcp.train.checkpoint import CHECKPOINT, PREVIOUS, Checkpoints, first_non_finite, run_lock
from vlcp.train.distributed import init_distributed, unwrap

RESULTS_FORMAT = 1


def pick_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise VlcpError("train.device: cuda requested but no GPU is available")
    return torch.device(name)


def cuda_math(device: torch.device, precision: str) -> None:
    """`train.precision` bf16 on CUDA: TF32 for the fp32 matmuls and convolutions that run
    outside autocast, and cudnn.benchmark (convolution algorithms picked by timing, so such runs
    may differ in their last bits). An fp32 run, and any run on the CPU, leaves torch's settings
    as they are."""
    if device.type == "cuda" and precision == "bf16":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True


def versions() -> dict:
    """What a run's bits depend on besides its config: the library versions, and the CPU capability
    torch dispatches to (AVX2 or AVX-512 kernels round differently, so a seed reproduces a run only
    on the same capability and thread count; the threads are in the config)."""
    return {"vlcp": vlcp.__version__, "torch": torch.__version__, "open_clip": open_clip_version(),
            "python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def open_clip_version() -> str:
    """open_clip's version, read from its installed distribution's metadata: a run whose model is
    not an open_clip one (ALBEF) need not import it to name it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("open_clip_torch")
    except PackageNotFoundError:   # installed some other way: ask the module
        import open_clip
        return open_clip.__version__


@contextlib.contextmanager
def exclusive_run(cfg: ExperimentCfg, out_dir: str | Path, ckpt_dir: str | Path | None):
    """Hold the run's folders (`out_dir`, `ckpt_dir`) for the block: a second run on them
    refuses (`vlcp.train.checkpoint.run_lock`); the temporary folders of the run's own atomic
    writes that a killed run left there are removed. Joins the process group first (rank 0 holds
    the locks)."""
    init_distributed(str(pick_device(cfg.train.device)), cfg.train.ddp_timeout_minutes)
    folders: dict[Path, tuple[str, ...]] = {}
    for folder, names in ((Path(ckpt_dir or out_dir), (CHECKPOINT, PREVIOUS)), (Path(out_dir), ("results.json",))):
        key = next((f for f in folders if f.resolve() == folder.resolve()), folder)
        folders[key] = folders.get(key, ()) + names
    with run_lock(folders, f"{cfg.name} seed {cfg.seed}"):
        yield


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


def load_model_state(model, state: dict) -> None:
    """The checkpoint's model weights into `model`; a checkpoint that does not fit the model its
    config builds (written by another vlcp version) is a one-line error naming the file."""
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise VlcpError(f"{state['path']}: checkpoint does not fit the model of its config ("
                        f"{' '.join(str(e).split())[:200]}); run again with `--no-resume` to start over") from None
