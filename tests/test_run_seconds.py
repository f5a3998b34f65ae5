"""Where a run's time goes (`run_seconds`, vlcp.run.timing): the block adds up to the run's wall
time, and a process that runs several experiments (`vlcp run --list`, a `--jobs` worker) pays its
start-up, imports and data load once, at its first run."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vlcp.config import load_params
from vlcp.run.timing import PHASES, RunClock, RunSeconds, startup

ROOT = Path(__file__).resolve().parents[1]
IN_RUN = [p for p in PHASES if p not in ("process_start", "imports")]


def test_the_block_adds_up_and_round_trips():
    clock = RunClock()
    clock.add("data", 0.5)
    clock.add("build", 2.0)
    clock.move(0.25, "build", "data")
    clock.add("eval", -1.0)   # (a clock read backwards counts nothing)
    s = clock.close(10.0, (0.1, 3.0))
    assert (s.data, s.build, s.eval, s.other, s.process_start, s.imports) == (0.75, 1.75, 0.0, 7.5, 0.1, 3.0)
    assert RunSeconds.from_dict(s.to_dict()) == s and list(s.to_dict()) == list(PHASES)
    assert (s + s).other == 15.0 and RunSeconds.from_dict(None) == RunSeconds()
    with pytest.raises(ValueError, match="run_seconds: unknown phase 'writes'"):
        RunSeconds.from_dict({"writes": 1.0})
    with pytest.raises(KeyError, match="unknown phase 'load'"):
        clock.add("load", 1.0)


def test_start_up_is_charged_to_the_first_run_only():
    import time

    first = startup(0.0)           # (this process's first run, or a run that began before it)
    assert first[1] > 0 and first[0] >= 0
    assert startup(time.time() + 1) == (0.0, 0.0)


def params_file(emoji_root, tmp_path, names):
    params = load_params(str(ROOT / "params.yaml"))
    params["profile"] = "tiny"
    params["defaults"]["data"].update(root=str(emoji_root), tasks=["Smileys & Emotion", "Animals & Nature"])
    params["profiles"]["tiny"]["train"].update(steps=4, num_threads=2, progress=False)
    for name in names:
        params["experiments"][name] = {"method": {"name": "seqf"}, "train": {"batch_size": 8}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_a_worker_pays_start_up_and_the_data_load_once(emoji_root, tmp_path):
    """Three runs on two `--jobs` workers: each worker charges its start-up (process start,
    imports) to its first run; its second run has none and finds the data loaded (memoised);
    each run's phases add up to its wall time."""
    names = ["t-a", "t-b", "t-c"]
    path = params_file(emoji_root, tmp_path, names)
    subprocess.run([sys.executable, "-m", "vlcp", "run", *names, "--jobs", "2", "--params", str(path), "--out",
                    str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    runs = [json.loads((tmp_path / "runs" / n / "seed0" / "results.json").read_text()) for n in names]
    blocks = [r["run_seconds"] for r in runs]
    for r, b in zip(runs, blocks):
        assert list(b) == list(PHASES)
        assert sum(b[p] for p in IN_RUN) == pytest.approx(r["wall_seconds"], abs=0.02)
        assert b["train"] == pytest.approx(sum(t["seconds"] for t in r["train"]), abs=0.01)
    first = [b for b in blocks if b["imports"] > 0]
    later = [b for b in blocks if b["imports"] == 0]
    assert len(first) == 2 and len(later) == 1 and all(b["process_start"] > 0 for b in first)
    assert later[0]["process_start"] == 0 and later[0]["data"] < min(b["data"] for b in first)
