"""Checkpoints are data only (loadable with weights_only=True, nothing unpickled otherwise),
verified by a checksum, rotated (checkpoint.prev.pt) and recovered by `--bad-checkpoint`; one
run per folder (a lock); leftovers of killed writes are removed; a resumed run's wall clock is
the sum of its attempts; results.json is strict JSON; non-finite weights stop the run."""
import json
import math
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml

from conftest import SMALL_TASKS, cll_experiment, strip_timings as strip, tiny_experiment
from vlcp.config import experiment_from_dict
from vlcp.errors import NonFiniteError, VlcpError
from vlcp.run import run_experiment
from vlcp.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def fomo_experiment(root, method="seqf", **args):
    return experiment_from_dict({
        "name": f"fomo-{method}", "seed": 0, "data": {"root": str(root), "stream": "concepts"},
        "model": {"name": "vlcp-tiny"}, "method": {"name": method, **args},
        "fomo": {"num_tasks": 3, "steps_per_task": 3},
        "train": {"batch_size": 16, "progress": False, "device": "cpu", "num_threads": 1, "warmup_frac": 0.1},
        "eval": {"batch_size": 256}})


def experiment(kind, root, method, **args):
    if kind == "language":
        return cll_experiment(root, method, steps=6, convergence=False, **args)
    if kind == "fomo":
        return fomo_experiment(root, method, **args)
    return tiny_experiment(root, method, steps=6, **args)


class Planted:
    """A pickle payload: unpickling it creates `marker` (it would run any code)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def seqf_full(emoji_root, tmp_path_factory):
    """An uninterrupted tiny run (3 tasks, 6 steps): the reference of the recovery tests."""
    return run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path_factory.mktemp("full"))


def partial_run(root, out, stop=1):
    """Checkpoints after tasks 0..stop: checkpoint.pt (task `stop`) and checkpoint.prev.pt."""
    run_experiment(tiny_experiment(root, "seqf", steps=6), out, stop_after_task=stop)
    return out / "checkpoint.pt"


# --------------------------------------------------------------------------- nothing is unpickled

def test_planted_pickle_is_never_run(emoji_root, tmp_path, seqf_full):
    marker = tmp_path / "pwned"
    run = tmp_path / "run"
    run.mkdir()
    torch.save({"config_hash": "x", "task": 0, "model": Planted(marker)}, run / "checkpoint.pt")
    cfg = tiny_experiment(emoji_root, "seqf", steps=6)
    with pytest.raises(VlcpError) as e:
        try:
            run_experiment(cfg, run)
        finally:
            assert not marker.exists(), "the planted checkpoint's pickle ran"
    msg = str(e.value)
    assert "\n" not in msg and str(run / "checkpoint.pt") in msg and "--bad-checkpoint restart" in msg
    assert "not unpickled" in msg
    r = run_experiment(cfg, run, bad_checkpoint="restart")      # moved aside, the run starts over
    assert not marker.exists() and (run / "checkpoint.pt.bad").exists()
    assert strip(r) == strip(seqf_full)
    assert load_checkpoint(run / "checkpoint.pt")["task"] == 2


def test_cli_bad_checkpoint_is_one_line(emoji_root, tmp_path, capsys):
    from vlcp.cli import main
    from vlcp.config import load_params

    params = load_params("params.yaml")
    params["profile"] = "tiny"
    params["defaults"]["data"].update(root=str(emoji_root), tasks=SMALL_TASKS)
    params["profiles"]["tiny"]["train"].update(steps=6, num_threads=1, progress=False)
    params["experiments"]["t-seqf"] = {"method": {"name": "seqf"}, "train": {"batch_size": 16}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    ckpt = tmp_path / "ckpt" / "t-seqf" / "seed0"
    ckpt.mkdir(parents=True)
    marker = tmp_path / "pwned"
    torch.save({"model": Planted(marker)}, ckpt / "checkpoint.pt")
    common = ["run", "t-seqf", "--params", str(path), "--checkpoints", str(tmp_path / "ckpt"), "--out", str(tmp_path / "runs")]
    capsys.readouterr()
    assert main(common) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("vlcp: error: ") and "checkpoint.pt" in err
    assert main(common + ["--bad-checkpoint", "restart"]) == 0
    assert not marker.exists() and (ckpt / "checkpoint.pt.bad").exists()
    assert (tmp_path / "runs" / "t-seqf" / "seed0" / "results.json").exists()


# --------------------------------------------------------------------------- every method's state is data

GROUP_METHODS = [
    ("er", {"buffer_size": 20}), ("ewc", {"fisher_batches": 1, "fisher_batch_size": 8}), ("si", {}),
    ("mas", {"importance_batches": 1, "importance_batch_size": 8}), ("rwalk", {"fisher_batches": 1, "fisher_batch_size": 8}),
    ("afec", {"fisher_batches": 1, "fisher_batch_size": 8, "expand_steps": 2}), ("lwf", {}),
    ("mof", {"buffer_size": 20}), ("kmeans", {"buffer_size": 20}), ("icarl", {"buffer_size": 20}),
    ("lucir", {"buffer_size": 20}), ("ucir", {"buffer_size": 20}), ("geodl", {"buffer_size": 20}),
    ("co2l", {"buffer_size": 20}), ("incclip", {"buffer_size": 20, "pseudo_iters": 1}), ("jointt", {}),
]
ALBEF_METHODS = [("ctp", {"queue_size": 16}), ("ctp-er", {"queue_size": 16, "buffer_size": 20})]
FOMO_METHODS = [("ema-merge", {"w": 0.9}), ("ft-merge", {"w": 0.9}), ("zs-merge", {"w": 0.9}), ("ewc", {"fisher_batches": 1}),
                ("si", {}), ("lora", {"r": 4}), ("galore", {})]
LANGUAGE_METHODS = [("cllclip", {"teir": True}), ("cll-er", {"buffer_size": 30}), ("cll-der", {"buffer_size": 30}),
                    ("cll-oewc", {"fisher_batches": 2}), ("cll-mla", {}), ("cll-ptuning", {}), ("cll-lora", {}),
                    ("cll-dualprompt", {}), ("cll-codaprompt", {}), ("cll-joint", {})]
CASES = ([("group", m, a) for m, a in GROUP_METHODS] + [("albef", m, a) for m, a in ALBEF_METHODS]
         + [("fomo", m, a) for m, a in FOMO_METHODS] + [("language", m, a) for m, a in LANGUAGE_METHODS])


@pytest.mark.parametrize("kind,method,args", CASES, ids=[f"{k}-{m}" for k, m, _ in CASES])
def test_every_method_checkpoints_data_only_and_resumes(emoji_root, tmp_path, kind, method, args):
    """The checkpoint after the first task (every method state there: buffers, Fisher, queues,
    merges, counts, generator states; the language stream's grown vocab, rows and modules) loads
    with weights_only=True and the run resumes from it. On the language stream, whose resume
    rebuilds the grown model, the resumed run ends as the uninterrupted run (the other runners'
    resume-equals-uninterrupted tests: test_train, test_fomo_run, test_fomo_merge, test_fomo_peft,
    test_ctp_baselines)."""
    if kind == "albef":
        cfg = tiny_experiment(emoji_root, method, steps=6, model="albef-tiny", **args)
    elif kind == "group" and method == "incclip":
        cfg = tiny_experiment(emoji_root, method, steps=6, model="vlcp-tiny-rn", **args)
    else:
        cfg = experiment(kind, emoji_root, method, **args)
    stop = 0 if method != "cll-joint" else None   # (one task: the final checkpoint)
    partial = run_experiment(cfg, tmp_path / "part", stop_after_task=stop)
    raw = torch.load(tmp_path / "part" / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert raw["checksum"].startswith("sha256:") and raw["task"] == 0 and raw["method"] is not None
    if stop is None:
        return
    resumed = run_experiment(cfg, tmp_path / "part")
    assert len(partial["train"]) == 1 and len(resumed["train"]) == len(resumed["tasks"])
    assert len(resumed["attempt_seconds"]) == 2
    assert torch.load(tmp_path / "part" / "checkpoint.pt", weights_only=True)["task"] == len(resumed["tasks"]) - 1
    if kind == "language":
        assert strip(resumed) == strip(run_experiment(cfg, tmp_path / "full"))


# --------------------------------------------------------------------------- checksum and recovery

def corrupt(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:   # 1 KB of garbage in the middle
        mid = len(data) // 2
        garbage = np.random.default_rng(0).integers(0, 256, 1024, dtype=np.uint8).tobytes()
        path.write_bytes(data[:mid] + garbage + data[mid + 1024:])


@pytest.mark.parametrize("how", ["truncated", "empty", "overwritten"])
def test_bad_checkpoint_is_one_line_naming_the_file(emoji_root, tmp_path, how):
    path = partial_run(emoji_root, tmp_path)
    corrupt(path, how)
    with pytest.raises(VlcpError) as e:
        load_checkpoint(path)
    assert isinstance(e.value, CheckpointError) and str(path) in str(e.value)
    with pytest.raises(VlcpError) as e:
        run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "--bad-checkpoint restart" in msg and "previous" in msg
    assert not (tmp_path / "results.json").exists() and path.exists()   # nothing moved, nothing written


def test_overwritten_tensor_bytes_fail_the_checksum(tmp_path):
    """A flipped byte inside a tensor's data (torch.load alone loads it silently) fails the checksum."""
    path = tmp_path / "c.pt"
    w = torch.arange(4096, dtype=torch.float32) + 0.5
    save_checkpoint(path, {"task": 0, "model": {"w": w}})
    data = bytearray(path.read_bytes())
    at = bytes(data).find(w.numpy().tobytes()) + 2048 * 4 + 3   # the top byte of w[2048]
    data[at] ^= 0x40
    path.write_bytes(bytes(data))
    assert not torch.equal(torch.load(path, weights_only=True)["model"]["w"], w)   # loads, corrupted
    with pytest.raises(CheckpointError, match="checksum does not match"):
        load_checkpoint(path)


def test_restart_moves_the_bad_file_aside_and_starts_over(emoji_root, tmp_path, seqf_full):
    path = partial_run(emoji_root, tmp_path)
    corrupt(path, "truncated")
    bad = path.read_bytes()
    r = run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path, bad_checkpoint="restart")
    assert (tmp_path / "checkpoint.pt.bad").read_bytes() == bad            # kept, never deleted
    assert strip(r) == strip(seqf_full) and len(r["attempt_seconds"]) == 1  # started over
    corrupt(path, "empty")                                                  # a second bad file: .bad.1
    run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path, bad_checkpoint="restart")
    assert (tmp_path / "checkpoint.pt.bad").read_bytes() == bad and (tmp_path / "checkpoint.pt.bad.1").exists()


def test_previous_resumes_from_the_previous_checkpoint(emoji_root, tmp_path, seqf_full):
    path = partial_run(emoji_root, tmp_path, stop=1)
    prev = tmp_path / "checkpoint.prev.pt"
    assert load_checkpoint(path)["task"] == 1 and load_checkpoint(prev)["task"] == 0   # rotated
    corrupt(path, "overwritten")
    r = run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path, bad_checkpoint="previous")
    assert (tmp_path / "checkpoint.pt.bad").exists()
    assert strip(r) == strip(seqf_full)
    assert load_checkpoint(path)["task"] == 2 and load_checkpoint(prev)["task"] == 1


def test_previous_without_a_good_previous_is_an_error(emoji_root, tmp_path):
    path = partial_run(emoji_root, tmp_path, stop=0)
    assert not (tmp_path / "checkpoint.prev.pt").exists()
    corrupt(path, "truncated")
    with pytest.raises(VlcpError, match="checkpoint.prev.pt") as e:
        run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path, bad_checkpoint="previous")
    assert "\n" not in str(e.value) and (tmp_path / "checkpoint.pt.bad").exists()


def test_another_configs_checkpoint_is_said_before_it_is_replaced(emoji_root, tmp_path, capsys):
    path = partial_run(emoji_root, tmp_path, stop=0)
    before = path.read_bytes()
    capsys.readouterr()
    cfg = tiny_experiment(emoji_root, "seqf", steps=6)
    cfg.seed = 1
    run_experiment(cfg, tmp_path, stop_after_task=0)
    out = capsys.readouterr().out
    assert "checkpoint is from another config; starting over" in out
    assert out.index("another config") < out.index("task 1/3")             # said before training
    assert path.read_bytes() != before


# --------------------------------------------------------------------------- leftovers and the lock

def test_leftover_temp_folders_of_killed_writes_are_removed(emoji_root, tmp_path):
    ckpt = tmp_path / "ckpt"
    for name in (".checkpoint.pt.k1ll_9xy", ".checkpoint.prev.pt.a8b7c6d5"):
        (ckpt / name).mkdir(parents=True)
        (ckpt / name / "checkpoint.pt").write_bytes(b"half a checkpoint")
    (tmp_path / "out" / ".results.json.zz9_0abc").mkdir(parents=True)
    keep = [ckpt / ".checkpoint.pt.keep", ckpt / ".other.pt.abcdefgh", ckpt / "checkpoint.pt.abcdefgh"]
    for k in keep:
        k.mkdir()
    run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path / "out", tmp_path / "ckpt", stop_after_task=0)
    assert sorted(p.name for p in ckpt.iterdir()) == sorted([k.name for k in keep] + ["checkpoint.pt"])
    assert list((tmp_path / "out").iterdir()) == []


def test_kill_9_during_a_checkpoint_write(emoji_root, tmp_path, capsys):
    """A run killed (SIGKILL) while writing its checkpoint leaves its temporary folder and its
    lock; the next run takes the dead pid's lock over, removes the folder and finishes."""
    import signal

    script = (f"import sys, time; sys.path.insert(0, {str(os.path.dirname(__file__))!r})\n"
              "import torch\nfrom conftest import tiny_experiment\nfrom vlcp.run import run_experiment\n"
              "from pathlib import Path\n"
              "save = torch.save\n"
              "def hangs(obj, f, *a, **k):   # half-way through the second checkpoint's write\n"
              "    if obj.get('task') == 1:\n"
              "        Path(f).write_bytes(b'half a checkpoint')\n"
              "        print('WRITING', flush=True)\n"
              "        time.sleep(120)\n"
              "    return save(obj, f, *a, **k)\n"
              "torch.save = hangs\n"
              f"run_experiment(tiny_experiment(Path({str(emoji_root)!r}), 'seqf', steps=6), Path({str(tmp_path)!r}))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("WRITING"):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    temp = [p for p in tmp_path.iterdir() if p.name.startswith(".checkpoint.pt.")]
    assert len(temp) == 1 and temp[0].is_dir() and (tmp_path / ".lock").exists()
    assert load_checkpoint(tmp_path / "checkpoint.pt")["task"] == 0          # the first task's, whole
    capsys.readouterr()
    r = run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path)
    out = capsys.readouterr().out
    assert f"taking over the lock of pid {proc.pid}" in out and f"{temp[0]}: removed the temporary folder" in out
    assert "resuming test-seqf seed 0 after task 1" in out and len(r["attempt_seconds"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.prev.pt", "checkpoint.pt", "results.json"]


def test_a_held_lock_refuses_a_second_run(emoji_root, tmp_path, capsys):
    from vlcp.train.checkpoint import run_lock

    cfg = tiny_experiment(emoji_root, "seqf", steps=6)
    lock = tmp_path / ".lock"

    def refused(pid):
        with pytest.raises(VlcpError) as e:
            run_experiment(cfg, tmp_path)
        msg = str(e.value)
        assert "\n" not in msg and str(lock) in msg and f"pid {pid}" in msg and "remove" in msg
        assert not (tmp_path / "checkpoint.pt").exists() and lock.exists()

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname()}))
        refused(sleeper.pid)                                      # a live process of this host
    finally:
        sleeper.kill()
        sleeper.wait()
    lock.unlink()
    with run_lock({tmp_path: ()}, "another run in this process"):
        refused(os.getpid())                                      # held by this process (another thread's run)
    assert not lock.exists()
    capsys.readouterr()
    lock.write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname()}))
    run_experiment(cfg, tmp_path, stop_after_task=0)              # its pid is dead now: taken over
    assert f"taking over the lock of pid {sleeper.pid}" in capsys.readouterr().out
    assert not lock.exists()                                      # released after a normal run
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    run_experiment(cfg, tmp_path, stop_after_task=0)              # this pid, not held here: a dead process's
    assert "(this pid, reused: not held here)" in capsys.readouterr().out and not lock.exists()


def test_two_processes_on_one_folder(emoji_root, tmp_path):
    """A second process on the folder of a running one refuses; the first runs to its end."""
    import time

    go = tmp_path.parent / f"{tmp_path.name}-go"
    script = (f"import sys, time; sys.path.insert(0, {str(os.path.dirname(__file__))!r})\n"
              "from conftest import tiny_experiment\nimport vlcp.run.loop as r\nfrom vlcp.run import run_experiment\n"
              "from vlcp.errors import VlcpError\nfrom pathlib import Path\n"
              "train = r.train_counted\n"
              "def wait(*a, **k):   # the first process trains once the test says go (the second has tried by then)\n"
              f"    while sys.argv[1] == 'wait' and not Path({str(go)!r}).exists():\n"
              "        time.sleep(0.05)\n"
              "    return train(*a, **k)\n"
              "r.train_counted = wait\n"
              f"try:\n    run_experiment(tiny_experiment(Path({str(emoji_root)!r}), 'seqf', steps=6), Path({str(tmp_path)!r}))\n"
              "except VlcpError as e:\n    print('REFUSED', e); sys.exit(2)\n")
    first = subprocess.Popen([sys.executable, "-c", script, "wait"], stdout=subprocess.PIPE, text=True)
    for _ in range(600):
        if (tmp_path / ".lock").exists() or first.poll() is not None:
            break
        time.sleep(0.05)
    second = subprocess.run([sys.executable, "-c", script, "go"], capture_output=True, text=True, timeout=300)
    go.touch()
    out = first.communicate(timeout=300)[0]
    assert first.returncode == 0 and "task 3/3" in out
    assert second.returncode == 2 and "REFUSED" in second.stdout and f"pid {first.pid}" in second.stdout
    assert not (tmp_path / ".lock").exists() and (tmp_path / "results.json").exists()


def test_the_lock_is_released_after_a_failed_run(emoji_root, tmp_path, monkeypatch):
    import vlcp.run.loop as runner

    def dies(*a, **k):
        assert (tmp_path / "out" / ".lock").exists() and (tmp_path / "ckpt" / ".lock").exists()   # held while running
        info = json.loads((tmp_path / "ckpt" / ".lock").read_text())
        assert (info["pid"], info["host"]) == (os.getpid(), socket.gethostname())
        raise RuntimeError("killed")
    monkeypatch.setattr(runner, "train_counted", dies)
    with pytest.raises(RuntimeError, match="killed"):
        run_experiment(tiny_experiment(emoji_root, "seqf", steps=6), tmp_path / "out", tmp_path / "ckpt")
    assert not (tmp_path / "out" / ".lock").exists() and not (tmp_path / "ckpt" / ".lock").exists()


# --------------------------------------------------------------------------- wall clock of a resumed run

def test_resumed_wall_seconds_is_the_sum_of_the_attempts(emoji_root, tmp_path):
    cfg = tiny_experiment(emoji_root, "seqf", steps=6)
    first = run_experiment(cfg, tmp_path, stop_after_task=0)
    assert len(first["attempt_seconds"]) == 1
    run_experiment(cfg, tmp_path, stop_after_task=1)
    r = json.loads(json.dumps(run_experiment(cfg, tmp_path)))
    assert len(r["attempt_seconds"]) == 3 and r["attempt_seconds"][0] == first["attempt_seconds"][0]
    assert r["wall_seconds"] == pytest.approx(sum(r["attempt_seconds"]), abs=0.02)
    assert r["wall_seconds"] > r["attempt_seconds"][-1] > 0
    assert json.loads((tmp_path / "results.json").read_text())["attempt_seconds"] == r["attempt_seconds"]
    phases = r["run_seconds"]   # every attempt's phases, summed: the run's wall time (with start-up beside it)
    assert sum(v for k, v in phases.items() if k not in ("process_start", "imports")) == pytest.approx(
        r["wall_seconds"], abs=0.05)
    assert phases["train"] == pytest.approx(sum(t["seconds"] for t in r["train"]), abs=0.01)
    assert phases["checkpoint"] > 0 and phases["data"] > 0


# --------------------------------------------------------------------------- strict JSON

def test_write_json_writes_null_for_non_finite_numbers(tmp_path):
    from vlcp.utils import write_json

    def strict(text):
        def refuse(c):
            raise ValueError(f"not JSON: {c}")
        return json.loads(text, parse_constant=refuse)
    obj = {"nan": float("nan"), "inf": math.inf, "ninf": -math.inf, "np": np.float32("nan"), "np64": np.float64(np.inf),
           "arr": np.array([1.0, np.nan]), "t": torch.tensor(float("nan")), "ok": [1, 2.5, np.int64(3), torch.tensor(2.0)],
           "nested": {"a": [(float("nan"), 1.0)], "b": {"c": np.float16("inf")}}}
    write_json(tmp_path / "r.json", obj)
    got = strict((tmp_path / "r.json").read_text())
    assert got == {"nan": None, "inf": None, "ninf": None, "np": None, "np64": None, "arr": [1.0, None], "t": None,
                   "ok": [1, 2.5, 3, 2.0], "nested": {"a": [[None, 1.0]], "b": {"c": None}}}


# --------------------------------------------------------------------------- non-finite state stops the run

@pytest.mark.parametrize("kind", ["group", "fomo", "language"])
def test_non_finite_weights_stop_the_run_before_anything_is_written(emoji_root, tmp_path, monkeypatch, kind):
    """Weights that blow up right after a task's last step (no loss sees them) stop the run
    naming the task; the previous task's checkpoint stays; no results."""
    from vlcp.methods.cllclip import CLLCLIP
    from vlcp.methods.seqf import SeqF

    cls = CLLCLIP if kind == "language" else SeqF
    after = cls.after_task

    def blows_up(self, model, ctx):
        after(self, model, ctx)
        if ctx.task == 1:
            with torch.no_grad():
                next(p for p in model.parameters() if p.requires_grad).view(-1)[0] = float("nan")
    monkeypatch.setattr(cls, "after_task", blows_up)
    cfg = experiment(kind, emoji_root, "cllclip" if kind == "language" else "seqf")
    with pytest.raises(VlcpError) as e:
        run_experiment(cfg, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and f"{cfg.name} seed 0" in msg and "task 2/3" in msg and "index 1" in msg
    assert isinstance(e.value, NonFiniteError) and "non-finite" in msg and "checkpoint.pt, after task 1) is kept" in msg
    if kind == "group":
        assert "Animals & Nature" in msg
    assert not (tmp_path / "results.json").exists() and not (tmp_path / ".lock").exists()
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["task"] == 0 and all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())


def test_keep_task_checkpoints_keeps_the_model_after_every_task(emoji_root, tmp_path):
    """train.keep_task_checkpoints: the checkpoint after task i stays as task-<i>.pt (a user who wants
    the model after task i had only the last task's); each loads verified and holds that task's model."""
    from vlcp.train.checkpoint import load_checkpoint, task_checkpoint

    cfg = tiny_experiment(emoji_root, "seqf", steps=6)
    cfg.train.keep_task_checkpoints = True
    run_experiment(cfg, tmp_path / "out", tmp_path / "ck")
    states = [load_checkpoint(task_checkpoint(tmp_path / "ck", t)) for t in range(3)]
    assert [s["task"] for s in states] == [0, 1, 2]
    last = load_checkpoint(tmp_path / "ck" / "checkpoint.pt")
    name = next(k for k, v in last["model"].items() if v.is_floating_point())
    assert torch.equal(states[2]["model"][name], last["model"][name])
    assert not torch.equal(states[0]["model"][name], states[2]["model"][name])
    assert not task_checkpoint(tmp_path / "out", 0).exists()
