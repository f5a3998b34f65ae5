"""Small shared helpers: atomic writes, seeding, JSON."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from vlcp.errors import VlcpError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling path for a *file*; `os.replace` it onto `path` only if the
    block succeeds, so readers never see a half-written file. A folder at `path` is never
    replaced (a `VlcpError` naming it): folders of outputs go through `atomic_dir`. A write that
    fails on a full disk is a `VlcpError` naming the path and the space (`disk_full`)."""
    path = Path(path)
    if path.is_dir():
        raise VlcpError(f"{path}: is a folder; vlcp writes a file there and never replaces a folder "
                        "(name a file path instead)")
    check_folder(path.parent, str(path))
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent)) / path.name
        yield tmp
        if tmp.is_dir():
            raise ValueError(f"atomic_path({path}) is for files; use atomic_dir for folders")
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        full = disk_full(e, path, tmp.parent if tmp is not None else None)
        if full is None:
            raise
        raise full from e
    finally:
        if tmp is not None:
            shutil.rmtree(tmp.parent, ignore_errors=True)


NEARLY_FULL = 16 * 2 ** 20   # bytes free under which a failed write (torch's RuntimeError) is taken for a full disk


def disk_full(e: BaseException, path: Path, written: Path | None) -> VlcpError | None:
    """A `VlcpError` naming `path`, the free space and the space the write needed (at least what it
    had written to `written`, a file or folder, when it failed) if `e` is a full disk: ENOSPC or
    EDQUOT, or torch's write failure (a RuntimeError) while the disk is nearly full; else None."""
    if isinstance(e, VlcpError):
        return None
    if isinstance(e, OSError):
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            return None
    elif not ("inline_container" in str(e) or "PytorchStreamWriter" in str(e)) \
            or _free_bytes(path.parent) >= NEARLY_FULL:
        return None
    done = _size(written) if written is not None else 0
    return VlcpError(f"{path}: the disk is full ({_mb(_free_bytes(path.parent))} free in {existing_folder(path.parent)}; "
                     f"this write needed more than the {_mb(done)} it had written); free some space (or write "
                     "elsewhere) and run the same command again")


def check_free_space(path: str | os.PathLike, needed_bytes: int, what: str) -> None:
    """A `VlcpError` naming `what`, the folder and both amounts if the file system holding `path`
    (a folder, made or not yet) has less than `needed_bytes` free."""
    free = _free_bytes(Path(path))
    if free < needed_bytes:
        raise VlcpError(f"{what} needs about {_mb(needed_bytes)} on the disk of {existing_folder(Path(path))}, "
                        f"which has {_mb(free)} free; free some space (or write elsewhere) and run it again")


def check_folder(folder: str | os.PathLike, what: str) -> None:
    """A `VlcpError` naming `what` if `folder` cannot be made or written to: a file is at its
    place or above it, or its nearest existing folder is read-only to us."""
    found = existing_folder(Path(folder))
    if not found.is_dir():
        raise VlcpError(f"{what}: {found} is a file, not a folder")
    if not os.access(found, os.W_OK | os.X_OK):
        raise VlcpError(f"{what}: the folder {found} is not writable")


def existing_folder(path: Path) -> Path:
    """`path` or its nearest ancestor that exists (what a write under `path` lands in)."""
    path = Path(path)
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _free_bytes(path: Path) -> int:
    found = existing_folder(path)
    return shutil.disk_usage(found if found.is_dir() else found.parent).free


def _size(path: Path) -> int:
    """Bytes in a file, or in every file under a folder (0 if there is none)."""
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    except OSError:
        return 0


def _mb(n: int) -> str:
    return f"{n / 2 ** 20:.1f} MB"


MANIFEST = ".vlcp-outputs.json"   # atomic_dir's record of the entries it wrote into a folder


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, last: tuple[str, ...] = ()) -> Iterator[Path]:
    """Yield an empty temporary folder; if the block succeeds, publish its entries into the
    folder `path` (made if missing), each atomically (`os.replace`), the names in `last` after
    the others (a reader's index file, e.g. meta.json), then the manifest `MANIFEST`.

    Only what vlcp wrote is ever replaced or removed: an entry of `path` is replaced when it is
    in the manifest of an earlier atomic_dir, and entries that the manifest lists but the block
    no longer wrote are removed; every other entry (a user's README.md, their datasets) stays.
    A name the block wrote that already exists in `path` without being in the manifest is an
    error naming it, raised before anything is published."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise VlcpError(f"{path}: exists and is not a folder; vlcp writes a folder of outputs there")
    check_folder(path.parent, str(path))
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        yield tmp
        ours = set(_manifest(path))
        names = sorted(e.name for e in tmp.iterdir())
        clash = [n for n in names if (path / n).exists() or (path / n).is_symlink()]
        foreign = [n for n in clash if n not in ours]
        if foreign:
            raise VlcpError(f"{path / foreign[0]}: exists and was not written by vlcp; move it away or write "
                            "the outputs to another folder (nothing was changed)")
        path.mkdir(exist_ok=True)
        for name in sorted(names, key=lambda n: (n in last, last.index(n) if n in last else 0, n)):
            _replace_entry(tmp / name, path / name)
        for name in sorted(ours - set(names)):   # outputs of an earlier call that this one no longer writes
            _remove_entry(path / name)
        (tmp / MANIFEST).write_text(json.dumps(names) + "\n")
        os.replace(tmp / MANIFEST, path / MANIFEST)
    except (OSError, RuntimeError) as e:
        full = disk_full(e, path, tmp)
        if full is None:
            raise
        raise full from e
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _manifest(folder: Path) -> list[str]:
    try:
        names = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str) and n and "/" not in n and n not in (".", "..")] \
        if isinstance(names, list) else []


def _replace_entry(src: Path, dst: Path) -> None:
    if dst.is_dir() and not dst.is_symlink():   # a folder vlcp wrote before: swap, then drop the old one
        old = Path(tempfile.mkdtemp(prefix=f".{dst.name}.old.", dir=dst.parent))
        dst.rename(old / dst.name)
        src.rename(dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)


def _remove_entry(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """`obj` as strict JSON, atomically: NaN and ±inf (floats, numpy and torch scalars, at any
    depth) become null; `allow_nan=False`, so no bare NaN can ever be written."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_finite_json(obj), indent=1, sort_keys=False, default=_json_default,
                                  allow_nan=False) + "\n")


def _finite_json(o: Any) -> Any:
    """`o` with every non-finite float (Python, numpy or a torch scalar) as None, recursively."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple, set, frozenset)):
        return [_finite_json(v) for v in o]
    if isinstance(o, (np.number, np.bool_, np.ndarray)) or _is_tensor(o):
        return _finite_json(_json_default(o))
    return o


def _is_tensor(o: Any) -> bool:
    torch = sys.modules.get("torch")      # (never imported here: a torch scalar exists only if torch is loaded)
    return torch is not None and isinstance(o, torch.Tensor)


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer, np.bool_)):
        return o.item()
    if _is_tensor(o) and o.dim() == 0:
        return o.item()     # a torch scalar
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def results_checksum(results: dict) -> str:
    """sha256 over the canonical JSON (sorted keys, no spaces) of every entry of a results dict,
    as it reads back from its file, but `checksum` itself."""
    body = {k: v for k, v in results.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_results(path: str | os.PathLike, results: dict) -> None:
    """A run's `results.json` (as `write_json`), with a `checksum` entry (`results_checksum`) that
    `read_results` verifies."""
    body = json.loads(json.dumps(_finite_json(results), default=_json_default, allow_nan=False))   # as it reads back
    write_json(path, {**body, "checksum": results_checksum(body)})


def read_results(path: str | os.PathLike) -> dict:
    """A run's `results.json`, verified: a file that is not JSON, or whose `checksum` does not match
    its contents (edited by hand, damaged), is a `VlcpError` naming it. A file without a checksum
    (an older vlcp's) is read as it is."""
    path = Path(path)
    try:
        results = json.loads(path.read_text())
    except ValueError as e:
        raise VlcpError(f"{path}: is not a whole JSON file ({e}); re-run its experiment (or `dvc repro`) to "
                        "write it again") from None
    if not isinstance(results, dict):
        raise VlcpError(f"{path}: is not a run's results (a JSON object); re-run its experiment (or `dvc repro`)")
    if "checksum" in results and results["checksum"] != results_checksum(results):
        raise VlcpError(f"{path}: its checksum does not match its contents (edited or damaged after the run "
                        "wrote it); re-run its experiment (or `dvc repro`) to write it again")
    return results


def derive_seed(*parts: Any) -> int:
    """A stable 63-bit seed from any printable parts (independent of PYTHONHASHSEED)."""
    h = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def config_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=_json_default).encode()).hexdigest()[:16]
