"""Leaderboard track 1's compute-matched steps: FoMo-in-Flux's budget rule over a whole stream, the
committed measurements (vlcp/report/studies/leaderboard/budget.yaml) against a fresh one, and the
params.yaml experiments that run them."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from vlcp.config import load_params, resolve_experiment
from vlcp.run import step_costs
from vlcp.run.accounting import mafs_steps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from leaderboard_budget import OUT, as_cost, cost  # noqa: E402

BUDGET = yaml.safe_load(OUT.read_text())


def test_the_rule_over_a_stream_by_hand():
    ref = {"flops": 10, "task_flops": 0, "memory": {"total": 100}}
    own = {"flops": 16, "task_flops": 5, "memory": {"total": 125}}
    # full fine-tuning spends 480 x 10 over the stream; the method pays 9 tasks x 5 x 1.25 of passes,
    # then 16 x 1.25 = 20 a step: (4800 - 56.25) / 20 = 237.2 -> 237
    steps, rec = mafs_steps(480, ref, own, tasks=9)
    assert steps == 237 and rec["memory_multiplier"] == 1.25
    assert mafs_steps(480, ref, own)[0] == (4800 - 6.25) // 20   # one task: the concept stream's per-task budget
    assert mafs_steps(480, ref, ref, tasks=9)[0] == 480
    assert mafs_steps(480, ref, own, use_mafs=False, tasks=9)[0] == 480


def test_committed_steps_follow_the_rule():
    for name, row in BUDGET["experiments"].items():
        steps, _ = mafs_steps(BUDGET["reference_steps"], as_cost(BUDGET["full_ft"]), as_cost(row), tasks=BUDGET["tasks"])
        assert row["steps"] == steps, name


def test_params_run_the_committed_steps():
    params = load_params(ROOT / "params.yaml")
    track = params["report"]["leaderboard"]["track1"]
    assert list(BUDGET["experiments"]) == track["experiments"], "re-run benchmarks/leaderboard_budget.py"
    matched = {resolve_experiment(params, e).method.name: resolve_experiment(params, e) for e in track["compute_matched"]}
    assert len(matched) == len(track["compute_matched"]), "one compute-matched experiment per method"
    for name, row in BUDGET["experiments"].items():
        assert resolve_experiment(params, name).train.steps == BUDGET["reference_steps"], name
        if row["steps"] == BUDGET["reference_steps"]:
            assert row["method"] not in matched, f"{row['method']}: its equal-steps run is its compute-matched one"
        else:
            assert row["method"] in matched, f"{name}: no experiment of track1.compute_matched runs {row['method']}"
            assert matched[row["method"]].train.steps == row["steps"], (
                f"{row['method']}: set train.steps {row['steps']} (budget.yaml) in its compute_matched experiment")
    assert set(matched) <= {r["method"] for r in BUDGET["experiments"].values()}


@pytest.mark.parametrize("name", ["lb1-seqf", "lb1-ewc", "lb1-lwf"])
def test_committed_costs_are_measured_again(name, emoji_root):
    params = load_params(ROOT / "params.yaml")
    cfg = resolve_experiment(params, name, 0, [f"data.root={emoji_root}", "train.progress=false"])
    c = step_costs(cfg)
    assert c["num_tasks"] == BUDGET["tasks"]
    assert cost(c["full_ft"]) == BUDGET["full_ft"]
    row = BUDGET["experiments"][name]
    got = {**cost(c["method"]), "method": cfg.method.name, "trainable_params": c["trainable_params"]}
    assert got == {k: row[k] for k in got}
