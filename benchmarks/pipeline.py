"""Time the default pipeline: `dvc repro` from scratch in a fresh clone, then a no-op `dvc repro`.

    .venv/bin/python benchmarks/pipeline.py [--out benchmarks/results/pipeline.json]

Writes per-stage wall times (from DVC's stage boundaries in the log), the total and the no-op
time, with the machine's description. The overview report shows the latest file.
"""
from __future__ import annotations

import argparse
import json
import os
import re
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


def timed_repro(cwd: Path, env: dict, echo: str | None = None) -> Repro:
    """Run `dvc repro` in `cwd`, reading its output as it comes; `echo`: print each stage's seconds
    and the total, prefixed `[echo]` (tests/test_pipeline.py shows them on failure or with -s)."""
    t0 = time.time()
    proc = subprocess.Popen(["dvc", "repro"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    stages, current, started, log = {}, None, t0, []

    def close(now):
        if current:
            stages[current] = round(now - started, 2)
            if echo:
                print(f"[{echo}] {current}: {stages[current]:.1f} s")
    for line in proc.stdout:
        log.append(line)
        m = re.match(r"Running stage '([^']+)'", line)
        if m:
            now = time.time()
            close(now)
            current, started = m.group(1), now
    proc.wait()
    close(time.time())
    total = round(time.time() - t0, 2)
    if echo:
        print(f"[{echo}] total: {total:.1f} s")
    return Repro(proc.returncode, total, stages, "".join(log))


def checked(r: Repro) -> Repro:
    if r.returncode:
        raise SystemExit("dvc repro failed:\n" + "".join(r.log.splitlines(True)[-40:]))
    return r


def seqf_seconds_per_step(clone: Path) -> float | None:
    """The spine SeqF runs' training seconds per step in this repro: the machine's pace, to read the
    total against (benchmarks/spine_cost.py measured 0.043 s on this VM's usual pace, 2026-11-24)."""
    rows = [t for p in sorted((clone / "runs" / "seqf").glob("seed*/results.json"))
            for t in json.loads(p.read_text())["train"]]
    steps = sum(t["steps"] for t in rows)
    return round(sum(t["seconds"] for t in rows) / steps, 4) if steps else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pipeline.json"))
    ap.add_argument("--workdir", help="clone here and keep it (default: a temporary directory)")
    args = ap.parse_args()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               DVC_NO_ANALYTICS="1", HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(args.workdir) if args.workdir else Path(tmp) / "vlcp"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env["PYTHONPATH"] = str(clone)
        full = checked(timed_repro(clone, env))
        noop = checked(timed_repro(clone, env))
        measured = git_commit(clone)   # the clone's commit (this checkout may have moved on meanwhile)
        pace = seqf_seconds_per_step(clone)
    write_json(args.out, {
        "what": "dvc repro from scratch in a fresh clone (default params.yaml), then a no-op dvc repro",
        "total_seconds": full.total, "noop_seconds": noop.total, "noop_up_to_date": "up to date" in noop.log,
        "stages": full.stages, "seqf_seconds_per_step": pace, **provenance(), "commit": measured,
    })
    print(f"dvc repro {full.total / 60:.1f} min (SeqF {pace} s/step), no-op {noop.total:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
