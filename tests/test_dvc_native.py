"""DVC-native: the committed benchmark results match their lock entries, the stages run from the
venv's dvc without activation, and each study's headline metrics and curves reach
`dvc metrics` / `dvc plots`."""
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import tiny_experiment

ROOT = Path(__file__).resolve().parents[1]
DVC = Path(sys.executable).parent / "dvc"


def test_benchmark_stages_are_up_to_date():
    """A fresh clone's `dvc repro` must never re-measure a benchmark and overwrite a committed
    result: every stage of benchmarks/dvc.yaml matches benchmarks/dvc.lock."""
    out = subprocess.run([str(DVC), "status", "benchmarks/dvc.yaml"], cwd=ROOT, capture_output=True, text=True,
                         env=os.environ | {"DVC_NO_ANALYTICS": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "up to date" in out.stdout, f"stale benchmark stages (re-measure or dvc commit them):\n{out.stdout}"


@pytest.mark.parametrize("study, main_seeds", [("incclip", "seeds"), ("cllclip", "seeds"), ("fomo", "seed")])
def test_seed_subsets_add_seeds_to_runs_of_the_study(study, main_seeds):
    """Each study's seed subset (report.<study>.spread, stages run_<study>_seeds) runs experiments the
    study runs anyway, at seeds it does not (the same seed twice would be two DVC stages writing one
    output); with the main seed, ≥ 3 seeds."""
    import yaml

    rep = yaml.safe_load((ROOT / "params.yaml").read_text())["report"][study]
    main = rep[main_seeds] if isinstance(rep[main_seeds], list) else [rep[main_seeds]]
    listed = rep["experiments"] if "experiments" in rep else [e for es in rep["studies"].values() for e in es]
    spread = rep["spread"]
    assert spread["experiments"] and set(spread["experiments"]) <= set(listed)
    assert not set(spread["seeds"]) & set(main) and len(set(spread["seeds"]) | set(main)) >= 3


def test_stages_call_vlcp_through_the_venv_wrapper():
    """`.venv/bin/dvc repro` without activation: every stage command goes through scripts/venv,
    which puts the project's venv first on PATH."""
    for name in ("dvc.yaml", "benchmarks/dvc.yaml"):
        text = (ROOT / name).read_text()
        cmds = [line.split("cmd:", 1)[1].strip() for line in text.splitlines() if "cmd:" in line.split("#")[0]]
        cmds = [c if c not in (">-", "|") else "scripts/venv" for c in cmds]   # folded commands: checked below
        assert cmds and all(c.startswith("scripts/venv ") or c == "scripts/venv" for c in cmds), (name, cmds)
    if not (ROOT / ".venv" / "bin" / "vlcp").exists():
        pytest.skip("no .venv in this checkout (make install makes one)")
    out = subprocess.run(["scripts/venv", "vlcp", "list"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")})
    assert out.returncode == 0 and out.stdout.startswith("overview ("), out.stderr


def test_study_metrics_and_curves(emoji_root, tmp_path):
    """Two tiny runs of a study: metrics/<study>.json holds each experiment's final Rm (mean over
    its seeds) and the claims' verdict counts; plots/<study>.csv one column of per-task Rm each."""
    from vlcp.report.metrics import write_metrics
    from vlcp.run import run_experiment

    runs = {}
    for method, seeds in (("seqf", (0, 1)), ("er", (0,))):
        for seed in seeds:
            cfg = tiny_experiment(emoji_root, method, steps=6)
            cfg.name, cfg.seed = method, seed
            runs.setdefault(method, []).append(
                run_experiment(cfg, tmp_path / "runs" / method / f"seed{seed}", tmp_path / "ck" / method / f"seed{seed}"))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "overview_claims.json").write_text(json.dumps({"report": "overview", "claims": [
        {"claim": "a", "verdict": "confirmed"}, {"claim": "b", "verdict": "inconclusive"},
        {"claim": "c", "verdict": "confirmed"}, {"claim": "d", "verdict": "underpowered"}],
        "power": {"headroom": 9.0, "sigma_d": 0.9, "headroom_over_noise": 10.0, "tasks_teaching": 6, "tasks": 9,
                  "seeds": 3, "mde": 3.1, "metric": "final Rm"}}))
    params = {"report": {"overview": {"experiments": ["seqf", "er"]}}}
    paths = write_metrics(params, tmp_path)
    assert sorted(p.name for p in paths) == ["cllclip.json", "ctp.json", "fomo.json", "incclip.json", "leaderboard.json",
                                                   "overview.json"]
    m = json.loads((tmp_path / "metrics" / "overview.json").read_text())
    final = [r["cumulative"][-1]["test"]["Rm"] for r in runs["seqf"]]
    assert m["run_count"] == 3 and m["experiments"]["seqf"]["Rm"] == pytest.approx(sum(final) / 2, abs=1e-4)
    assert m["experiments"]["er"]["mAP@1"] == pytest.approx(runs["er"][0]["cumulative"][-1]["test"]["mAP@1"], abs=1e-4)
    assert m["claims"] == {"confirmed": 2, "refuted": 0, "underpowered": 1, "not expressible here": 0,
                           "inconclusive": 1, "not testable": 0, "other": 0}
    assert m["power"] == {"headroom": 9.0, "sigma_d": 0.9, "headroom_over_noise": 10.0, "tasks_teaching": 6, "tasks": 9,
                          "seeds": 3}
    assert json.loads((tmp_path / "metrics" / "ctp.json").read_text()) == {"run_count": 0, "experiments": {}, "claims": {}}
    rows = list(csv.DictReader((tmp_path / "plots" / "overview.csv").open()))
    assert [r["task"] for r in rows] == ["1", "2", "3"] and list(rows[0]) == ["task", "seqf", "er"]
    assert float(rows[-1]["er"]) == pytest.approx(runs["er"][0]["cumulative"][-1]["test"]["Rm"], abs=1e-3)
    assert (tmp_path / "plots" / "overview.png").read_bytes().startswith(b"\x89PNG")   # `dvc plots show` offline
    write_metrics(params | {"seeds": [0]}, tmp_path)             # the study's seeds only (a seed subset runs others)
    m = json.loads((tmp_path / "metrics" / "overview.json").read_text())
    assert m["run_count"] == 2 and m["experiments"]["seqf"]["Rm"] == pytest.approx(final[0], abs=1e-4)
    shutil.rmtree(tmp_path / "runs" / "er")                    # a re-run rewrites its own files only
    write_metrics(params, tmp_path)
    assert list(csv.DictReader((tmp_path / "plots" / "overview.csv").open()))[0].keys() == {"task", "seqf"}


def test_metrics_of_one_study_leave_the_others_alone(tmp_path):
    """Each study's report stage writes only its own metrics and curves (`vlcp report metrics --study`),
    so `dvc metrics show` works after `dvc repro ctp_tables` alone."""
    from vlcp.errors import VlcpError
    from vlcp.report.metrics import write_metrics

    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "overview.json").write_text('{"mine": 1}')
    assert [p.name for p in write_metrics({"report": {}}, tmp_path, studies=["ctp"])] == ["ctp.json"]
    assert (tmp_path / "metrics" / "overview.json").read_text() == '{"mine": 1}'
    assert (tmp_path / "plots" / "ctp.csv").exists() and not (tmp_path / "plots" / "overview.csv").exists()
    write_metrics({"report": {}}, tmp_path, studies=["fomo"])
    assert (tmp_path / "plots" / "fomo").is_dir() and (tmp_path / "plots" / "fomo.csv").exists()
    with pytest.raises(VlcpError, match="unknown study 'nope'"):
        write_metrics({"report": {}}, tmp_path, studies=["nope"])


def test_every_study_report_stage_declares_its_metrics_and_plots():
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert "metrics" not in stages
    for stage, study in (("overview", "overview"), ("ctp_tables", "ctp"), ("incclip_ablations", "incclip"),
                         ("cllclip_teir", "cllclip"), ("fomo_figures", "fomo")):
        s = stages[stage]
        assert s["cmd"].endswith(f"vlcp report metrics --study {study}")
        assert [next(iter(m)) for m in s["metrics"]] == [f"metrics/{study}.json"]
        assert {f"plots/{study}.csv", f"plots/{study}.png"} <= {next(iter(p)) for p in s["plots"]}


def test_params_yaml_survives_dvc_set_param(tmp_path):
    """`dvc exp run -S key=value` writes params.yaml back through DVC's own YAML dumper (ruamel,
    round-trip, 80 columns): the file is a fixed point of it, keeps every comment, and one value set
    changes one line."""
    import difflib

    from dvc.utils.serialize import modify_yaml

    text = (ROOT / "params.yaml").read_text()
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with modify_yaml(path):
        pass
    assert path.read_text() == text, "".join(difflib.unified_diff(text.splitlines(True), path.read_text().splitlines(True), n=0))[:3000]
    with modify_yaml(path) as d:
        d["experiments"]["er"]["method"]["buffer_size"] = 400
    changed = [l for l in difflib.unified_diff(text.splitlines(), path.read_text().splitlines(), n=0, lineterm="")
               if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert changed == ["-    method: {name: er, buffer_size: 200, replay_fraction: 0.5}",
                       "+    method: {name: er, buffer_size: 400, replay_fraction: 0.5}"], changed
