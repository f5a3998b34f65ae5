"""`vlcp update` never loses a finished update: a running update is refused by its pid, an update
publishes only while the folder's pending.json is its own; `--recipe auto` never picks a
candidate that moved nothing; a continued folder keeps its recipe."""
import json
import subprocess
import sys

import pytest
from test_update import OPTIONS, TRAIN, keep_folder, make_chunk, run_update  # noqa: F401 (a fixture)

from vlcp.errors import VlcpError
from vlcp.update.history import begin, load_history
from vlcp.update.recipes import pick

OTHER = {"model": "vlcp-tiny", "pretrained": None, "from": None, "chunks": ["c2=/somewhere/c2"], "recipe": "full",
         "seed": 0}


@pytest.fixture
def live_pid():
    """The pid of a live process that is not this one (a running update's)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def hold(lock, pid):
    """A lock file as `vlcp.train.checkpoint.run_lock` writes it, naming `pid` on this host."""
    import socket

    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "run": "update-002 seed 0",
                                "since": "2026-01-02 03:04:05"}) + "\n")


def files(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("where", ["runs/001/.lock", ".lock"])
def test_a_running_update_is_refused_by_its_pid_with_nothing_to_delete(tmp_path, live_pid, where):
    """The running update's lock (its run folder's, or the folder's own) is checked before the
    pending mismatch: the refusal names the pid and gives no advice to delete anything."""
    out = tmp_path / "m"
    out.mkdir()
    begin(out, 1, OTHER)
    hold(out / where, live_pid)
    before = files(out)
    with pytest.raises(VlcpError) as e:
        run_update(make_chunk(tmp_path, "folder", 0), out, model="vlcp-tiny", report=False)
    assert f"pid {live_pid} on " in str(e.value) and "since 2026-01-02 03:04:05" in str(e.value)
    assert "running now" in str(e.value) and "delete" not in str(e.value) and "remove" not in str(e.value)
    assert files(out) == before


def test_another_command_on_an_unfinished_update_is_told_to_keep_its_run(tmp_path):
    """No update is running: the refusal says to finish that update or move its run aside, never to
    delete what it trained."""
    out = tmp_path / "m"
    out.mkdir()
    begin(out, 1, OTHER)
    (out / "runs" / "001").mkdir(parents=True)
    (out / "runs" / "001" / "model.pt").write_bytes(b"trained")
    with pytest.raises(VlcpError, match="differs in chunks.*Finish that update first.*move .*runs/001 aside") as e:
        run_update(make_chunk(tmp_path, "folder", 0), out, model="vlcp-tiny", report=False)
    assert f"delete {out / 'runs' / '001'}" not in str(e.value) and (out / "runs" / "001" / "model.pt").exists()


@pytest.mark.parametrize("then", ["gone", "another"])
def test_an_update_whose_pending_file_was_taken_over_publishes_nothing(tmp_path, keep_folder, monkeypatch, capsys,
                                                                       then):
    """pending.json removed, or replaced by another command's, while the update trains: it refuses
    (rc 2, one line) and the folder's model.pt and history.json stay as they were."""
    import vlcp.run
    from vlcp.cli import main

    out = tmp_path / "m"
    run_update(make_chunk(tmp_path, "folder", 0), out, model="vlcp-tiny", keep=[str(keep_folder)], report=False)
    published = {n: (out / n).read_bytes() for n in ("model.pt", "history.json")}
    real = vlcp.run.run_experiment

    def meanwhile(cfg, run_dir, *a, **k):
        r = real(cfg, run_dir, *a, **k)
        (out / "pending.json").unlink()
        if then == "another":
            begin(out, 2, OTHER)
        return r

    monkeypatch.setattr(vlcp.run, "run_experiment", meanwhile)
    rc = main(["update", make_chunk(tmp_path, "folder", 1), "--out", str(out), "--steps", "2", "--lr", "1e-3",
               "--batch-size", "8", "--device", "cpu", "--threads", "1", "--holdout", "0.25", "--min-candidates", "0",
               "--no-report", "--set", "train.progress=false"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("vlcp: error")]
    assert rc == 2 and len(err) == 1
    assert err[0].startswith(f"vlcp: error: {out / 'pending.json'}: "
                             + ("is gone" if then == "gone" else "now names update 2 (c2) of another command"))
    assert "publishes nothing" in err[0]
    assert {n: (out / n).read_bytes() for n in published} == published
    assert (out / "runs" / "002" / "model.pt").exists()   # what it trained is kept


def test_pick_never_picks_a_candidate_that_moved_nothing():
    rows = [{"recipe": "full", "GM": 30.0, "GM_halfwidth": 3.0, "flops": 10.0, "moved": ["own"]},
            {"recipe": "lora", "GM": 29.0, "GM_halfwidth": 3.0, "flops": 2.0, "moved": []}]
    recipe, why = pick(rows)
    assert recipe == "full" and "lora moved no score: left out" in why   # lora would win the tie on FLOPs
    with pytest.raises(VlcpError, match=r"none of the candidates \(full, lora\) moved any score beyond its sampling "
                                        r"interval in the trial; try a higher --lr"):
        pick([{**r, "moved": []} for r in rows], "try a higher --lr")
    # no set scored (moved None): nothing is known to be still, the rule is as before
    assert pick([{**r, "moved": None} for r in rows])[0] == "lora"


def test_auto_at_a_tiny_lr_refuses_before_the_update_trains(tmp_path, keep_folder, monkeypatch):
    import vlcp.update as upd

    chunk, out = make_chunk(tmp_path, "folder", 0), tmp_path / "m"
    trained = []
    real = upd._experiment
    monkeypatch.setattr(upd, "_experiment", lambda *a, **k: trained.append(a[-2]) or real(*a, **k))
    with pytest.raises(VlcpError, match=r"--recipe auto: none of the candidates \(full, lora\) moved any score beyond "
                                        r"its sampling interval in the trial; try a higher --lr \(now 1e-09\), more --steps "
                                        r"\(now 4; the trial ran 2\), or more data \(9 training pairs\); the likely "
                                        r"cause is a learning rate"):
        run_update(chunk, out, model="vlcp-tiny", keep=[str(keep_folder)], recipe="auto", candidates=("full", "lora"),
                   trial_fraction=0.5, report=False, train={**TRAIN, "lr": 1e-9}, options={**OPTIONS, "steps": 4})
    assert trained == ["trial-full", "trial-lora"] and not out.exists()   # the full update never started


def test_a_continued_folder_keeps_its_recipe_and_the_report_says_what_did_not_move(tmp_path, keep_folder):
    """The CLI without --recipe continues with the folder's last recipe (history: recipe_source);
    an update that moved nothing says so in report.html with the cause."""
    from vlcp.cli import main

    out = tmp_path / "m"
    run_update(make_chunk(tmp_path, "folder", 0), out, model="vlcp-tiny", keep=[str(keep_folder)], recipe="lora",
               report=False)
    rc = main(["update", make_chunk(tmp_path, "folder", 1), "--out", str(out), "--steps", "1", "--lr", "1e-9",
               "--batch-size", "8", "--device", "cpu", "--threads", "1", "--holdout", "0.25", "--min-candidates", "0",
               "--set", "train.progress=false"])
    assert rc == 0
    ups = load_history(out)["updates"]
    assert [(u["recipe"], u["recipe_source"]) for u in ups] == [("lora", "given"), ("lora", "kept")]
    html = (out / "report.html").read_text()
    assert "Update 2 (folder-1) moved no score beyond its sampling interval" in html
    assert "try a higher --lr (now 1e-09), more --steps (now 1), or more data" in html and "likely cause" in html
