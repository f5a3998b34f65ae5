"""Small experiments the notebooks run live (`run_live = True`): params.yaml's experiments shrunk by `--set`
overrides, their data, base models and runs under `<project root>/.live/`, never where `dvc repro` writes."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import shutil
from pathlib import Path

from vlcp.errors import VlcpError
from vlcp.report import project_root
from vlcp.utils import read_json, read_results, write_json

# the DataCfg fields `vlcp.data.emoji.prepare_emoji` reads: a prepared folder is reused while they match
PREPARED_BY = ("benchmark", "styles", "image_size", "max_version", "seed", "split", "captions_per_item")


def missing_outputs(*paths: str | Path) -> list[str]:
    """Those of `paths` that hold nothing: a missing file, or a folder with no file anywhere below it."""
    return [str(p) for p in map(Path, paths) if not (p.is_file() or any(f.is_file() for f in p.rglob("*")))]


def missing_note(missing: list[str], stage: str, run_live: bool = False) -> str:
    """One markdown line: which outputs are missing, how to make them, and what runs instead."""
    then = ("the live section at the end runs (`run_live = True`)" if run_live else
            "or set `run_live = True` to run a small experiment live in this kernel instead (the last section)")
    shown = ", ".join(f"`{m}`" for m in missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return (f"**The pipeline's outputs are missing** ({shown}), so the report is skipped: "
            f"make them with `dvc repro {stage}` at the project root (or the whole study, `dvc repro`); {then}.")


def live_dir(root: str | Path | None = None) -> Path:
    return Path(root if root is not None else project_root()) / ".live"


def stamped(stamp_file: Path, stamp: dict, *outputs: Path) -> bool:
    """Whether `outputs` exist and were made with the settings `stamp_file` records as `stamp`."""
    return all(p.is_file() for p in (stamp_file, *outputs)) and read_json(stamp_file) == json.loads(json.dumps(stamp))


def prepare_data(params: dict, root: str | Path | None = None) -> Path:
    """The emoji benchmark for live runs, `.live/data/emoji`, reused while its data settings match."""
    from vlcp.config import resolve_data
    from vlcp.data.emoji import prepare_emoji

    cfg = resolve_data(params)
    if cfg.benchmark != "emoji":
        raise VlcpError(f"data.benchmark: the live experiments run on the embedded emoji benchmark; profile "
                        f"{params.get('profile', 'tiny')!r} uses {cfg.benchmark} (set profile: tiny)")
    out = live_dir(root) / "data" / "emoji"
    stamp = {k: v for k, v in dataclasses.asdict(cfg).items() if k in PREPARED_BY}
    if not stamped(out.with_name("emoji.json"), stamp, out / "meta.json", out / "images.npz"):
        prepare_emoji(cfg, out, progress=False)
        write_json(out.with_name("emoji.json"), stamp)
    return out


def live_params(params: dict, weights: dict[str, str | Path] | None = None) -> dict:
    """A copy of `params` whose profile model aliases (e.g. `cll`) load the given weights files (an
    alias's own `pretrained` wins over `--set model.pretrained=...`, so the alias is what to change)."""
    params, profile = copy.deepcopy(params), params.get("profile", "tiny")
    aliases = ((params.get("profiles") or {}).get(profile) or {}).get("model_aliases") or {}
    for alias, path in (weights or {}).items():
        if alias not in aliases:
            raise VlcpError(f"model alias {alias!r}: not in profile {profile!r} "
                            f"(known: {', '.join(aliases) or 'none'})")
        spec = aliases[alias]
        aliases[alias] = {**(spec if isinstance(spec, dict) else {"name": spec}),
                          "pretrained": None if path is None else str(path)}
    return params


def live_overrides(params: dict, overrides: list[str] = (), root: str | Path | None = None) -> list[str]:
    """Every live run's overrides (the live data, no progress bars, one thread: it shares the machine
    with Jupyter), then `overrides`."""
    return [f"data.root={json.dumps(str(prepare_data(params, root)))}", "train.progress=false",
            "train.num_threads=1", *overrides]


def resolve(params: dict, name: str, overrides: list[str] = (), seed: int = 0,
            weights: dict[str, str | Path] | None = None, root: str | Path | None = None):
    """Experiment `name` for a live run, with `overrides` (`--set` syntax) and `weights` (`live_params`)."""
    from vlcp.config import resolve_experiment

    return resolve_experiment(live_params(params, weights), name, seed, live_overrides(params, overrides, root))


def run(params: dict, name: str, overrides: list[str] = (), seed: int = 0,
        weights: dict[str, str | Path] | None = None, root: str | Path | None = None) -> dict:
    """Train and evaluate experiment `name` afresh into `.live/runs/<name>/seed<S>/`; its results dict."""
    from vlcp.run import run_experiment

    live, cfg = live_dir(root), resolve(params, name, overrides, seed, weights, root)
    return run_experiment(cfg, live / "runs" / name / f"seed{seed}", live / "checkpoints" / name / f"seed{seed}",
                          resume=False)


def pretrain(params: dict, name: str, overrides: list[str] = (), seed: int = 0,
             root: str | Path | None = None) -> Path:
    """The weights file `.live/models/<name>.pt` of experiment `name` pretrained as `vlcp pretrain` does,
    reused while the config it was trained with matches (`.live/models/<name>.json`)."""
    from vlcp.run import pretrain as pretrain_base

    live, cfg = live_dir(root), resolve(params, name, overrides, seed, root=root)
    out, stamp_file = live / "models" / f"{name}.pt", live / "models" / f"{name}.json"
    if not stamped(stamp_file, cfg.to_dict(), out):
        runs, checkpoints = live / "runs-base" / name, live / "checkpoints-base" / name
        for earlier in (runs, checkpoints):   # never resume another config's run
            shutil.rmtree(earlier, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.redirect_stdout(io.StringIO()):   # the run's per-task lines
            pretrain_base(cfg, out, runs / f"seed{seed}", checkpoints / f"seed{seed}")
        write_json(stamp_file, cfg.to_dict())
    return out


def benchmark_common(root: str | Path | None = None):
    """The project's `benchmarks/common.py` (the paired-cost code), imported as a module."""
    import importlib.util

    path = live_dir(root).parent / "benchmarks" / "common.py"
    if not path.is_file():
        raise VlcpError(f"{path}: not found; the live cost measurement runs the benchmarks' own code "
                        "(a vlcp checkout has it)")
    spec = importlib.util.spec_from_file_location("vlcp_benchmarks_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def paired_cost(params: dict, experiments: list[str], repeats: int = 3, overrides: list[str] = (), seed: int = 0,
                root: str | Path | None = None) -> tuple[dict, dict[str, list[dict]]]:
    """Time `experiments` (the first is the reference) live as `benchmarks/*_cost.py` do, in `.live/performance/`:
    (the summary, as `benchmarks/results/*_cost.json`; {experiment: [results]})."""
    from vlcp.report.results import flops_per_step, step_time

    common, work = benchmark_common(root), live_dir(root) / "performance"
    shutil.rmtree(work, ignore_errors=True)
    summary = common.paired_step_times(params, list(experiments), repeats, seed, work, step_time,
                                       lambda r: {"flops_per_step": flops_per_step(r)},
                                       live_overrides(params, overrides, root))
    return common.with_flop_ratio(summary), {e: [read_results(work / f"rep{i}" / e / "run" / "results.json")
                                                 for i in range(repeats)] for e in experiments}
