"""A notebook's live section in a project without pipeline outputs, run as a user would:
`papermill notebooks/overview.ipynb OUT --cwd notebooks -p run_live True` in a copy of the project
that holds only notebooks/, params.yaml and dvc.yaml (no data/emoji, runs*/, models/, reports/).
The kernel starts in notebooks/ and imports vlcp from this environment. About a minute on 2 cores.

The setup must find the project root from notebooks/ (`vlcp.report.project_root`), say in one line
that the pipeline's outputs are missing instead of failing, and the live section must prepare its
data and run SeqF and ER under `.live/` only, then show its table and plot."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINE_OUTPUTS = ("data/emoji", "runs", "models", "reports", "checkpoints", "configs")


def outputs_of(nb: dict, cell: dict) -> list[dict]:
    return [o for o in cell.get("outputs", []) if o["output_type"] in ("display_data", "execute_result")]


def text_of(o: dict) -> str:
    data = o.get("data", {})
    return "".join(data.get("text/markdown") or data.get("text/plain") or "")


@pytest.mark.slow
def test_overview_runs_live_without_pipeline_outputs(tmp_path):
    pytest.importorskip("papermill")
    for name in ("notebooks", "params.yaml", "dvc.yaml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    out = tmp_path / "out.ipynb"
    env = {**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}   # conftest's Agg would drop the figure
    proc = subprocess.run([sys.executable, "-m", "papermill", "notebooks/overview.ipynb", str(out), "--cwd", "notebooks",
                           "-p", "run_live", "True", "--no-progress-bar"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]

    nb = json.loads(out.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors
    setup = next(c for c in code if "project_root()" in "".join(c["source"]))
    note = " ".join(text_of(o) for o in outputs_of(nb, setup))
    assert "pipeline's outputs are missing" in note and "dvc repro overview" in note
    live_cell = next(c for c in reversed(code) if "".join(c["source"]).startswith("if run_live:"))   # the live section's
    shown = outputs_of(nb, live_cell)
    tables = [text_of(o) for o in shown if "text/html" in o["data"]]
    rows = [{line.split()[0] for line in t.splitlines() if line.strip()} for t in tables]
    assert any({"seqf", "er"} <= r for r in rows) and any("Rm" in t for t in tables), tables   # the final table, both methods
    assert any("image/png" in o["data"] for o in shown)                          # the cumulative curves
    # everything live went to .live/ under the project root; nothing the pipeline (DVC) owns was made
    live = tmp_path / ".live"
    assert (live / "data" / "emoji" / "meta.json").is_file()
    for e in ("seqf", "er"):
        r = json.loads((live / "runs" / e / "seed0" / "results.json").read_text())
        assert r["tasks"] == ["Smileys & Emotion", "Animals & Nature", "Flags"]
        assert r["config"]["data"]["root"] == str(live / "data" / "emoji")
    assert not [p for p in PIPELINE_OUTPUTS if (tmp_path / p).exists()]
    assert not (tmp_path / "notebooks" / ".live").exists()


def test_project_root_walks_up_from_anywhere_below_it(tmp_path, monkeypatch):
    from vlcp.report import project_root

    (tmp_path / "params.yaml").write_text("profile: tiny\n")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "notebooks" / "deeper").mkdir(parents=True)
    assert project_root(tmp_path / "notebooks" / "deeper") == tmp_path.resolve()
    monkeypatch.chdir(tmp_path / "notebooks")
    assert project_root() == tmp_path.resolve()
    (tmp_path / "dvc.yaml").unlink()   # one marker is not enough: the installed package's checkout is next
    assert project_root(tmp_path / "notebooks") == ROOT


def test_missing_outputs_and_live_weights(tmp_path):
    from vlcp.config import load_params, resolve_experiment
    from vlcp.report import live

    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "full" / "a").mkdir(parents=True)
    (tmp_path / "full" / "a" / "results.json").write_text("{}")
    assert live.missing_outputs(tmp_path / "empty", tmp_path / "full", tmp_path / "nothing") == \
        [str(tmp_path / "empty"), str(tmp_path / "nothing")]
    # a model alias's own weights file wins over --set model.pretrained: live runs redirect the alias
    params = load_params(ROOT / "params.yaml")
    cfg = resolve_experiment(live.live_params(params, {"cll": tmp_path / "base.pt"}), "cll-clip", 0, ["train.steps=60"])
    assert cfg.model.pretrained == str(tmp_path / "base.pt") and cfg.train.steps == 60
    assert resolve_experiment(params, "cll-clip").model.pretrained == "models/cll-base.pt"   # params untouched


@pytest.mark.slow
def test_live_pretrain_trains_once_into_live_as_vlcp_pretrain_does(emoji_root, tmp_path, monkeypatch, capsys):
    """`live.pretrain` pretrains as `vlcp pretrain` does (`vlcp.run.pretrain`): the final model as the
    weights file `.live/models/<name>.pt`, the run's results in `.live/runs-base/`, nothing printed;
    a second call with the same config reuses the file."""
    import torch

    from vlcp.config import load_params
    from vlcp.report import live
    from vlcp.train.checkpoint import load_checkpoint
    from vlcp.utils import read_results

    monkeypatch.setattr(live, "prepare_data", lambda params, root=None: emoji_root)
    params, shrink = load_params(ROOT / "params.yaml"), ["train.steps=4", "data.stream=instance", "data.num_tasks=2"]
    weights = live.pretrain(params, "cll-base", shrink, root=tmp_path)
    assert capsys.readouterr().out == ""
    here = tmp_path / ".live"
    assert weights == here / "models" / "cll-base.pt"
    state = torch.load(weights, weights_only=True)
    final = load_checkpoint(here / "checkpoints-base" / "cll-base" / "seed0" / "checkpoint.pt")["model"]
    assert state.keys() == final.keys() and all(torch.equal(state[k], final[k]) for k in state)
    assert read_results(here / "runs-base" / "cll-base" / "seed0" / "results.json")["experiment"] == "cll-base"
    written = weights.stat().st_mtime_ns
    assert live.pretrain(params, "cll-base", shrink, root=tmp_path) == weights and weights.stat().st_mtime_ns == written
