"""Does the stream teach? (vlcp.report.teach) on hand-made results dicts of each study's shape,
its bar plot, and the deviations table's markdown rendering."""
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

from vlcp.errors import VlcpError
from vlcp.report import teach

matplotlib.use("Agg")

TASKS = ["A", "B", "C"]


def matrix_run(diagonal, zero=10.0, seed=0, metric="Rm", eval_set="test", off=None):
    """A CTP/IncCLIP-shaped run: a[i][i] = diagonal[i], every other cell `off` (default: `zero`),
    the zero-shot row all `zero`."""
    off = zero if off is None else off
    a = [[diagonal[i] if i == j else off for j in range(len(TASKS))] for i in range(len(TASKS))]
    return {"experiment": "x", "seed": seed, "tasks": TASKS,
            "zero_shot": {eval_set: {metric: [zero] * len(TASKS)}}, "matrix": {eval_set: {metric: a}}}


def test_a_rising_diagonal_teaches_and_a_flat_one_does_not():
    sizes = [400, 400, 400]
    rising = teach.task_gains([matrix_run([40.0, 50.0, 60.0])], "Rm", "test", sizes)
    assert list(rising["gain_mean"]) == pytest.approx([30.0, 40.0, 50.0])   # a[t][t] - a[t-1][t] (= 10), task 0: zero-shot
    assert rising["teaches"].all() and (rising["n_seeds"] == 1).all()
    flat = teach.task_gains([matrix_run([10.0, 10.0, 10.0])], "Rm", "test", sizes)
    assert list(flat["gain_mean"]) == [0.0, 0.0, 0.0] and not flat["teaches"].any()
    assert list(rising["baseline"]) == [teach.ZERO_SHOT, teach.PREVIOUS, teach.PREVIOUS]


def test_before_is_the_previous_model_not_the_zero_shot_one():
    r = matrix_run([40.0, 50.0, 60.0], zero=10.0, off=30.0)   # earlier models already 30 on later tasks
    g = teach.task_gains([r], "Rm", "test", [100] * 3)
    assert list(g["before"]) == [10.0, 30.0, 30.0] and list(g["gain_mean"]) == [30.0, 20.0, 30.0]


def test_one_seed_noise_is_the_sampling_se_of_a_difference_of_two_proportions():
    g = teach.task_gains([matrix_run([40.0, 10.0, 10.0], zero=10.0)], "Rm", "test", [100, 200, 300])
    se0 = 100 * math.sqrt((0.1 * 0.9 + 0.4 * 0.6) / 100)
    se1 = 100 * math.sqrt((0.1 * 0.9 + 0.1 * 0.9) / 200)
    assert g["noise"].iloc[0] == pytest.approx(se0) and g["noise"].iloc[1] == pytest.approx(se1)
    assert g["noise_source"].iloc[0] == "sampling SE, difference of two proportions (n = 100)"
    assert list(g["n"]) == [100, 200, 300]
    # a gain just below / above 2 x SE on the same pool
    small = teach.task_gains([matrix_run([10.0 + 1.9 * se1, 10.0, 10.0])], "Rm", "test", [200] * 3)
    assert not small["teaches"].iloc[0]
    # without pool sizes one seed has no noise: nothing counts as teaching, and it says so
    none = teach.task_gains([matrix_run([40.0, 50.0, 60.0])], "Rm", "test")
    assert none["noise"].isna().all() and not none["teaches"].any()
    assert none["noise_source"].iloc[0].startswith("unknown")


def test_recorded_gains_are_task_gains_where_runs_hold_per_task_scores():
    runs = [matrix_run([40.0 + d, 12.0 + d, 10.0], seed=s) for s, d in enumerate((0.0, 2.0, 4.0))]
    pd.testing.assert_frame_equal(teach.recorded_gains(runs, "Rm"), teach.task_gains(runs, "Rm", "test"))
    older = [{k: v for k, v in r.items() if k != "matrix"} for r in runs]   # results written before the matrix was
    assert teach.recorded_gains(older, "Rm") is None and teach.recorded_gains(runs, "Rm", "unseen_style") is None
    assert teach.recorded_gains([], "Rm") is None


def test_three_seeds_noise_is_the_seed_std_of_the_gain():
    runs = [matrix_run([40.0 + d, 12.0 + d, 10.0], seed=s) for s, d in enumerate((0.0, 2.0, 4.0))]
    g = teach.task_gains(runs, "Rm", "test", [10, 10, 10])   # pool sizes are not used with >= 2 seeds
    assert g["gain_mean"].iloc[0] == pytest.approx(32.0) and g["noise"].iloc[0] == pytest.approx(2.0)
    assert g["gain_mean"].iloc[1] == pytest.approx(4.0) and g["noise"].iloc[1] == pytest.approx(2.0)
    assert list(g["teaches"]) == [True, False, False]   # 4 is not > 2 x 2; task 2 gains nothing
    assert (g["n_seeds"] == 3).all() and set(g["noise_source"]) == {"seed std of the gain (3 seeds)"}


def test_language_runs_fall_back_to_the_base_model_for_an_unlearned_language():
    nan = None
    r = {"experiment": "cll", "seed": 0, "stream": "language", "languages": ["en", "de", "fr"],
         "tasks": ["en", "de+fr"], "task_languages": [["en"], ["de", "fr"]],
         "zero_shot": {"in_domain": {"IR@1": [30.0, 5.0, 7.0]}},
         "matrix": {"in_domain": {"IR@1": [[32.0, nan, nan], [31.0, 25.0, 17.0]]}}}
    g = teach.task_gains([r], "IR@1", "in_domain", {"en": 100, "de": 50, "fr": 50})
    assert list(g["task"]) == ["en", "de+fr"]
    assert list(g["before"]) == pytest.approx([30.0, 6.0]) and list(g["after"]) == pytest.approx([32.0, 21.0])
    assert g["baseline"].iloc[1] == teach.ZERO_SHOT and g["n"].iloc[1] == 100
    se = 100 * math.sqrt(0.25 * (0.05 * 0.95 + 0.25 * 0.75) / 50 + 0.25 * (0.07 * 0.93 + 0.17 * 0.83) / 50)
    assert g["noise"].iloc[1] == pytest.approx(se)


def test_fomo_runs_weight_the_datasets_of_the_task_by_its_concepts():
    def point(a, b, r=50.0):
        return {"datasets": {"a": a, "b": b, "r": r}}
    r = {"experiment": "fomo-ft", "seed": 0, "zero_shot": point(10.0, 20.0),
         "trajectory": [point(40.0, 20.0), point(40.0, 60.0)],
         "tasks": [["a+++x", "a+++y", "b+++z"], ["b+++w"]],
         "datasets": {"a": {"role": "adaptation", "n": 100}, "b": {"role": "adaptation", "n": 300},
                      "r": {"role": "retention", "n": 500}}}
    g = teach.task_gains([r], "A_KA")
    assert list(g["task"]) == ["task 1", "task 2"]
    assert g["before"].iloc[0] == pytest.approx(2 / 3 * 10 + 1 / 3 * 20)
    assert g["gain_mean"].iloc[0] == pytest.approx(2 / 3 * 30) and g["gain_mean"].iloc[1] == pytest.approx(40.0)
    assert g["noise"].iloc[1] == pytest.approx(100 * math.sqrt((0.2 * 0.8 + 0.6 * 0.4) / 300))
    assert g["teaches"].all()
    with pytest.raises(VlcpError, match="A_KA"):
        teach.task_gains([r], "GM")
    bad = {**r, "tasks": [["r+++x"], ["b+++w"]]}
    with pytest.raises(VlcpError, match="'r'"):
        teach.task_gains([bad], "A_KA")


def test_fomo_runs_with_per_class_scores_read_each_concepts_own_images():
    # task 1 trains x, y (dataset a) and z (dataset b); task 2 trains w (b). Classes the tasks do not
    # train (a's v) move the dataset score, not the task's gain; a concept without test images (u)
    # falls back to its dataset's score
    def point(x, y, z, w, a, b):
        return {"datasets": {"a": a, "b": b, "r": 50.0}, "classes": {"a": {"x": x, "y": y, "v": 0.0}, "b": {"z": z, "w": w}}}
    r = {"experiment": "fomo-ft", "seed": 0,
         "zero_shot": point(0.0, 10.0, 20.0, 30.0, a=5.0, b=25.0),
         "trajectory": [point(60.0, 40.0, 50.0, 30.0, a=30.0, b=40.0), point(50.0, 40.0, 45.0, 90.0, a=28.0, b=70.0)],
         "tasks": [["a+++x", "a+++y", "b+++z"], ["b+++w", "a+++u"]],
         "datasets": {"a": {"role": "adaptation", "n": 30, "class_n": {"x": 10, "y": 10, "v": 10}},
                      "b": {"role": "adaptation", "n": 20, "class_n": {"z": 10, "w": 10}},
                      "r": {"role": "retention", "n": 500}}}
    parts = teach.pool_scores(r, "A_KA")
    assert list(parts["part"]) == ["a+++x", "a+++y", "b+++z", "b+++w", "a"]
    g = teach.task_gains([r], "A_KA")
    assert g["gain_mean"].iloc[0] == pytest.approx((60 + 30 + 30) / 3)       # own classes: +60, +30, +30
    assert g["gain_mean"].iloc[1] == pytest.approx((60 + (28 - 30)) / 2)    # w: +60; u: its dataset a, −2
    assert g["n"].iloc[0] == 30 and g["n"].iloc[1] == 40
    old = {**r, "zero_shot": {"datasets": r["zero_shot"]["datasets"]}}      # a run without per-class scores
    assert list(teach.pool_scores(old, "A_KA")["part"]) == ["a", "b", "b", "a"]


def test_class_accuracy_is_each_classes_share_of_its_images():
    import torch

    from vlcp.eval.fomo import class_accuracy

    acc = class_accuracy(torch.tensor([0, 1, 1, 2, 0]), torch.tensor([0, 0, 1, 1, 0]), ["p", "q", "r"])
    assert acc == {"p": pytest.approx(200 / 3), "q": 50.0}                # r has no images: left out


def test_errors_name_the_missing_field_and_mismatched_runs():
    with pytest.raises(VlcpError, match=r"matrix\['unseen_style'\]\['Rm'\].*has: test"):
        teach.task_gains([matrix_run([1.0, 2.0, 3.0])], "Rm", "unseen_style")
    with pytest.raises(VlcpError, match="ZS@1"):
        teach.task_gains([matrix_run([1.0, 2.0, 3.0])], "ZS@1", "test")
    other = {**matrix_run([1.0, 2.0, 3.0], seed=1), "tasks": ["A", "C", "B"]}
    with pytest.raises(VlcpError, match="not runs of one experiment"):
        teach.task_gains([matrix_run([1.0, 2.0, 3.0]), other], "Rm")
    with pytest.raises(VlcpError, match="empty"):
        teach.task_gains([], "Rm")
    with pytest.raises(VlcpError, match="pool_sizes"):
        teach.task_gains([matrix_run([1.0, 2.0, 3.0])], "Rm", "test", [1, 2])


def test_sentence_and_plot():
    g = teach.task_gains([matrix_run([40.0, 10.0, 60.0])], "Rm", "test", [400] * 3)
    s = teach.teach_sentence(g, "SeqF")
    assert s == ("SeqF: training teaches on 2 of 3 tasks (gain > 2 × noise); median gain +30.0 points "
                 "(noise: sampling SE, difference of two proportions).")
    framed = teach.gains_frame({"SeqF": g, "CTP": g})
    assert list(framed.index.get_level_values("task")) == TASKS and len(framed.columns) == 10
    assert list(framed["CTP"].columns) == ["before", "after", "gain", "noise (sampling SE)", "teaches"]
    assert list(framed[("SeqF", "teaches")]) == [True, False, True]
    from vlcp.report.plots import task_gain_bars

    fig = task_gain_bars({"SeqF": g, "CTP": g}, title="Rm")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == TASKS
    assert any("noise: sampling SE" in t.get_text() for t in fig.texts)
    assert np.isclose(max(p.get_height() for p in ax.patches), 50.0)   # the tallest gain bar
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_deviations_markdown_escapes_and_says_when_empty(monkeypatch):
    from vlcp.report import deviations as dv

    params = {"profile": "tiny", "experiments": {}}
    monkeypatch.setattr(dv, "PAPER_VALUES", {**dv.PAPER_VALUES, "fomo": ()})
    monkeypatch.setattr(dv, "DEVIATIONS", {**dv.DEVIATIONS, "fomo": ()})
    text = dv.deviations_markdown(params, "fomo")
    assert "`vlcp/report/studies/fomo/paper_values.yaml` and `deviations.yaml`" in text
    assert "**tiny**" in text and "No deviation is listed" in text
    monkeypatch.setattr(dv, "DEVIATIONS", {**dv.DEVIATIONS, "fomo": (dv.Deviation("data", "a | b\nc", "why", "Fig. 6"),)})
    lines = dv.deviations_markdown(params, "fomo").splitlines()
    assert lines[2] == "| kind | what | paper | ours | why | rows | source |"
    assert lines[4] == "| data | a \\| b c |  |  | why | Fig. 6 |  |"


def test_testable_line_says_which_claims_a_stream_that_does_not_teach_leaves_untested():
    frame = lambda flags: pd.DataFrame({"teaches": flags, "gain_mean": [1.0] * len(flags)})  # noqa: E731
    yes = teach.testable_line(frame([True, True, False, False]), ["Table 7 BWT"], "SeqF")
    assert yes.startswith("**The stream teaches**") and "2 of 4" in yes and "Table 7" not in yes
    no = teach.testable_line(frame([True, False, False]), ["forgetting (BWT)", "the upper bound"], "SeqF")
    assert "does not clearly teach" in no and "1 of 3" in no and "forgetting (BWT); the upper bound" in no


def test_the_spines_measures_by_hand():
    """`vlcp.report.results.MEASURES`: what the spine's claims compare and scale by: the final Rm, task 1's
    gain over θ0, its drop by the last task and max-based forgetting (unseen style)."""
    from vlcp.report.results import MEASURES

    def run(final_rm, m, zero_first):
        return {"cumulative": [{"test": {"Rm": final_rm}}], "zero_shot": {"unseen_style": {"Rm": [zero_first, 0.0, 0.0]}},
                "matrix": {"unseen_style": {"Rm": m}}}

    m1 = [[12.0, 0.0, 0.0], [8.0, 10.0, 0.0], [5.0, 7.0, 9.0]]     # task 1: 12 − 2 = 10 gained, 12 − 5 = 7 lost; forgetting (7 + 3) / 2 = 5
    m2 = [[6.0, 0.0, 0.0], [6.0, 4.0, 0.0], [4.0, 4.0, 5.0]]       # task 1: 6 − 2 = 4 gained, 2 lost; forgetting (2 + 0) / 2 = 1
    got = {k: [f(run(10.0, m, 2.0)) for m in (m1, m2)] for k, f in MEASURES.items()}
    assert got == {"final_rm": [10.0, 10.0], "first_task_gain": [10.0, 4.0], "first_task_drop": [7.0, 2.0],
                   "forgetting": [5.0, 1.0]}
