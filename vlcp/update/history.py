"""The history file of a model kept current with `vlcp update` (`DIR/history.json`).

    {"format": 1,
     "model": {"name": open_clip architecture, "start": the weights the first update started from},
     "keep": ["NAME=PATH", ...],            the keep-sets (every update adds its own)
     "chunks": ["NAME=PATH", ...],          every chunk trained so far, in order
     "relative": {"NAME": "PATH", ...},     where a source inside the folder's project is, from the folder
     "read": {"holdout": 0.1, ...},         how the sources were read and scored (`vlcp.update.READ_OPTIONS`):
                                            a continued update and `vlcp eval DIR` use them unless given others
     "updates": [one entry per chunk: see `entries`]}

PATHs are absolute; a source inside the folder's project (the nearest folder above it holding
`.git`, `.dvc` or `dvc.yaml`, else the folder's parent) is also kept relative to the folder
(`resolve` tries both). Each entry's `data` holds its chunk's `fingerprint`: a later read refuses
a chunk that changed (`fingerprints`). Each entry's `before`/`after` hold every set's score and
A_KA (the held-out slices of the chunks so far), A_ZS (the keep-sets), GM = √(A_KA·A_ZS), with
their 95 % sampling half-widths under `halfwidth`; the first `before` is θ0. An unfinished update
leaves `pending.json` (`begin`, `finish`).
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

from vlcp.errors import VlcpError
from vlcp.eval import continual
from vlcp.utils import read_json, write_json

FORMAT = 1
NAME = "history.json"
PENDING = "pending.json"


def load_history(folder: str | Path) -> dict | None:
    """The history in `folder` (None if there is none); a malformed one is an error naming the file."""
    path = Path(folder) / NAME
    if not path.exists():
        return None
    try:
        h = read_json(path)
    except ValueError as e:
        raise VlcpError(f"{path}: not a readable update history ({e})") from None
    if not isinstance(h, dict) or h.get("format") != FORMAT or not isinstance(h.get("updates"), list) \
            or not isinstance(h.get("model"), dict):
        raise VlcpError(f"{path}: not an update history of format {FORMAT} (written by vlcp update)")
    return h


def new_history(model: str, start: str | None) -> dict:
    return {"format": FORMAT, "model": {"name": model, "start": start}, "keep": [], "chunks": [], "relative": {},
            "updates": []}


# -- where the sources are: absolute, and relative to the folder inside its project ---------------

def _exists(path: str) -> bool:
    """A source's path exists (a shard pattern such as `shards/{000..009}.tar`: its folder does)."""
    p = Path(path)
    return (p.parent if "{" in path or "*" in path else p).exists()


def project_root(folder: str | Path) -> Path:
    """The folder's project: the nearest folder above it with `.git`, `.dvc` or `dvc.yaml`, else its parent."""
    folder = Path(folder).resolve()
    for up in folder.parents:
        if any((up / m).exists() for m in (".git", ".dvc", "dvc.yaml")):
            return up
    return folder.parent


def anchor(spec: str, folder: str | Path) -> tuple[str, str | None]:
    """`[NAME=]PATH` as written by a user (PATH from the current folder) -> ("NAME=ABSOLUTE", the path
    relative to `folder` when the source is inside the folder's project, else None)."""
    from vlcp.run.streams.user import parse_source

    src = parse_source(spec)
    path = Path(src.path)
    absolute = (path if path.is_absolute() else Path.cwd() / path).resolve()
    rel = None
    root = project_root(folder)
    if absolute == root or root in absolute.parents:
        rel = os.path.relpath(absolute, Path(folder).resolve())
    return f"{src.name}={absolute}", rel


def resolve(spec: str, folder: str | Path, relative: dict, moved: dict, what: str) -> str:
    """A history source as "NAME=PATH" that exists now: `moved[NAME]` (the user's --moved / a
    --keep of the same name), else the stored path (absolute; an older history's relative one is
    read from the current folder), else the folder-relative one; else an error naming it."""
    from vlcp.run.streams.user import parse_source

    src = parse_source(spec)
    if src.name in moved:
        return f"{src.name}={moved[src.name]}"
    tried = [src.path]
    if _exists(src.path):
        return f"{src.name}={src.path}"
    rel = relative.get(src.name)
    if rel is not None:
        here = os.path.normpath(Path(folder) / rel)
        tried.append(here)
        if _exists(here):
            return f"{src.name}={here}"
    raise VlcpError(f"{Path(folder) / NAME}: the {what} {src.name!r} is not at " + " nor at ".join(tried)
                    + f"; if it moved, point at it with --moved {src.name}=PATH")


# -- an update that has not finished ------------------------------------------------------------

def load_pending(folder: str | Path) -> dict | None:
    """The folder's unfinished update as `begin` wrote it (None if there is none); a file that is not
    that (unreadable JSON, a list, no `command` or `update`) is an error naming it and what to do."""
    path = Path(folder) / PENDING
    if not path.exists():
        return None
    again = "delete it and the folder's unfinished runs/ to start over"
    try:
        pending = read_json(path)
    except ValueError as e:
        raise VlcpError(f"{path}: not readable ({e}); {again}") from None
    if not isinstance(pending, dict) or not isinstance(pending.get("command"), dict) \
            or not isinstance(pending.get("update"), int) or isinstance(pending.get("update"), bool):
        raise VlcpError(f"{path}: not an unfinished update written by vlcp update (an object with its 'update' and "
                        f"'command'); {again}")
    return pending


def begin(folder: str | Path, update: int, command: dict) -> None:
    """Mark update `update` of `folder` as started by `command` (its identity: model, weights,
    chunks, recipe, seed), until `finish`."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    write_json(Path(folder) / PENDING, {"format": FORMAT, "update": update, "started": now, "command": command})


def finish(folder: str | Path) -> None:
    (Path(folder) / PENDING).unlink(missing_ok=True)


def pending_line(folder: str | Path, pending: dict) -> str:
    """One line saying which update of `folder` has not finished and how to resume it."""
    c = pending.get("command", {})
    chunks = ", ".join(x.partition("=")[0] for x in c.get("chunks", []))
    return (f"{folder}: update {pending.get('update')} ({chunks}; recipe {c.get('recipe')}, started "
            f"{pending.get('started')}) has not finished: run the same vlcp update command to resume it")


def halfwidths(row: dict, datasets: dict[str, dict], adaptation=None) -> dict:
    """`continual.trade_off_halfwidths` of a `trade_off` row over a run's sets (`datasets`:
    {name: {"role", "n"}}, as results.json and the stream's `environment` hold them); `adaptation`:
    the held-out slices that count (default: every one)."""
    if adaptation is None:
        adaptation = [n for n, d in datasets.items() if d["role"] == "adaptation"]
    return continual.trade_off_halfwidths(row, {n: d.get("n") for n, d in datasets.items()}, list(adaptation),
                                          [n for n, d in datasets.items() if d["role"] == "retention"])


def entries(results: dict, first_index: int, recipe: str, run: str, trial: list[dict] | None) -> list[dict]:
    """One history entry per chunk of a user-stream run's `results`."""
    roles = results["datasets"]
    retention = [n for n, d in roles.items() if d["role"] == "retention"]
    earlier = [n for n, d in roles.items() if d["role"] == "adaptation" and n not in results["tasks"]]
    out, now = [], datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    def scored(datasets, seen):
        row = continual.trade_off(datasets, seen, retention)
        return {**row, "halfwidth": halfwidths(row, roles, seen)}

    for t, chunk in enumerate(results["tasks"]):
        seen = earlier + [c for c in results["tasks"][: t + 1] if c in roles]
        before = results["zero_shot"] if t == 0 else results["trajectory"][t - 1]
        row = results["train"][t]
        out.append({
            "update": first_index + t, "chunk": chunk, "recipe": recipe, "method": results["config"]["method"],
            "seed": results["seed"], "steps": row["steps"], "samples": row["samples"], "seconds": row["seconds"],
            "flops": row["flops_per_step"] * row["steps"] + row["task_pass_flops"],
            "peak_memory_mb": row["peak_memory_mb"], "data": results["data"].get(chunk, {}),
            "sizes": {n: roles[n].get("n") for n in (*seen, *retention)},
            "before": scored(before["datasets"], seen), "after": scored(results["trajectory"][t]["datasets"], seen),
            "trial": trial if t == 0 else None, "run": run, "date": now})
    return out


def fingerprints(history: dict) -> dict[str, dict]:
    """{chunk: {"update": N, "fingerprint": ...}}: what each chunk held when its update read it (the
    entry's `data.fingerprint`, `vlcp.data.formats.layouts.fingerprint`), as `UpdateCfg.fingerprints`
    takes it; an entry written before fingerprints has none, and its chunk is read as before."""
    out = {}
    for u in history["updates"]:
        fp = (u.get("data") or {}).get("fingerprint")
        if isinstance(fp, dict) and "sha256" in fp:
            out[u["chunk"]] = {"update": u["update"], "fingerprint": fp}
    return out


def write_history(folder: str | Path, history: dict) -> Path:
    path = Path(folder) / NAME
    write_json(path, history)   # atomic
    return path


def trajectory(history: dict) -> list[dict]:
    """The accumulation–retention points: θ0 (the first update's `before`), then each update's `after`."""
    ups = history["updates"]
    if not ups:
        return []
    pts = [{"label": "θ0", "A_KA": ups[0]["before"]["A_KA"], "A_ZS": ups[0]["before"]["A_ZS"]}]
    return pts + [{"label": f"{u['update']}: {u['chunk']}", "A_KA": u["after"]["A_KA"], "A_ZS": u["after"]["A_ZS"],
                   "recipe": u["recipe"]} for u in ups]
