"""The leaderboard's cost table, Pareto front and generated reading, on hand-made runs."""
import pytest

from vlcp.report import leaderboard as lb


def run(flops, steps, seconds, buffer=None):
    method = {"name": "m"} | ({"buffer_size": buffer} if buffer is not None else {})
    return {"config": {"method": method}, "flops_per_step": flops, "wall_seconds": seconds,
            "train": [{"steps": s, "seconds": 1.0} for s in steps]}


def test_costs_are_means_over_seeds():
    runs = {"er": {0: run(2e9, [10, 10], 30.0, 200), 1: run(4e9, [10, 10], 50.0, 200)},
            "seqf": {0: run(1e9, [20], 10.0)}}
    c = lb.costs(runs)
    assert c.loc["er", "GFLOPs/step"] == pytest.approx(3.0) and c.loc["er", "steps"] == 20
    assert c.loc["er", "training PFLOPs"] == pytest.approx((2e9 * 20 + 4e9 * 20) / 2 / 1e15)
    assert c.loc["er", "wall s"] == pytest.approx(40.0)
    assert c.loc["er", "memory (pairs)"] == 200 and c.loc["seqf", "memory (pairs)"] == 0


def test_pareto_front_by_hand():
    score = {"a": 10.0, "b": 12.0, "c": 11.0, "d": 12.0}
    cost = {"a": 1.0, "b": 3.0, "c": 3.0, "d": 5.0}
    # c: b scores higher at the same cost; d: no method scores higher, so it stays on the front
    assert lb.pareto(score, cost) == ["a", "b", "d"]


def test_reading_names_the_tied_group_and_the_baseline():
    scores = {"best": {s: 20.0 + 0.1 * s for s in range(5)},
              "seqf": {s: 5.0 + 0.3 * (s % 2) for s in range(5)}}
    text = lb.reading(scores, "seqf", power_ok=True)
    assert text.startswith("**best** has the best mean of 2 methods at 5 seeds; 1 cannot be told")
    assert "1 beat seqf" in text and "(best)" in text
    assert "exploratory" in lb.reading(scores, "seqf", power_ok=False)


def test_by_method_takes_the_compute_matched_run_of_a_method():
    def named(m, steps):
        return {0: {"config": {"method": {"name": m}}, "train": [{"steps": steps}]}}

    runs = {"lb1-seqf": named("seqf", 480), "lb1-ewc": named("ewc", 480), "lb1c-ewc": named("ewc", 398)}
    equal = lb.by_method(runs, ["lb1-seqf", "lb1-ewc", "lb1-absent"])
    matched = lb.by_method(runs, ["lb1-seqf", "lb1-ewc"], ["lb1c-ewc"])
    assert list(equal) == ["seqf", "ewc"] and equal["ewc"] is runs["lb1-ewc"]
    assert matched["ewc"] is runs["lb1c-ewc"] and matched["seqf"] is runs["lb1-seqf"]


def test_budget_table_reads_the_committed_measurements():
    b = lb.budget()
    assert b.loc["seqf", "steps"] == 480 and b.loc["seqf", "memory ×"] == 1.0
    assert b.loc["ewc", "steps"] < 480 and b.loc["ewc", "pass GFLOPs/task"] > 0
    assert (b["trainable (M)"] > 0).all()
