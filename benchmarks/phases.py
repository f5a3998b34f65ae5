"""Where a repro's time goes: every run's `run_seconds` summed per DVC stage and in all.

    .venv/bin/python benchmarks/phases.py [ROOT] [--pipeline benchmarks/results/pipeline.json] \
        [--lock] [--out benchmarks/results/phases.json]

ROOT (default: this checkout) is a clone after `dvc repro`. Each run's results.json under a stage's
outs (every dvc.yaml of ROOT, as DVC resolves them; `--lock`: the outs recorded in ROOT's dvc.lock
and long/dvc.lock instead, without importing DVC) is charged to that stage, and so is any other
under ROOT's runs*/ folders that a stage's out holds; one no stage holds is listed as unmapped.
Per stage: its runs, seconds per phase (`vlcp.run.timing.PHASES`: process start, imports, data,
build, FLOP counting, the zero-shot, per-task and final evaluations, training, checkpoints, other)
and their total; with `--pipeline` (benchmarks/pipeline.py's JSON, its `stages` wall times) also the
stage's wall time and what the runs leave unaccounted: wall time × the stage's worker processes
(`--jobs N` in its command, at most its runs) less the runs' seconds (DVC's own start, the parent
process of `--jobs`, results writes, a worker idle at the end). A results.json without
`run_seconds` (written before it) counts its training and evaluation seconds and puts the rest of
its wall time in `other` (its stage's `legacy_runs`). Writes --out and prints the table.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from vlcp.run.timing import PHASES, RunSeconds  # noqa: E402
from vlcp.utils import write_json  # noqa: E402

LOCKS = ("dvc.lock", "long/dvc.lock")
UNMAPPED = "(no stage)"


def workers_of(cmd: str | list) -> int:
    """The worker processes a stage's command runs its runs on: `--jobs N`, else 1."""
    m = re.search(r"--jobs[ =](\d+)", " ".join(cmd) if isinstance(cmd, list) else cmd or "")
    return int(m.group(1)) if m else 1


def stages_from_dvc(root: Path) -> dict[str, dict]:
    """{stage: {"outs": [absolute paths], "workers": n}} of every dvc.yaml in `root`, as DVC
    resolves them (matrix, foreach, vars); names as `dvc repro` prints them."""
    from dvc.repo import Repo

    root = root.resolve()

    def name(stage) -> str:   # as `dvc repro` in `root` prints it: the top dvc.yaml's bare, others' file:stage
        spec = Path(stage.dvcfile.path).resolve().relative_to(root)
        return stage.name if spec == Path("dvc.yaml") else f"{spec}:{stage.name}"

    with Repo(str(root)) as repo:
        return {name(s): {"outs": [Path(o.fs_path) for o in s.outs], "workers": workers_of(s.cmd)}
                for s in repo.index.stages}


def stages_from_locks(root: Path) -> dict[str, dict]:
    """The same from the lock files a repro leaves (`LOCKS`): each stage's recorded outs, relative
    to its working directory (`wdir` in the dvc.yaml beside the lock)."""
    import yaml

    out = {}
    for name in LOCKS:
        lock = root / name
        if not lock.is_file():
            continue
        spec = root / Path(name).parent / "dvc.yaml"
        defs = (yaml.safe_load(spec.read_text()) or {}).get("stages", {}) if spec.is_file() else {}
        prefix = "" if Path(name).parent == Path(".") else f"{Path(name).parent / 'dvc.yaml'}:"
        for stage, entry in ((yaml.safe_load(lock.read_text()) or {}).get("stages") or {}).items():
            base = defs.get(stage.split("@")[0]) or {}
            wdir = base.get("wdir") or (base.get("do") or {}).get("wdir") or "."
            here = (lock.parent / wdir).resolve()
            out[prefix + stage] = {"outs": [here / o["path"] for o in entry.get("outs") or []],
                                   "workers": workers_of(entry.get("cmd", ""))}
    if not out:
        raise SystemExit(f"phases.py: no lock file ({', '.join(LOCKS)}) in {root}: run it after `dvc repro`, "
                         "or without --lock")
    return out


def results_files(root: Path, stages: dict[str, dict]) -> list[Path]:
    """Every results.json under a stage's outs and under `root`'s runs*/ folders, once each."""
    found = {p.resolve() for s in stages.values() for o in s["outs"]
             for p in ([o] if o.name == "results.json" else o.rglob("results.json") if o.is_dir() else [])
             if p.is_file()}
    found |= {p.resolve() for d in root.glob("runs*") if d.is_dir() for p in d.rglob("results.json")}
    return sorted(found)


def stage_of(path: Path, stages: dict[str, dict]) -> str:
    """The stage whose out holds `path` (the innermost, if outs nest), else `UNMAPPED`."""
    best, depth = UNMAPPED, -1
    for name, s in stages.items():
        for o in s["outs"]:
            o = o.resolve()
            if (path == o or o in path.parents) and len(o.parts) > depth:
                best, depth = name, len(o.parts)
    return best


def run_phases(results: dict) -> tuple[RunSeconds, bool]:
    """A run's seconds per phase, and whether they were estimated (a results.json without
    `run_seconds`: its training and evaluation seconds, the rest of its wall time as `other`)."""
    if "run_seconds" in results:
        return RunSeconds.from_dict(results["run_seconds"]), False
    train = sum(t.get("seconds", 0.0) for t in results.get("train") or [])
    ev = sum(t.get("eval_seconds", 0.0) for t in results.get("train") or [])
    return RunSeconds(train=train, eval=ev, other=max(0.0, results.get("wall_seconds", 0.0) - train - ev)), True


def row(phases: RunSeconds, runs: int, legacy: int, workers: int, wall: float | None) -> dict:
    seconds = phases.to_dict()
    total = round(sum(seconds.values()), 3)
    r = {"runs": runs, "legacy_runs": legacy, "workers": workers, "seconds": seconds, "total": total,
         "stage_seconds": wall, "unaccounted_seconds": None}
    if wall is not None:
        r["unaccounted_seconds"] = round(wall * max(1, min(workers, runs)) - total, 3)
    return r


def summarize(root: Path, stages: dict[str, dict], walls: dict[str, float] | None = None) -> dict:
    """The phase table: {"stages": {stage: row}, "all": row, "unmapped": [paths], "skipped": n}.
    A row: runs, legacy_runs, workers, seconds per phase, their total, and with `walls` (stage wall
    seconds) stage_seconds and unaccounted_seconds. A results.json without an `experiment` (a base
    stage's note that it was not trained) is skipped."""
    walls = walls or {}
    per: dict[str, list] = {}
    unmapped, skipped = [], 0
    for path in results_files(root, stages):
        try:
            results = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"phases.py: {path}: unreadable ({e})") from None
        if "experiment" not in results:
            skipped += 1
            continue
        stage = stage_of(path, stages)
        if stage == UNMAPPED:
            unmapped.append(str(path.relative_to(root.resolve())))
        phases, legacy = run_phases(results)
        per.setdefault(stage, []).append((phases, legacy))
    rows = {}
    for stage in sorted(per, key=lambda s: (s == UNMAPPED, list(stages).index(s) if s in stages else 0)):
        runs = per[stage]
        total = sum((p for p, _ in runs), RunSeconds())
        workers = stages[stage]["workers"] if stage in stages else 1
        rows[stage] = row(total, len(runs), sum(lg for _, lg in runs), workers, walls.get(stage))
    every = sum((p for runs in per.values() for p, _ in runs), RunSeconds())
    timed = [r for r in rows.values() if r["stage_seconds"] is not None]
    all_row = row(every, sum(len(r) for r in per.values()), sum(lg for r in per.values() for _, lg in r), 1, None)
    if timed:
        all_row["stage_seconds"] = round(sum(r["stage_seconds"] for r in timed), 3)
        all_row["unaccounted_seconds"] = round(sum(r["unaccounted_seconds"] for r in timed), 3)
    return {"stages": rows, "all": all_row, "unmapped": unmapped, "skipped": skipped}


SHORT = {"process_start": "start", "imports": "import", "zero_shot_eval": "zs_eval", "checkpoint": "ckpt"}


def table(summary: dict) -> str:
    """The summary as a text table, seconds with one decimal (- where unknown)."""
    heads = ["stage", "runs", *[SHORT.get(p, p) for p in PHASES], "total", "stage_s", "unacc"]
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    lines = [[name, str(r["runs"]), *[fmt(r["seconds"][p]) for p in PHASES], fmt(r["total"]),
              fmt(r["stage_seconds"]), fmt(r["unaccounted_seconds"])]
             for name, r in [*summary["stages"].items(), ("all", summary["all"])]]
    widths = [max(len(x) for x in col) for col in zip(heads, *lines)]
    return "\n".join(" ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(cells, widths)))
                     for cells in [heads, *lines])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(ROOT), help="a clone after `dvc repro`")
    ap.add_argument("--pipeline", default=None, help="benchmarks/pipeline.py's JSON: the stages' wall times")
    ap.add_argument("--lock", action="store_true", help="stages and outs from dvc.lock and long/dvc.lock "
                                                        "(without DVC) instead of the dvc.yaml files")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "phases.json"))
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    stages = stages_from_locks(root) if args.lock else stages_from_dvc(root)
    walls = None
    if args.pipeline:
        walls = json.loads(Path(args.pipeline).read_text()).get("stages")
        if not isinstance(walls, dict):
            raise SystemExit(f"phases.py: {args.pipeline}: no `stages` (stage: wall seconds)")
    summary = summarize(root, stages, walls)
    from common import git_commit, provenance   # (benchmarks/common.py)

    write_json(args.out, {"what": "every run's run_seconds (results.json) summed per DVC stage and in all",
                          "root": str(root), "root_commit": git_commit(root), "phases": list(PHASES),
                          "pipeline": args.pipeline, **summary, **provenance()})
    print(table(summary))
    if summary["unmapped"]:
        print(f"{len(summary['unmapped'])} results.json in no stage's outs: {', '.join(summary['unmapped'][:5])}")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
