"""The history file of a model kept current with `vlcp update` (`DIR/history.json`).

    {"format": 1,
     "model": {"name": open_clip architecture, "start": the weights the first update started from},
     "keep": ["NAME=PATH", ...],            the keep-sets (every update adds its own)
     "chunks": ["NAME=PATH", ...],          every chunk trained so far, in order
     "updates": [one entry per chunk: see `entries`]}

Each update's `before`/`after` hold every set's score and the averages over the sets that count at
that point: A_KA over the held-out slices of the chunks seen so far (this one included), A_ZS over
the keep-sets, GM = √(A_KA·A_ZS). The first update's `before` is θ0, the start of the trajectory.
"""
from __future__ import annotations

import datetime
from pathlib import Path

from vlcp.errors import VlcpError
from vlcp.eval import continual
from vlcp.utils import read_json, write_json

FORMAT = 1
NAME = "history.json"


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
    return {"format": FORMAT, "model": {"name": model, "start": start}, "keep": [], "chunks": [], "updates": []}


def entries(results: dict, first_index: int, recipe: str, run: str, trial: list[dict] | None) -> list[dict]:
    """One history entry per chunk of a user-stream run's `results`."""
    roles = results["datasets"]
    retention = [n for n, d in roles.items() if d["role"] == "retention"]
    earlier = [n for n, d in roles.items() if d["role"] == "adaptation" and n not in results["tasks"]]
    out, now = [], datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for t, chunk in enumerate(results["tasks"]):
        seen = earlier + [c for c in results["tasks"][: t + 1] if c in roles]
        before = results["zero_shot"] if t == 0 else results["trajectory"][t - 1]
        row = results["train"][t]
        out.append({
            "update": first_index + t, "chunk": chunk, "recipe": recipe, "method": results["config"]["method"],
            "seed": results["seed"], "steps": row["steps"], "samples": row["samples"], "seconds": row["seconds"],
            "flops": row["flops_per_step"] * row["steps"] + row["task_pass_flops"],
            "peak_memory_mb": row["peak_memory_mb"], "data": results["data"].get(chunk, {}),
            "before": continual.trade_off(before["datasets"], seen, retention),
            "after": continual.trade_off(results["trajectory"][t]["datasets"], seen, retention),
            "trial": trial if t == 0 else None, "run": run, "date": now})
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
