"""benchmarks/throughput.py's `Turns`: two loops take turns of `every` steps, one at a time, and
each is charged only its own turns; a loop that fails stops the measurement once both are done."""
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import throughput  # noqa: E402  (benchmarks/throughput.py)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def fake_loop(name, steps, cost, clock, log, fail_at=None):
    """A 'training loop': draws a batch (`turn`), then spends `cost` seconds of the fake clock."""
    def run(turn):
        clock.now += 0.5 * cost                    # set-up before its first batch
        for step in range(steps):
            turn()
            if step == fail_at:
                raise RuntimeError(f"{name} failed at step {step}")
            log.append((name, step))
            clock.now += cost
    return run


@pytest.mark.parametrize("every", [1, 2, 3])
def test_loops_alternate_by_turns_and_each_is_charged_its_own_time(monkeypatch, every):
    clock, log = FakeClock(), []
    monkeypatch.setattr(throughput.time, "perf_counter", clock)
    seconds = throughput.Turns(every, torch.device("cpu")).run(
        {"a": fake_loop("a", 6, 1.0, clock, log), "b": fake_loop("b", 6, 3.0, clock, log)})
    assert seconds == {"a": 6.5, "b": 19.5}        # its steps and set-up only, none of the other's
    # a hand-over at every `every`-th batch drawn: the first turn holds the set-up and `every` - 1 steps
    chunks = [range(0, every - 1)] + [range(i, min(i + every, 6)) for i in range(every - 1, 6, every)]
    assert log == [(n, s) for chunk in chunks for n in "ab" for s in chunk]


def test_the_first_named_loop_starts_and_a_finished_loop_leaves_the_other_running(monkeypatch):
    clock, log = FakeClock(), []
    monkeypatch.setattr(throughput.time, "perf_counter", clock)
    seconds = throughput.Turns(1, torch.device("cpu")).run(
        {"b": fake_loop("b", 2, 1.0, clock, log), "a": fake_loop("a", 5, 1.0, clock, log)})
    assert log == [("b", 0), ("a", 0), ("b", 1), ("a", 1), ("a", 2), ("a", 3), ("a", 4)]
    assert seconds == {"b": 2.5, "a": 5.5}


def test_a_failing_loop_is_reraised_after_the_other_finishes(monkeypatch):
    clock, log = FakeClock(), []
    monkeypatch.setattr(throughput.time, "perf_counter", clock)
    with pytest.raises(RuntimeError, match="a failed at step 2"):
        throughput.Turns(1, torch.device("cpu")).run(
            {"a": fake_loop("a", 6, 1.0, clock, log, fail_at=2), "b": fake_loop("b", 4, 1.0, clock, log)})
    assert [s for n, s in log if n == "b"] == [0, 1, 2, 3] and [s for n, s in log if n == "a"] == [0, 1]
