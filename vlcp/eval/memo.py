"""The starting model's evaluation, computed once per process for the runs that start from the same model.

A study's runs in one process (`vlcp run --list`, each `--jobs` worker) mostly start from one
model: FoMo-in-Flux's θ0 and CTP's initialisation are weights files, the spine's and IncCLIP's
models a seeded initialisation, and most methods leave them as they are before the first task.
Such a run's first evaluation repeats an earlier one. `starting_point` returns a copy of that
one when the evaluation's inputs (`key`: the data, evaluation config, device and threads, as the
stream spells them) and the model, bit for bit with its module attributes (`Snapshot`), are the
same; the language stream memoises its own (`vlcp.run.streams.language.zero_shot`).
"""
from __future__ import annotations

import copy
import json
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import torch

from vlcp.config import ExperimentCfg
from vlcp.eval.encode import Snapshot


KEPT = 4   # model states kept per key, most recently used first (each a copy of a model on the CPU)


@lru_cache(maxsize=1)
def _held(key: str) -> list:
    """[(Snapshot, evaluation)]: the starting models last evaluated under `key` in this process, most
    recently used first; a new key replaces them."""
    return []


def starting_point(key: str, model: torch.nn.Module, evaluate: Callable[[], Any]) -> Any:
    """`evaluate()` of `model`, or a copy of an evaluation this process made under `key` of a model in
    the same state (`Snapshot.matches`; the `KEPT` latest states: a study's adapters and prepared
    variants do not evict θ0). `key`: everything else the evaluation reads (a string, compared by value)."""
    held = _held(key)
    for i, (state, out) in enumerate(held):
        if state.matches(model):
            held.insert(0, held.pop(i))
            return copy.deepcopy(out)
    state = Snapshot(model)
    out = evaluate()
    held[:] = [(state, copy.deepcopy(out)), *held[:KEPT - 1]]
    return out


def _stamp(path: str | Path) -> tuple | None:
    p = Path(path)
    return (p.stat().st_mtime_ns, p.stat().st_size) if p.is_file() else None


def evaluation_key(cfg: ExperimentCfg, device, **parts) -> str:
    """What a starting model's evaluation reads besides the model, as a `starting_point` key: the
    data config and the prepared benchmark's stamp, the evaluation config, the model's name and
    weights file (with its stamp: its tokenizer), the device, the precision and torch's math
    settings, its thread count (matmul results may differ in their last bits between thread counts)
    and the stream's own `parts` (config blocks its evaluation sets are built from)."""
    math = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
            torch.get_float32_matmul_precision())
    return json.dumps({"data": asdict(cfg.data), "data_stamp": _stamp(Path(cfg.data.root) / "meta.json"),
                       "eval": asdict(cfg.eval), "model": [cfg.model.name, cfg.model.pretrained,
                                                           _stamp(cfg.model.pretrained or "")],
                       "device": str(device), "precision": cfg.train.precision, "math": math,
                       "threads": torch.get_num_threads(), **parts}, sort_keys=True, default=str)
