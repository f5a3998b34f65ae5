"""Replay buffer, schedules and step allocation at known values."""
import math

import pytest
import torch

from vlcp.data.buffer import ReservoirBuffer
from vlcp.train.budget import allocate_steps
from vlcp.train.schedules import cosine_with_warmup


def test_reservoir_fills_then_keeps_capacity():
    buf = ReservoirBuffer(5, seed=0)
    buf.add(torch.arange(3))
    assert sorted(buf.ids.tolist()) == [0, 1, 2] and buf.seen == 3
    buf.add(torch.arange(3, 100))
    assert len(buf) == 5 and buf.seen == 100
    assert set(buf.ids.tolist()) <= set(range(100))


def test_reservoir_is_uniform_over_the_stream():
    # each of 200 ids should be kept with probability 20/200; count over 400 seeds
    counts = torch.zeros(200)
    for seed in range(400):
        buf = ReservoirBuffer(20, seed=seed)
        buf.add(torch.arange(200))
        counts[buf.ids] += 1
    first, last = counts[:100].sum().item(), counts[100:].sum().item()
    assert abs(first - last) / (first + last) < 0.05  # early and late items equally likely
    assert counts.sum().item() == 20 * 400


def test_reservoir_state_round_trip_is_deterministic():
    a = ReservoirBuffer(10, seed=1)
    a.add(torch.arange(50))
    b = ReservoirBuffer(10, seed=99)
    b.load_state_dict(a.state_dict())
    a.add(torch.arange(50, 80))
    b.add(torch.arange(50, 80))
    assert a.ids.tolist() == b.ids.tolist()
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert a.sample(7, g1).tolist() == b.sample(7, g2).tolist()
    assert ReservoirBuffer(0).sample(4, g1).numel() == 0
    with pytest.raises(ValueError):
        ReservoirBuffer(-1)


def test_cosine_with_warmup_known_steps():
    lr = lambda s: cosine_with_warmup(s, total=110, base_lr=1.0, warmup=10, min_lr=0.1)  # noqa: E731
    assert lr(0) == pytest.approx(0.1)          # (0 + 1) / 10
    assert lr(9) == pytest.approx(1.0)          # end of warmup
    assert lr(10) == pytest.approx(1.0)         # cosine starts at the peak
    assert lr(60) == pytest.approx(0.55)        # halfway: min + (max - min) / 2
    assert lr(110) == pytest.approx(0.1) and lr(500) == pytest.approx(0.1)
    assert cosine_with_warmup(5, 10, 2.0) == pytest.approx(1.0 + math.cos(math.pi * 0.5))


def test_allocate_steps():
    assert allocate_steps(100, [10, 30, 60]) == [10, 30, 60]
    assert sum(allocate_steps(601, [85, 385, 130])) == 601
    assert allocate_steps(9, [1, 1, 1], "equal") == [3, 3, 3]
    assert min(allocate_steps(5, [1, 1000])) == 1  # every task trains at least once
