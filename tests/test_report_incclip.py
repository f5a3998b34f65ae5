"""The IncCLIP report's table functions on hand-made results."""
import pytest

from vlcp.report import incclip as ic
from vlcp.report.claims import combine, greater
from vlcp.report.results import step_time


def result(acc, matrix, seconds):
    cls = {k: acc for k in ic.CLASSIFICATION}
    cell = {f"{d}@{k}": acc for d in ("TR", "IR") for k in (1, 5, 10)} | {"Rm": acc}
    return {"heldout": [{"classification": cls, "retrieval": {"test": cell, "unseen_style": cell}}],
            "matrix": {"test": {"Rm": matrix}},
            "train": [{"seconds": 100.0, "steps": 10}, {"seconds": seconds, "steps": 20}, {"seconds": seconds, "steps": 20}]}


def test_classification_average_and_retrieval_columns():
    r = result(12.0, [[1.0]], 1.0)
    row = ic.classification(r)
    assert row["Average"] == 12.0 and len(row) == len(ic.CLASSIFICATION) + 1
    t = ic.retrieval(r)
    assert t[("unseen items", "I2T", "R@5")] == 12.0 and len(t) == 12


def test_chunk_bwt_hand_computed():
    # after step 1: chunk 0 = 10; after step 2: chunk 0 = 4, chunk 1 = 8 -> BWT = 4 - 10 = -6
    r = result(0.0, [[10.0, 0.0], [4.0, 8.0]], 1.0)
    assert ic.chunk_bwt(r, "Rm", "test") == pytest.approx(-6.0)


def test_step_time_skips_the_first_task():
    assert step_time(result(0, [[0]], 2.0)) == pytest.approx(4.0 / 40)


def test_noise_floor_makes_small_single_seed_gaps_inconclusive():
    assert greater([10.5], [10.0]) == "confirmed"
    assert greater([10.5], [10.0], floor=1.0) == "inconclusive"
    assert greater([12.0], [10.0], floor=1.0) == "confirmed"
    assert greater([9.0], [10.0], floor=1.0) == "not confirmed"
    assert combine(["confirmed", "inconclusive"]) == "inconclusive"
    assert combine(["confirmed", "not confirmed", "inconclusive"]) == "not confirmed"
