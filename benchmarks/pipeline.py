"""Time the default pipeline: `dvc repro` from scratch in a fresh clone, then a no-op `dvc repro`.

    .venv/bin/python benchmarks/pipeline.py [--out benchmarks/results/pipeline.json] [--workdir DIR]
    .venv/bin/python benchmarks/pipeline.py --workdir DIR --resume   # go on with a repro that was stopped
    .venv/bin/python benchmarks/pipeline.py --targets ctp_tables run@seqf-0 run@seqf-1 run@seqf-2 \
        --out benchmarks/results/pipeline-ctp.json   # one study's stages (and the spine SeqF runs: the pace)

Writes per-stage wall times (from DVC's stage boundaries in the log), the total and the no-op
time, with the machine's description and its pace at both ends: the spine's SeqF runs early in the
repro, and one more SeqF run after it (`pace_probe`). The overview report shows the latest file.

A repro that is stopped (a session that ends) can go on with --resume: the stages it finished
are kept in DIR/pipeline-partial.json as they finish, DVC skips them, and the stage that was
cut off reruns whole: its runs' checkpoints (DIR/checkpoints, which no finished stage needs) are
removed first, or its runs would resume from them and time only their rest. The total is then the
sum of whole stages, and `attempts` says so: each attempt lists the stages it finished
(`stage_names`), and a resumed one starts with a pace probe (`seqf_seconds_per_step_start`), since
it may run on another day at another pace (vlcp.report.performance.pace_slowdown reads each
attempt's stages at its own pace). Each probe also records the share of the cores other work kept
busy while it ran (`probe_other_load_start`, `probe_other_load_end`) and warns above 5 %: the
measurement must have the machine alone, and a disturbed probe reads the pace slow.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.utils import write_json  # noqa: E402

from common import git_commit, provenance  # noqa: E402  (benchmarks/common.py)


class Repro(NamedTuple):
    returncode: int
    total: float                 # seconds
    stages: dict[str, float]     # seconds per stage, from DVC's stage boundaries in its output
    log: str


def timed_repro(cwd: Path, env: dict, echo: str | None = None, on_stage=None, targets: tuple[str, ...] = ()) -> Repro:
    """Run `dvc repro` in `cwd`, reading its output as it comes; `echo`: print each stage's seconds
    and the total, prefixed `[echo]` (tests/test_pipeline.py shows them on failure or with -s);
    `on_stage(stages)`: called with the finished stages' seconds each time a stage finishes."""
    t0 = time.time()
    proc = subprocess.Popen(["dvc", "repro", *targets], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    stages, current, started, log = {}, None, t0, []

    def close(now):
        if current:
            stages[current] = round(now - started, 2)
            if echo:
                print(f"[{echo}] {current}: {stages[current]:.1f} s")
            if on_stage:
                on_stage(stages)
    for line in proc.stdout:
        log.append(line)
        m = re.match(r"Running stage '([^']+)'", line)
        if m:
            now = time.time()
            close(now)
            current, started = m.group(1), now
    proc.wait()
    if proc.returncode == 0:      # a failed stage's time is not a stage time
        close(time.time())
    total = round(time.time() - t0, 2)
    if echo:
        print(f"[{echo}] total: {total:.1f} s")
    return Repro(proc.returncode, total, stages, "".join(log))


def checked(r: Repro) -> Repro:
    if r.returncode:
        raise SystemExit("dvc repro failed:\n" + "".join(r.log.splitlines(True)[-40:]))
    return r


def seqf_seconds_per_step(runs: Path) -> float | None:
    """The SeqF runs' training seconds per step under `runs` (`<runs>/seqf/seed<S>/results.json`):
    the machine's pace, to read the total against (benchmarks/spine_cost.py measured 0.043 s on this
    VM's usual pace, 2026-11-24)."""
    rows = [t for p in sorted((runs / "seqf").glob("seed*/results.json"))
            for t in json.loads(p.read_text())["train"]]
    steps = sum(t["steps"] for t in rows)
    return round(sum(t["seconds"] for t in rows) / steps, 4) if steps else None


def cpu_busy_seconds() -> float | None:
    """The machine's CPU seconds spent busy so far, over every core (Linux's /proc/stat: user, nice,
    system, irq, softirq, steal); None where it cannot be read."""
    try:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(ticks[:3]) + sum(ticks[5:8])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished children (a probe's run and everything it waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


OTHER_LOAD_WARN = 0.05   # a probe beside more other work than this (a share of the cores) warns


def other_load(busy: float, own: float, wall: float, cpus: int) -> float:
    """The share of the machine's cores that other work kept busy while a probe ran: the machine's busy
    CPU seconds over the probe (`busy`) less the probe's own (`own`), over its `wall` seconds × `cpus`.
    About 0 on a machine left alone (0.003 here); a pace read beside other work reads slow."""
    return round(max(busy - own, 0.0) / (wall * cpus), 3) if wall > 0 and cpus else 0.0


def pace_probe(clone: Path, env: dict) -> tuple[float | None, float | None]:
    """The machine's pace at the end of the repro: one more spine SeqF run (seed 0, the clone's
    params, out of the pipeline's folders), its training seconds per step, and the share of the cores
    other work kept busy meanwhile (`other_load`; None without /proc/stat): a probe that shared the
    cores reads a slower pace than the repro ran at, and says so. The spine's own SeqF runs come first
    in the repro; a repro of two hours or more drifts (vlcp.report.performance.pace_slowdown reads
    both ends)."""
    probe = clone / ".pace-probe"
    shutil.rmtree(probe, ignore_errors=True)
    busy, own, t0 = cpu_busy_seconds(), children_cpu_seconds(), time.time()
    subprocess.run(["vlcp", "run", "seqf", "--seed", "0", "--out", str(probe / "runs"), "--checkpoints",
                    str(probe / "checkpoints"), "--no-resume", "--set", "train.progress=false"],
                   cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
    after = cpu_busy_seconds()
    others = (other_load(after - busy, children_cpu_seconds() - own, time.time() - t0, os.cpu_count() or 1)
              if busy is not None and after is not None else None)
    pace = seqf_seconds_per_step(probe / "runs")
    shutil.rmtree(probe)   # nothing of it stays in the clone
    if others is not None and others > OTHER_LOAD_WARN:
        print(f"pipeline.py: other work kept {others:.0%} of the cores busy during the pace probe "
              f"(SeqF {pace} s/step): its pace reads slow; set it aside or measure again", file=sys.stderr)
    return pace, others


def pace_first(targets: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The `dvc repro` passes of a measurement: a part's (`--targets`) spine SeqF stages first, then
    the rest, so that its first pace is read at its start as a whole repro's is (dvc.yaml runs the
    spine first); one `dvc repro` call orders its targets by its own graph, not as given. A whole
    repro (no targets) is one pass."""
    seqf = tuple(t for t in targets if t.startswith("run@seqf"))
    rest = tuple(t for t in targets if t not in seqf)
    return [p for p in (seqf, rest) if p] or [()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pipeline.json"))
    ap.add_argument("--workdir", help="clone here and keep it (default: a temporary directory)")
    ap.add_argument("--resume", action="store_true",
                    help="go on with the stopped repro in --workdir (its finished stages are kept)")
    ap.add_argument("--targets", nargs="+", default=[],
                    help="time `dvc repro TARGETS` (what they depend on included) instead of the whole pipeline; "
                         "add run@seqf-0 run@seqf-1 run@seqf-2 to read the machine's pace; needs its own --out")
    args = ap.parse_args()
    if args.targets and Path(args.out).resolve() == Path(ap.get_default("out")).resolve():
        ap.error("--targets times part of the pipeline: give it its own --out (the default file is the whole repro's)")
    if args.resume and not args.workdir:
        ap.error("--resume needs the --workdir of the repro that was stopped")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               DVC_NO_ANALYTICS="1", HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(args.workdir) if args.workdir else Path(tmp) / "vlcp"
        partial = clone / "pipeline-partial.json"
        if args.resume:
            if not partial.exists():
                raise SystemExit(f"--resume: {partial} is missing: {clone} holds no stopped repro of this script")
            done = json.loads(partial.read_text())
            (clone / ".dvc" / "tmp" / "rwlock").unlink(missing_ok=True)   # the stopped dvc's stale lock
            shutil.rmtree(clone / "checkpoints", ignore_errors=True)   # the cut-off stage's runs start over
        else:
            subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
            done = {"stages": {}, "attempts": []}
        env["PYTHONPATH"] = str(clone)
        attempt = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "stages": 0, "stage_names": []}
        if args.resume and (clone / "data" / "emoji").exists():   # this attempt's own pace (the first reads the spine's SeqF runs)
            attempt["seqf_seconds_per_step_start"], attempt["probe_other_load_start"] = pace_probe(clone, env)
        done["attempts"].append(attempt)

        mine = {}   # this attempt's finished stages

        def keep(stages):
            mine.update(stages)
            done["stages"].update(stages)
            attempt["stages"], attempt["stage_names"] = len(mine), sorted(mine)
            write_json(partial, done)
        targets = tuple(args.targets)
        passes = [checked(timed_repro(clone, env, on_stage=keep, targets=p)) for p in pace_first(targets)]   # keep() has every stage by now
        noop = checked(timed_repro(clone, env, targets=targets))
        measured = git_commit(clone)   # the clone's commit (this checkout may have moved on meanwhile)
        pace = seqf_seconds_per_step(clone / "runs")
        pace_end, load_end = pace_probe(clone, env) if pace else (None, None)   # a part without the spine's SeqF runs reads no pace
    resumed = len(done["attempts"]) > 1
    total = round(sum(done["stages"].values()), 2) if resumed else round(sum(p.total for p in passes), 2)
    write_json(args.out, {
        "what": (f"dvc repro {' '.join(targets)} (and what it depends on)" if targets else "dvc repro")
                + " from scratch in a fresh clone (default params.yaml), then a no-op dvc repro"
                + ("; stopped and resumed: the total sums whole stages, a cut-off stage timed on its rerun"
                   if resumed else ""),
        "total_seconds": total, "noop_seconds": noop.total, "noop_up_to_date": "up to date" in noop.log,
        "targets": list(targets), "stages": done["stages"], "attempts": done["attempts"], "seqf_seconds_per_step": pace,
        "seqf_seconds_per_step_end": pace_end, "probe_other_load_end": load_end, **provenance(), "commit": measured,
    })
    print(f"dvc repro {total / 60:.1f} min (SeqF {pace} s/step at the start, {pace_end} at the end), "
          f"no-op {noop.total:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
