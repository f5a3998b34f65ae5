"""Time the default pipeline: `dvc repro` from scratch in a fresh clone, then a no-op `dvc repro`.

    .venv/bin/python benchmarks/pipeline.py [--out benchmarks/results/pipeline.json]

Writes per-stage wall times (from DVC's stage boundaries in the log), the total and the no-op
time, with the machine's description. The overview report shows the latest file.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vlcp.utils import write_json  # noqa: E402

from common import git_commit, provenance  # noqa: E402  (benchmarks/common.py)


def timed_repro(cwd: Path, env: dict) -> tuple[float, dict[str, float], str]:
    """Run `dvc repro`, streaming its output; return total seconds and seconds per stage."""
    t0 = time.time()
    proc = subprocess.Popen(["dvc", "repro"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    stages, current, started, log = {}, None, t0, []
    for line in proc.stdout:
        log.append(line)
        m = re.match(r"Running stage '([^']+)'", line)
        if m:
            now = time.time()
            if current:
                stages[current] = round(now - started, 2)
            current, started = m.group(1), now
    proc.wait()
    total = time.time() - t0
    if current:
        stages[current] = round(time.time() - started, 2)
    if proc.returncode:
        raise SystemExit("dvc repro failed:\n" + "".join(log[-40:]))
    return round(total, 2), stages, "".join(log)


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
        total, stages, _ = timed_repro(clone, env)
        noop, _, noop_log = timed_repro(clone, env)
        measured = git_commit(clone)   # the clone's commit (this checkout may have moved on meanwhile)
    write_json(args.out, {
        "what": "dvc repro from scratch in a fresh clone (default params.yaml), then a no-op dvc repro",
        "total_seconds": total, "noop_seconds": noop, "noop_up_to_date": "up to date" in noop_log,
        "stages": stages, **provenance(), "commit": measured,
    })
    print(f"dvc repro {total / 60:.1f} min, no-op {noop:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
