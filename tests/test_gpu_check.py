"""The scale path for GPU users (#77), on CPU: `vlcp run --jobs N` with a device, the prepared GPU
check and its carry in their dry modes, and the study-cost table."""
import concurrent.futures

import pytest

from vlcp.cli import main


# --------------------------------------------------------------------------- vlcp run --jobs N, device cuda

class RecordingPool:
    """A stand-in for ProcessPoolExecutor: records how it was made and what it was given, runs nothing."""
    made = []

    def __init__(self, workers, mp_context=None, initializer=None, initargs=()):
        self.workers, self.context, self.runs = workers, mp_context.get_start_method(), []
        RecordingPool.made.append(self)

    def submit(self, fn, *args):
        self.runs.append(args)
        done = concurrent.futures.Future()
        done.set_result(f"{args[1]}/results.json")
        return done

    def shutdown(self, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def pool(monkeypatch):
    RecordingPool.made = []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", RecordingPool)
    return RecordingPool


def test_jobs_with_cuda_and_no_gpu_is_one_line_before_any_worker(pool, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    rc = main(["run", "seqf", "er", "--jobs", "2", "--set", "train.device=cuda", "--out", str(tmp_path / "runs"),
               "--checkpoints", str(tmp_path / "ckpt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0] == ("vlcp: error: train.device: seqf asks for cuda but no GPU is available (run --jobs 2); "
                      "set train.device=cpu or auto")
    assert pool.made == []                                   # refused before a worker process starts


@pytest.mark.parametrize("device", ["cuda", "auto"])
def test_jobs_on_a_gpu_share_it_in_spawned_workers(pool, monkeypatch, tmp_path, capsys, device):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)   # the parent asks; no CUDA is made here
    rc = main(["run", "seqf", "er", "jointt", "--jobs", "2", "--set", f"train.device={device}",
               "--set", "train.num_threads=4", "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0] == "run --jobs 2: 2 worker processes share the one GPU (cuda) for 3 of 3 runs"
    (made,) = pool.made
    assert (made.workers, made.context) == (2, "spawn")      # CUDA is made in each worker, not inherited
    assert [(r[0].name, r[0].train.device, r[0].train.num_threads) for r in made.runs] == [
        ("seqf", device, 2), ("er", device, 2), ("jointt", device, 2)]
