"""The numbers a claim compares, one per run: `MEASURES` maps a claims file's `measure:` name to
a function of one run's results. A study module adds its own in its `MEASURES`."""
from __future__ import annotations

from types import MappingProxyType

from vlcp.eval import continual
from vlcp.report.results import final_metrics, matrix


def final_rm(r: dict) -> float:
    """The final model's Rm on the cumulative test pool (every task)."""
    return final_metrics(r)["Rm"]


def first_task_gain(r: dict) -> float:
    """Task 1's Rm after task 1 − the starting model's, on the unseen style."""
    return matrix(r)[0, 0] - r["zero_shot"]["unseen_style"]["Rm"][0]


def first_task_drop(r: dict) -> float:
    """Task 1's Rm after task 1 − after the last task, on the unseen style."""
    m = matrix(r)
    return m[0, 0] - m[-1, 0]


def forgetting(r: dict) -> float:
    """Max-based forgetting of the unseen style's Rm matrix (`vlcp.eval.continual.forgetting`)."""
    return continual.forgetting(matrix(r))


MEASURES = MappingProxyType({f.__name__: f for f in (final_rm, first_task_gain, first_task_drop, forgetting)})
