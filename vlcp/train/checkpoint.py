"""Checkpoints that are only data, verified on load, and the run's hold on its folders.

A checkpoint is one `torch.save` file (atomic) of tensors and plain data only (what
`torch.load(..., weights_only=True)` accepts), with `format` `"vlcp-checkpoint/1"` and a
`checksum` `"sha256:<hex>"` over every other entry's structure, plain values and tensors' dtype,
shape and bytes, in key order. `load_checkpoint` verifies it, so a damaged or planted file is a
`CheckpointError` naming the file. `save_checkpoint` keeps the file it replaces as
`checkpoint.prev.pt`; `resume_state` applies `--bad-checkpoint`: `error`, `restart` (the bad file
moved aside to `checkpoint.pt.bad`) or `previous` (resume from `checkpoint.prev.pt`).

`run_lock` makes a run the only one using its folders (`<folder>/.lock`, O_CREAT|O_EXCL, the
holder's pid and host; a dead holder's lock on this host is taken over; under torchrun rank 0
holds it) and removes the temporary folders an interrupted atomic write of the run left.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import time
from pathlib import Path
from typing import Any, Iterator

import torch

from vlcp.errors import VlcpError
from vlcp.train.distributed import barrier, broadcast_object, is_main
from vlcp.utils import atomic_path

FORMAT = "vlcp-checkpoint/1"
CHECKPOINT = "checkpoint.pt"
PREVIOUS = "checkpoint.prev.pt"
LOCK = ".lock"
BAD_CHECKPOINT = ("error", "restart", "previous")   # `vlcp run --bad-checkpoint`
# the temporary folders `atomic_path` makes beside a file it writes: "." + name + "." + mkdtemp's 8 characters
_TEMP = r"\.{name}\.[a-z0-9_]{{8}}"


class CheckpointError(VlcpError):
    """A checkpoint file that cannot be trusted: unreadable, not only data, or failing its checksum."""

    def __init__(self, path: Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = Path(path), problem


# --------------------------------------------------------------------------- format

def plain(obj: Any, where: str = "checkpoint") -> Any:
    """`obj` with numpy scalars and arrays as Python numbers and lists (what `write_json`
    writes for them) and tensors on the CPU, detached; a `TypeError` naming the entry for anything
    that is not a tensor or plain data (a programming error: a method state holding an object)."""
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, str):       # a str subclass (torch.__version__): the plain string
        return str.__str__(obj)
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):   # an IntEnum, np.float64: the number
        return (int if isinstance(obj, int) else float)(obj)
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"{where}: dict key {k!r} ({type(k).__name__}) is not a str or int")
        return {k: plain(v, f"{where}[{k!r}]") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        out = [plain(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return tuple(out) if isinstance(obj, tuple) else out
    import numpy as np
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"{where}: a {type(obj).__module__}.{type(obj).__name__} is not a tensor or plain data "
                    "(checkpoints hold tensors, dicts, lists, tuples, str, int, float, bool and None only)")


def _feed(h, obj: Any) -> None:
    """Feed `obj`'s canonical encoding to the hash `h` (type tags, lengths, values in order)."""
    if obj is None:
        h.update(b"N")
    elif isinstance(obj, bool):
        h.update(b"B1" if obj else b"B0")
    elif isinstance(obj, int):
        s = str(obj).encode()
        h.update(b"I%d:" % len(s) + s)
    elif isinstance(obj, float):
        h.update(b"F" + struct.pack("<d", obj))
    elif isinstance(obj, str):
        s = obj.encode("utf-8", "surrogatepass")
        h.update(b"S%d:" % len(s) + s)
    elif isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        head = f"{t.dtype}|{tuple(t.shape)}".encode()
        h.update(b"X%d:" % len(head) + head)
        if t.numel():
            h.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    elif isinstance(obj, dict):
        h.update(b"D%d:" % len(obj))
        for k, v in obj.items():
            _feed(h, k)
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update((b"L%d:" if isinstance(obj, list) else b"T%d:") % len(obj))
        for v in obj:
            _feed(h, v)
    else:
        raise TypeError(f"cannot checksum a {type(obj).__name__}")


def checksum(state: dict) -> str:
    """sha256 over the canonical encoding of every entry but `checksum` itself."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != "checksum"})
    return "sha256:" + h.hexdigest()


def save_checkpoint(path: str | os.PathLike, state: dict, previous: str | os.PathLike | None = None) -> None:
    """Write `state` (tensors and plain data, `plain`) with its format tag and checksum to
    `path`, atomically. With `previous`: the file at `path` (if any) becomes `previous` first (a
    hard link swapped in atomically; a copy where the file system has no hard links), so at
    every moment `path` holds a whole checkpoint, the old one or the new one. Call it on the
    rank that writes (rank 0)."""
    path = Path(path)
    body = {"format": FORMAT, **plain(state)}
    body["checksum"] = checksum(body)
    with atomic_path(path) as tmp:
        torch.save(body, tmp)
        if previous is not None and path.is_file():
            with atomic_path(previous) as old:
                try:
                    os.link(path, old)
                except OSError:
                    shutil.copy2(path, old)


def load_checkpoint(path: str | os.PathLike) -> dict:
    """The checkpoint at `path` (without its format tag and checksum), loaded with
    `weights_only=True` and verified against its checksum; a `CheckpointError` naming the file
    and the problem otherwise."""
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            raise CheckpointError(path, "checkpoint is empty (0 bytes: its write was interrupted)")
        state = torch.load(path, map_location="cpu", weights_only=True)
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(path, "checkpoint not found") from None
    except Exception as e:   # noqa: BLE001  (torch raises RuntimeError, EOFError, UnpicklingError, ... on bad bytes)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        if "weights only load failed" in str(e).lower() or "weights_only" in str(e).lower():
            raise CheckpointError(path, "checkpoint holds objects other than tensors and plain data (written by "
                                  "an older vlcp, another program, or planted); it was not unpickled") from None
        raise CheckpointError(path, f"checkpoint is unreadable (truncated or overwritten: {first})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT or "checksum" not in state:
        raise CheckpointError(path, "not a vlcp checkpoint with a checksum (written by an older vlcp or another "
                              "program); it cannot be verified")
    try:
        ok = checksum(state) == state["checksum"]
    except TypeError as e:
        raise CheckpointError(path, f"checkpoint holds unexpected data ({e})") from None
    if not ok:
        raise CheckpointError(path, "checkpoint is corrupt (its checksum does not match its contents: the file "
                              "changed after it was written)")
    return {k: v for k, v in state.items() if k not in ("format", "checksum")}


def verify_checkpoint(path: str | os.PathLike) -> None:
    """Raise a `CheckpointError` unless `path` is a whole, unmodified vlcp checkpoint."""
    load_checkpoint(path)


def _set_aside(path: Path) -> Path:
    """Rename a bad checkpoint to `<name>.bad` (`.bad.1`, ... if taken): never deleted, never
    overwritten."""
    target, n = path.with_name(path.name + ".bad"), 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.bad.{n}")
    os.replace(path, target)
    return target


def _hint(path: Path, previous: Path) -> str:
    alt = (f", or `--bad-checkpoint previous` to resume from {previous.name}" if previous.is_file() else "")
    return (f"run again with `--bad-checkpoint restart` to start over (the file is kept as {path.name}.bad){alt}, "
            "or move it away")


def _decide(path: Path, previous: Path, chash: str, on_bad: str, label: str) -> tuple[str | None, str | None, dict]:
    """Rank 0's choice: (the checkpoint file to resume from or None, an error message or None,
    that file's verified state)."""
    if not path.exists():
        return None, None, {}
    try:
        state = load_checkpoint(path)
    except CheckpointError as e:
        if on_bad == "error":
            return None, f"{e}; {_hint(path, previous)}", {}
        aside = _set_aside(path)
        print(f"{path}: {e.problem}; moved it aside to {aside.name}", flush=True)
        if on_bad == "restart":
            print(f"{label}: starting over (--bad-checkpoint restart)", flush=True)
            return None, None, {}
        try:
            state = load_checkpoint(previous)
        except CheckpointError as e2:
            return None, (f"--bad-checkpoint previous: {e2}; run again with `--bad-checkpoint restart` to start over "
                          f"(the bad checkpoint is kept as {aside.name})"), {}
        path = previous
        print(f"{label}: resuming from the previous checkpoint {previous} (--bad-checkpoint previous)", flush=True)
    if state.get("config_hash") != chash:
        print(f"{path}: checkpoint is from another config; starting over (it is replaced by this run's checkpoints)",
              flush=True)
        return None, None, {}
    return str(path), None, state


def resume_state(ckpt_dir: str | os.PathLike, chash: str, on_bad: str = "error", label: str = "run") -> dict | None:
    """The verified checkpoint of config `chash` in `ckpt_dir` to resume from (the entries
    `save_checkpoint` got, `"path"` added: the file it came from), or None: no checkpoint, one of
    another config (said, starting over), or a bad one under `on_bad="restart"`. A bad checkpoint
    under `on_bad="error"` (or under "previous" with no good previous one) raises a `VlcpError`
    saying what to do. Rank 0 decides (and moves files); every rank loads the chosen file."""
    if on_bad not in BAD_CHECKPOINT:
        raise VlcpError(f"--bad-checkpoint: must be one of {', '.join(BAD_CHECKPOINT)}, got {on_bad!r}")
    ckpt_dir = Path(ckpt_dir)
    chosen, error, state = _decide(ckpt_dir / CHECKPOINT, ckpt_dir / PREVIOUS, chash, on_bad, label) \
        if is_main() else (None, None, {})
    chosen, error = broadcast_object((chosen, error))
    if error:
        raise VlcpError(error)
    if chosen is None:
        return None
    if not is_main():            # the other ranks load (and verify) the file rank 0 chose
        state = load_checkpoint(chosen)
    state["path"] = chosen
    return state


class Checkpoints:
    """A run's checkpoint file in `ckpt_dir`: what it resumed from and what it writes. The file
    there is kept as `checkpoint.prev.pt` when a new one is written only when it is this run's
    (written by it or resumed from); one of another config is replaced (after `resume_state`
    said so), a bad one was moved aside."""

    def __init__(self, ckpt_dir: str | os.PathLike, chash: str, on_bad: str = "error", label: str = "run",
                 keep_tasks: bool = False):
        self.dir, self.chash, self.on_bad, self.label = Path(ckpt_dir), chash, on_bad, label
        self.keep_tasks = keep_tasks   # train.keep_task_checkpoints: every checkpoint also stays as task-<i>.pt
        self.path = self.dir / CHECKPOINT
        self.previous = self.dir / PREVIOUS
        self.ours = False          # the file at `path` is this run's
        self.last_task: int | None = None
        self.last_path = self.path

    def resume(self) -> dict | None:
        state = resume_state(self.dir, self.chash, self.on_bad, self.label)
        if state is not None:
            self.ours = Path(state["path"]) == self.path
            self.last_task, self.last_path = state["task"], Path(state["path"])
        return state

    def ignore_existing(self) -> None:
        """A run that does not resume (`--no-resume`) says that it replaces a checkpoint there."""
        if is_main() and self.path.exists():
            print(f"{self.path}: not resuming from it (--no-resume); this run's checkpoints replace it", flush=True)

    def save(self, state: dict) -> None:
        if is_main():
            save_checkpoint(self.path, state, previous=self.previous if self.ours else None)
            if self.keep_tasks:
                keep_copy(self.path, task_checkpoint(self.dir, state["task"]))
        barrier()
        self.ours, self.last_task, self.last_path = True, state["task"], self.path

    def kept(self) -> str:
        """Where the run's last good checkpoint is, for an error message."""
        if self.last_task is None:
            return "no checkpoint of this run was written"
        return f"the last good checkpoint ({self.last_path}, after task {self.last_task + 1}) is kept"


def task_checkpoint(ckpt_dir: str | os.PathLike, task: int) -> Path:
    """Where `train.keep_task_checkpoints` keeps the checkpoint written after `task` (0-based)."""
    return Path(ckpt_dir) / f"task-{task + 1:02d}.pt"


def keep_copy(path: Path, copy: Path) -> None:
    """`copy` becomes the checkpoint at `path` as it is now (a hard link, or a copy where the file
    system has none), atomically."""
    with atomic_path(copy) as tmp:
        try:
            os.link(path, tmp)
        except OSError:
            shutil.copy2(path, tmp)


# --------------------------------------------------------------------------- non-finite state

def first_non_finite(model: torch.nn.Module, extra: dict | None = None) -> str | None:
    """The name of the first parameter or persistent floating-point buffer (BatchNorm's
    statistics; not attention masks, which hold -inf by design) of `model`, or tensor of `extra`
    (a method's state), holding a NaN or an infinity; None when all are finite."""
    params = dict(model.named_parameters())
    for name, t in model.state_dict(keep_vars=True).items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return f"parameter {name}" if name in params else f"buffer {name}"
    if extra:
        for name, t in _tensors(extra, "method state"):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                return name
    return None


def _tensors(obj, where: str) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield where, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{where}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{where}[{i}]")


# --------------------------------------------------------------------------- one run per folder

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # another user's live process
        return True
    return True


def _read_lock(lock: Path) -> dict:
    try:
        info = json.loads(lock.read_text())
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


_HELD: set[str] = set()   # the locks this process holds (a lock naming this pid but not here is a dead process's)
STALE_EMPTY_SECONDS = 60   # a lock file left empty this long: its holder died between creating and writing it


def _stale(lock: Path, info: dict, host: str) -> str | None:
    """Why the existing `lock` is stale (its holder is dead), or None while it may be alive."""
    pid = info.get("pid")
    if not info:
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return "gone"
        return f"an unreadable lock {age:.0f} s old" if age > STALE_EMPTY_SECONDS else None
    if not isinstance(pid, int) or info.get("host") != host:
        return None                          # another host's process: cannot be checked from here
    if pid == os.getpid():
        return None if str(lock) in _HELD else f"the lock of pid {pid} (this pid, reused: not held here)"
    return None if _alive(pid) else f"the lock of pid {pid} on {host}"


def live_holder(lock: Path) -> dict | None:
    """What `lock` says of its holder ({"pid", "host", "run", "since"}; {} while unreadable) while
    that holder may be running; None when there is no lock or its holder is dead (`_stale`)."""
    if not lock.exists():
        return None
    info = _read_lock(lock)
    return None if _stale(lock, info, socket.gethostname()) is not None else info


def _take(lock: Path, label: str) -> None:
    me = {"pid": os.getpid(), "host": socket.gethostname(), "run": label,
          "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            info = _read_lock(lock)
            pid, host = info.get("pid"), info.get("host")
            why = _stale(lock, info, me["host"])
            if why is not None:
                if why != "gone":
                    print(f"{lock}: taking over {why} ({info.get('run', 'a vlcp run')}), which is no longer running",
                          flush=True)
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
                continue
            who = (f"pid {pid} on {host}" + (f", {info['run']}" if info.get("run") else "")
                   + (f", since {info['since']}" if info.get("since") else "")) if pid else "an unknown holder"
            raise VlcpError(f"{lock}: the folder is in use by another vlcp run ({who}); wait for it to finish, "
                            f"or, if that run is no longer running, remove {lock}")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(me) + "\n")
        _HELD.add(str(lock))
        return
    raise VlcpError(f"{lock}: could not take the lock (another run keeps taking it); remove {lock} if no run "
                    "uses the folder")


def remove_leftovers(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """Remove the temporary folders `atomic_path` left beside the files `names` in `folder`
    (`.<name>.XXXXXXXX/`: a write killed before its rename). Only those names; call it while
    holding the folder's lock."""
    pattern = re.compile("|".join(_TEMP.format(name=re.escape(n)) for n in names) + r"\Z")
    removed = []
    for entry in folder.iterdir() if folder.is_dir() else ():
        if pattern.match(entry.name) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


@contextlib.contextmanager
def run_lock(folders: dict[str | os.PathLike, tuple[str, ...]], label: str = "run") -> Iterator[None]:
    """Hold `<folder>/.lock` for each folder (rank 0 only) for the block, released on exit and
    on exceptions; a live holder refuses with one line (on every rank). While holding them,
    remove the leftovers of interrupted atomic writes of the files named for each folder.
    Folders it had to make are removed again on exit if the run left them empty (a run that fails
    before writing anything leaves nothing behind)."""
    held: list[Path] = []
    made: list[Path] = []
    error = None
    if is_main():
        try:
            for folder in sorted({Path(f).resolve() for f in folders}):
                made += _make(folder)
                _take(folder / LOCK, label)
                held.append(folder / LOCK)
            for folder, names in folders.items():
                for gone in remove_leftovers(Path(folder), names):
                    print(f"{gone}: removed the temporary folder of an interrupted write", flush=True)
        except VlcpError as e:
            error = str(e)
        except BaseException:
            _release(held, made)
            raise
    error = broadcast_object(error)
    if error:
        _release(held, made)
        raise VlcpError(error)
    try:
        yield
    finally:
        _release(held, made)


def _make(folder: Path) -> list[Path]:
    """mkdir -p `folder`; the folders it made, outermost first."""
    missing = [p for p in [folder, *folder.parents] if not p.exists()][::-1]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _release(held: list[Path], made: list[Path] = ()) -> None:
    for lock in reversed(held):
        _HELD.discard(str(lock))
        if _read_lock(lock).get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
    held.clear()
    for folder in sorted(made, key=lambda p: len(p.parts), reverse=True):   # innermost first; only if empty
        with contextlib.suppress(OSError):
            folder.rmdir()
