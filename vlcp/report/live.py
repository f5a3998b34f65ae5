"""Small experiments the notebooks run live (`run_live = True`), with no pipeline output needed.

Everything here lives under `<project root>/.live/` (git-ignored, no DVC output): the emoji
benchmark prepared once for the live runs (`prepare_data`, reused while the data settings match),
base models pretrained as `vlcp pretrain` does (`pretrain`, reused while their config matches),
and the live runs themselves (`run`, through `vlcp.run.run_experiment`). Nothing is read from or
written to data/emoji, runs*/, models/ or reports/, which `dvc repro` owns. Experiments are the
ones params.yaml defines, shrunk with `--set`-style overrides (fewer tasks, fewer steps).
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import shutil
from pathlib import Path

from vlcp.errors import VlcpError
from vlcp.report import project_root

LIVE = ".live"
# the DataCfg fields `vlcp.data.emoji.prepare_emoji` reads: a prepared folder is reused while they match
PREPARED_BY = ("benchmark", "styles", "image_size", "max_version", "seed", "split", "captions_per_item")


def missing_outputs(*paths: str | Path) -> list[str]:
    """Those of `paths` (pipeline outputs a report reads) that hold nothing: a file that does not
    exist, or a folder that does not exist or has no file anywhere below it."""
    def present(p: Path) -> bool:
        return p.is_file() or (p.is_dir() and any(f.is_file() for f in p.rglob("*")))
    return [str(p) for p in paths if not present(Path(p))]


def missing_note(missing: list[str], stage: str, run_live: bool = False) -> str:
    """One markdown line: which pipeline outputs are missing, how to make them, and what runs instead."""
    then = ("the live section at the end runs (`run_live = True`)" if run_live else
            "or set `run_live = True` to run a small experiment live in this kernel instead (the last section)")
    shown = ", ".join(f"`{m}`" for m in missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return (f"**The pipeline's outputs are missing** ({shown}), so the report is skipped: "
            f"make them with `dvc repro {stage}` at the project root (or the whole study, `dvc repro`); {then}.")


def live_dir(root: str | Path | None = None) -> Path:
    """`<project root>/.live`: the live runs' data, base models and results (git-ignored)."""
    return Path(root if root is not None else project_root()) / LIVE


def _yaml(value) -> str:
    """`value` as an override's right-hand side (JSON is YAML: a path with ': ' or '#' stays one string)."""
    return json.dumps(str(value)) if isinstance(value, (str, Path)) else json.dumps(value)


def prepare_data(params: dict, root: str | Path | None = None) -> Path:
    """The emoji benchmark for live runs, `.live/data/emoji` (data settings: params.yaml's defaults
    and profile): prepared once (`vlcp data prepare`'s code, a few seconds), then reused while the
    settings it was prepared with match (`.live/data/emoji.json`)."""
    import dataclasses

    from vlcp.config import resolve_data
    from vlcp.data.emoji import prepare_emoji
    from vlcp.utils import read_json, write_json

    cfg = resolve_data(params)
    if cfg.benchmark != "emoji":
        raise VlcpError(f"data.benchmark: the live experiments run on the embedded emoji benchmark; profile "
                        f"{params.get('profile', 'tiny')!r} uses {cfg.benchmark} (set profile: tiny)")
    out = live_dir(root) / "data" / "emoji"
    stamp_file = out.with_name("emoji.json")
    stamp = json.loads(json.dumps({k: v for k, v in dataclasses.asdict(cfg).items() if k in PREPARED_BY}))
    if (out / "meta.json").is_file() and (out / "images.npz").is_file() and stamp_file.is_file() \
            and read_json(stamp_file) == stamp:
        return out
    prepare_emoji(cfg, out, progress=False)
    write_json(stamp_file, stamp)
    return out


def live_params(params: dict, weights: dict[str, str | Path] | None = None) -> dict:
    """A copy of `params` whose profile model aliases (e.g. `cll`, `fomo`, `albef`) load the given
    weights files instead of the pipeline's models/*.pt. An alias's own `pretrained` wins over a
    `--set model.pretrained=...` in `vlcp.config.resolve_experiment`, so the alias is what to change."""
    params = copy.deepcopy(params)
    if weights:
        profile = params.get("profile", "tiny")
        aliases = ((params.get("profiles") or {}).get(profile) or {}).get("model_aliases") or {}
        for alias, path in weights.items():
            if alias not in aliases:
                raise VlcpError(f"model alias {alias!r}: not in profile {profile!r} (known: {', '.join(aliases) or 'none'})")
            spec = aliases[alias]
            aliases[alias] = {**(spec if isinstance(spec, dict) else {"name": spec}),
                              "pretrained": None if path is None else str(path)}
    return params


def live_overrides(params: dict, overrides: list[str] = (), root: str | Path | None = None) -> list[str]:
    """The overrides of every live run, then `overrides`: the live data (`prepare_data`), no progress
    bars, and one thread. A live run shares the machine with Jupyter and whatever else runs there;
    on a busy 2-core machine two torch threads that compete with other processes for the cores
    ran a small run 4-8x slower than one thread did (`train.num_threads=2` in `overrides` undoes it)."""
    return [f"data.root={_yaml(prepare_data(params, root))}", "train.progress=false", "train.num_threads=1",
            *overrides]


def resolve(params: dict, name: str, overrides: list[str] = (), seed: int = 0,
            weights: dict[str, str | Path] | None = None, root: str | Path | None = None):
    """Experiment `name` of params.yaml for a live run: on the live data (`prepare_data`), without
    progress bars, with `overrides` (`--set` syntax, e.g. "train.steps=60") and the model aliases
    in `weights` loading the given files (`live_params`)."""
    from vlcp.config import resolve_experiment

    return resolve_experiment(live_params(params, weights), name, seed, live_overrides(params, overrides, root))


def run(params: dict, name: str, overrides: list[str] = (), seed: int = 0,
        weights: dict[str, str | Path] | None = None, root: str | Path | None = None) -> dict:
    """Train and evaluate experiment `name` live (`resolve`, then `vlcp.run.run_experiment`):
    results in `.live/runs/<name>/seed<S>/results.json`, checkpoints in `.live/checkpoints/`; every
    call trains afresh. Returns the results dict, the same the report reads from runs*/."""
    from vlcp.run import run_experiment

    cfg = resolve(params, name, overrides, seed, weights, root)
    live = live_dir(root)
    return run_experiment(cfg, live / "runs" / name / f"seed{seed}", live / "checkpoints" / name / f"seed{seed}",
                          resume=False)


def pretrain(params: dict, name: str, overrides: list[str] = (), seed: int = 0,
             root: str | Path | None = None) -> Path:
    """A base model for the live runs: experiment `name` (shrunk by `overrides`) pretrained as
    `vlcp pretrain` does (`vlcp.run.pretrain`) into `.live/models/<name>.pt` (its run in
    `.live/runs-base/`); reused while the resolved config it was trained with matches
    (`.live/models/<name>.json`). Returns the weights file."""
    from vlcp.run import pretrain as pretrain_base
    from vlcp.utils import read_json, write_json

    live = live_dir(root)
    cfg = resolve(params, name, overrides, seed, root=root)
    out, stamp_file = live / "models" / f"{name}.pt", live / "models" / f"{name}.json"
    stamp = json.loads(json.dumps(cfg.to_dict()))
    if out.is_file() and stamp_file.is_file() and read_json(stamp_file) == stamp:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    runs, checkpoints = live / "runs-base" / name, live / "checkpoints-base" / name
    for earlier in (runs, checkpoints):   # never resume another config's run
        shutil.rmtree(earlier, ignore_errors=True)
    with contextlib.redirect_stdout(io.StringIO()):   # the run's per-task lines
        pretrain_base(cfg, out, runs / f"seed{seed}", checkpoints / f"seed{seed}")
    write_json(stamp_file, stamp)
    return out


def benchmark_common(root: str | Path | None = None):
    """`benchmarks/common.py` of the project (the paired-cost code every `benchmarks/*_cost.py`
    runs), imported as a module."""
    import importlib.util

    path = Path(root if root is not None else project_root()) / "benchmarks" / "common.py"
    if not path.is_file():
        raise VlcpError(f"{path}: not found; the live cost measurement runs the benchmarks' own code (a vlcp checkout has it)")
    spec = importlib.util.spec_from_file_location("vlcp_benchmarks_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def paired_cost(params: dict, experiments: list[str], repeats: int = 3, overrides: list[str] = (), seed: int = 0,
                root: str | Path | None = None) -> tuple[dict, dict[str, list[dict]]]:
    """Time `experiments` (the first is the reference) live as `benchmarks/*_cost.py` do
    (`benchmarks/common.py`: interleaved repeats in this process, seconds per step over the tasks
    after the first, each ratio paired with the same repeat's reference run, beside the FLOP ratio),
    on the live data with `overrides`; runs in `.live/performance/`. Returns (the summary, the same
    fields as `benchmarks/results/*_cost.json`; {experiment: [results of each repeat]})."""
    from vlcp.report.results import flops_per_step, step_time
    from vlcp.utils import read_results

    common = benchmark_common(root)
    work = live_dir(root) / "performance"
    shutil.rmtree(work, ignore_errors=True)
    summary = common.paired_step_times(params, list(experiments), repeats, seed, work, step_time,
                                       lambda r: {"flops_per_step": flops_per_step(r)},
                                       live_overrides(params, overrides, root))
    runs = {e: [read_results(work / f"rep{i}" / e / "run" / "results.json") for i in range(repeats)] for e in experiments}
    return common.with_flop_ratio(summary), runs
