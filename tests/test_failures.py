"""Failures a user hits, each one line with rc 2: a report whose notebook fails, a full disk, a
killed `--jobs` worker, an output path under a file, a results.json edited by hand."""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
import yaml

from vlcp.cli import main
from vlcp.errors import VlcpError

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- results.json checksum

@pytest.fixture(scope="module")
def run_dir(emoji_root, tmp_path_factory):
    """A tiny finished run: runs/test-seqf/seed0/results.json, as `vlcp run` writes it."""
    from conftest import tiny_experiment

    from vlcp.run import run_experiment

    runs = tmp_path_factory.mktemp("runs")
    run_experiment(tiny_experiment(emoji_root, steps=3), runs / "test-seqf" / "seed0")
    return runs


def test_results_carry_a_checksum_and_an_edited_one_is_refused_by_name(run_dir, tmp_path):
    from vlcp.report.metrics import collect_runs
    from vlcp.report.results import require_runs

    path = run_dir / "test-seqf" / "seed0" / "results.json"
    assert json.loads(path.read_text())["checksum"].startswith("sha256:")
    assert require_runs(run_dir, ["test-seqf"], [0])["test-seqf"][0]["seed"] == 0   # verified, read

    edited = tmp_path / "runs" / "test-seqf" / "seed0" / "results.json"
    edited.parent.mkdir(parents=True)
    r = json.loads(path.read_text())
    r["train"][-1]["samples"] += 1     # one number changed by hand
    edited.write_text(json.dumps(r, indent=1))
    for read in (lambda: require_runs(tmp_path / "runs", ["test-seqf"], [0]), lambda: collect_runs(tmp_path / "runs")):
        with pytest.raises(VlcpError, match=r"results\.json: its checksum does not match .*re-run its experiment"):
            read()
    r.pop("checksum")                 # an older vlcp's file (or a fixture): read as before
    edited.write_text(json.dumps(r))
    assert collect_runs(tmp_path / "runs")["test-seqf"][0]["train"][-1]["samples"] == r["train"][-1]["samples"]


# --------------------------------------------------------------------------- report render

def tiny_notebook(path: Path, code: str) -> Path:
    """A report notebook: a title, a parameters cell (runs_dir), a section whose cell runs `code`."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    params = nbformat.v4.new_code_cell('runs_dir = "runs"\nreports_dir = "reports"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Tiny report"), params,
                nbformat.v4.new_markdown_cell("## 2. The runs"), nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, path)
    return path


def test_a_vlcp_error_in_a_report_cell_reaches_the_user_as_itself(tmp_path, capsys):
    results = tmp_path / "runs" / "a" / "seed0" / "results.json"
    results.parent.mkdir(parents=True)
    results.write_text('{"experiment": "a", "seed": 0, "trajec')     # truncated
    nb = tiny_notebook(tmp_path / "tiny.ipynb", "from vlcp.report.results import require_runs\n"
                                                "runs = require_runs(runs_dir, ['a'], [0])")
    rc = main(["report", "render", str(nb), "--reports", str(tmp_path / "reports"),
               "-p", f"runs_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and len(err) < 700, err
    assert err.startswith(f"vlcp: error: {results}: is not a whole JSON file"), err
    failed = tmp_path / "reports" / "tiny.failed.ipynb"
    assert "section '2. The runs'" in err and f"executed notebook with its traceback: {failed}" in err
    assert "VlcpError" in failed.read_text() and not (tmp_path / "reports" / "tiny.html").exists()


def test_another_error_in_a_report_cell_names_the_notebook_cell_and_error(tmp_path, capsys):
    nb = tiny_notebook(tmp_path / "tiny.ipynb", "rows = {'A_KA': 1.0}\nrows['GM']")
    rc = main(["report", "render", str(nb), "--reports", str(tmp_path / "reports")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "please report it" not in err, err
    failed = tmp_path / "reports" / "tiny.failed.ipynb"
    assert err == (f"vlcp: error: {nb}: cell 5 (section '2. The runs', `rows = {{'A_KA': 1.0}}`) failed: "
                   f"KeyError: 'GM' (the executed notebook with its traceback: {failed})")
    assert "KeyError" in failed.read_text()


def test_render_options_that_cannot_work_are_one_line(tmp_path, capsys):
    nb = tiny_notebook(tmp_path / "tiny.ipynb", "pass")
    assert main(["report", "render", str(nb), "-p", "long=[1,"]) == 2
    assert "vlcp: error: -p 'long=[1,': the value is not valid YAML" in capsys.readouterr().err
    (tmp_path / "afile").write_text("")
    assert main(["report", "render", str(nb), "--reports", str(tmp_path / "afile")]) == 2
    assert capsys.readouterr().err.strip() == \
        f"vlcp: error: --reports {tmp_path / 'afile'}: {tmp_path / 'afile'} is a file, not a folder"


def test_eval_json_under_a_file_is_refused_before_scoring(tmp_path, capsys, monkeypatch):
    import vlcp.update

    def scored(*a, **k):
        raise AssertionError("scored before --json was checked")

    monkeypatch.setattr(vlcp.update, "evaluate", scored)
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "scores.json"
    assert main(["eval", "--model", "vlcp-tiny", "--json", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"vlcp: error: --json {out}: {tmp_path / 'afile'} is a file, not a folder"


# --------------------------------------------------------------------------- a full disk

def fake_disk(monkeypatch, free: int) -> None:
    usage = shutil.disk_usage(".")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=free))


def test_a_checkpoint_on_a_full_disk_names_the_path_and_the_space(tmp_path, monkeypatch):
    import torch

    from vlcp.train.checkpoint import save_checkpoint

    def torch_save_on_full_disk(obj, f):      # what torch raises when its writer runs out of space
        Path(f).write_bytes(b"\0" * 3 * 2 ** 20)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 3145792 vs 3145728")

    monkeypatch.setattr(torch, "save", torch_save_on_full_disk)
    fake_disk(monkeypatch, free=4096)
    path = tmp_path / "ckpt" / "checkpoint.pt"
    with pytest.raises(VlcpError, match=rf"^{path}: the disk is full \(0\.0 MB free in .*needed more than the "
                                        r"3\.0 MB it had written\); free some space"):
        save_checkpoint(path, {"task": 0, "w": torch.zeros(4)})
    assert not path.exists() and list(path.parent.iterdir()) == []   # nothing half-written left


def test_data_prepare_on_a_full_disk_is_one_line(tmp_path, monkeypatch, capsys):
    import numpy as np

    def savez_on_full_disk(file, **arrays):
        Path(file).write_bytes(b"\0" * 2 ** 20)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", savez_on_full_disk)
    out = tmp_path / "emoji"
    assert main(["data", "prepare", "--out", str(out), "--set", "data.image_size=16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]    # (after the progress bar)
    assert err.startswith(f"vlcp: error: {out}: the disk is full (") and "needed more than the 1.0 MB" in err, err
    assert "please report it" not in err


def test_update_refuses_before_training_when_the_disk_has_not_the_space(tmp_path, monkeypatch, capsys):
    from test_update import make_chunk

    import vlcp.run.loop

    chunk = make_chunk(tmp_path, "folder", 0)
    monkeypatch.setattr(vlcp.run.loop, "train_counted", lambda *a, **k: pytest.fail("trained"))
    fake_disk(monkeypatch, free=2 ** 20)
    rc = main(["update", chunk, "--out", str(tmp_path / "m"), "--model", "vlcp-tiny", "--recipe", "full",
               "--steps", "2", "--batch-size", "8", "--device", "cpu", "--threads", "1", "--holdout", "0.25",
               "--min-candidates", "0", "--no-report", "--set", "train.progress=false"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and err.startswith("vlcp: error: this update (the model it keeps, and its checkpoint while it "
                                      "runs) needs about "), err
    assert "which has 1.0 MB free" in err


# --------------------------------------------------------------------------- vlcp run --jobs

@pytest.fixture(scope="module")
def jobs_params(emoji_root, tmp_path_factory):
    """A params file with two tiny experiments (a few steps each), and the command that runs both on two workers."""
    from conftest import SMALL_TASKS

    from vlcp.config import load_params

    here = tmp_path_factory.mktemp("jobs")
    params = load_params(REPO / "params.yaml")
    params["profile"] = "tiny"
    params["defaults"]["data"].update(root=str(emoji_root), tasks=SMALL_TASKS)
    params["profiles"]["tiny"]["train"].update(steps=6, num_threads=2, progress=False)
    params["experiments"]["t-seqf"] = {"method": {"name": "seqf"}, "train": {"batch_size": 16}}
    params["experiments"]["t-er"] = {"method": {"name": "er", "buffer_size": 20}, "train": {"batch_size": 16}}
    (here / "params.yaml").write_text(yaml.safe_dump(params))
    return here, [sys.executable, "-m", "vlcp.cli", "run", "t-seqf", "t-er", "--jobs", "2", "--params",
                  str(here / "params.yaml"), "--out", str(here / "runs"), "--checkpoints", str(here / "ckpt")]


def command_line(process: psutil.Process) -> str:
    """The process's command line; empty for one that has exited (a zombie, or gone) since it was listed."""
    try:
        return " ".join(process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return ""


def start_with_workers(cmd: list[str]) -> tuple[subprocess.Popen, list[psutil.Process]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        workers = [c for c in psutil.Process(proc.pid).children() if "spawn_main" in command_line(c)]
        if len(workers) == 2:
            return proc, workers
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the two --jobs workers did not start")


def test_a_killed_worker_is_reported_and_the_command_resumes(jobs_params):
    here, cmd = jobs_params
    proc, workers = start_with_workers(cmd)
    time.sleep(1.0)
    workers[0].send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("vlcp: error: run --jobs 2: a worker process died (killed by the system, possibly "
                           "out of memory) while running t-"), line
    assert "(seed 0); the same command resumes from the checkpoints" in line
    psutil.wait_procs(workers, timeout=10)
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)

    done = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert all((here / "runs" / e / "seed0" / "results.json").exists() for e in ("t-seqf", "t-er"))


def test_workers_die_with_their_killed_parent(jobs_params):
    _, cmd = jobs_params
    proc, workers = start_with_workers(cmd + ["--no-resume", "--out", str(jobs_params[0] / "other"),
                                                "--checkpoints", str(jobs_params[0] / "other-ckpt")])
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    gone, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, f"--jobs workers outlived their parent: {[w.pid for w in alive]}"
