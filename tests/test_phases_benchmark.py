"""benchmarks/phases.py: every run's `run_seconds` summed per DVC stage, on a fixture of two fake
stages (no repro): a one-run stage and a `--jobs 2` stage of three runs."""
import json
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from phases import main, stages_from_locks, summarize, table  # noqa: E402  (benchmarks/phases.py)

from vlcp.run.timing import PHASES  # noqa: E402


def block(**seconds):
    return {p: seconds.get(p, 0.0) for p in PHASES}


def write(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


@pytest.fixture
def clone(tmp_path):
    """A clone after a repro: stage `run@seqf-0` (one run, its results.json an out), stage
    `run_study@0` (`--jobs 2`, a folder of three runs, one without run_seconds), a base stage's
    skip note, and a stray run in runs-extra/ that no stage holds."""
    root = tmp_path / "clone"
    write(root / "runs/seqf/seed0/results.json",
          {"experiment": "seqf", "wall_seconds": 30.0,
           "run_seconds": block(process_start=0.5, imports=4.0, data=1.0, build=2.0, train=20.0, eval=5.0, other=2.0)})
    study = root / "runs-study/seed0"
    write(study / "a/seed0/results.json", {"experiment": "a", "run_seconds": block(process_start=0.5, imports=4.0,
                                                                                    data=1.0, train=10.0, eval=2.0)})
    write(study / "b/seed0/results.json", {"experiment": "b", "run_seconds": block(data=0.1, train=10.0, eval=2.0)})
    write(study / "c/seed0/results.json", {"experiment": "c", "wall_seconds": 14.0,
                                           "train": [{"seconds": 6.0, "eval_seconds": 1.0},
                                                     {"seconds": 4.0, "eval_seconds": 1.0}]})
    write(root / "runs-base/base/seed0/results.json", {"skipped": "not trained"})
    write(root / "runs-extra/x/seed0/results.json", {"experiment": "x", "run_seconds": block(train=1.0)})
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "run": {"matrix": {"experiment": ["seqf"], "seed": [0]}, "cmd": "vlcp run ${item.experiment} --seed ${item.seed}",
                "outs": ["runs/${item.experiment}/seed${item.seed}/results.json"]},
        "run_study": {"foreach": [0], "do": {"cmd": "vlcp run --list study --seed ${item} --jobs 2 --out runs-study/seed${item}",
                                             "outs": ["runs-study/seed${item}"]}},
        "base": {"cmd": "vlcp pretrain base", "outs": ["runs-base/base/seed0/results.json"]}}}))
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {
        "run@seqf-0": {"cmd": "vlcp run seqf --seed 0", "outs": [{"path": "runs/seqf/seed0/results.json"}]},
        "run_study@0": {"cmd": "vlcp run --list study --seed 0 --jobs 2 --out runs-study/seed0",
                        "outs": [{"path": "runs-study/seed0"}]},
        "base": {"cmd": "vlcp pretrain base", "outs": [{"path": "runs-base/base/seed0/results.json"}]}}}))
    return root


def test_runs_are_summed_per_stage_with_the_stage_remainder(clone):
    stages = stages_from_locks(clone)
    assert stages["run_study@0"]["workers"] == 2 and stages["run@seqf-0"]["workers"] == 1
    s = summarize(clone, stages, {"run@seqf-0": 40.0, "run_study@0": 30.0})
    spine, study = s["stages"]["run@seqf-0"], s["stages"]["run_study@0"]
    assert (spine["runs"], spine["total"], spine["unaccounted_seconds"]) == (1, 34.5, 5.5)
    assert study["runs"] == 3 and study["legacy_runs"] == 1
    assert study["seconds"]["train"] == 30.0 and study["seconds"]["eval"] == 6.0
    assert study["seconds"]["other"] == 2.0          # the legacy run's wall less its training and evaluation
    assert study["seconds"]["imports"] == 4.0 and study["seconds"]["data"] == 1.1
    assert study["total"] == 43.6 and study["unaccounted_seconds"] == pytest.approx(30.0 * 2 - 43.6)
    assert s["unmapped"] == ["runs-extra/x/seed0/results.json"] and s["skipped"] == 1
    assert s["stages"]["(no stage)"]["total"] == 1.0
    assert s["all"]["runs"] == 5 and s["all"]["total"] == pytest.approx(34.5 + 43.6 + 1.0)
    assert s["all"]["stage_seconds"] == 70.0 and s["all"]["unaccounted_seconds"] == pytest.approx(5.5 + 16.4)
    text = table(s)
    assert text.splitlines()[0].split()[:3] == ["stage", "runs", "start"] and "run_study@0" in text


def test_the_json_and_the_table(clone, tmp_path, capsys):
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(json.dumps({"stages": {"run@seqf-0": 40.0}}))
    out = tmp_path / "phases.json"
    main([str(clone), "--lock", "--pipeline", str(pipeline), "--out", str(out)])
    got = json.loads(out.read_text())
    assert got["phases"] == list(PHASES) and got["stages"]["run@seqf-0"]["stage_seconds"] == 40.0
    assert got["stages"]["run_study@0"]["stage_seconds"] is None and "date" in got
    assert "run@seqf-0" in capsys.readouterr().out


def test_stages_as_dvc_resolves_dvc_yaml(clone):
    """Without --lock the stages come from dvc.yaml as DVC resolves it (matrix and foreach): the same."""
    pytest.importorskip("dvc")
    from dvc.repo import Repo

    from phases import stages_from_dvc

    (clone / "dvc.lock").unlink()
    Repo.init(str(clone), no_scm=True).close()
    stages = stages_from_dvc(clone)
    assert set(stages) == {"run@seqf-0", "run_study@0", "base"} and stages["run_study@0"]["workers"] == 2
    assert summarize(clone, stages)["stages"]["run_study@0"]["runs"] == 3
