"""FoMo-in-Flux report functions on hand-made results (no runs needed)."""
import math

import matplotlib
import pytest

from vlcp.report import fomo as fm

matplotlib.use("Agg")


def run(points, steps=12, mult=1.0, flops=2e6, datasets=None):
    """A results dict with a zero-shot point then one point per task: (A_KA, A_ZS)."""
    datasets = datasets or {"a": {"role": "adaptation", "n": 100}, "b": {"role": "adaptation", "n": 100},
                            "r": {"role": "retention", "n": 400}}
    rows = [{"A_KA": ka, "A_ZS": zs, "GM": math.sqrt(ka * zs),
             "datasets": {"a": ka, "b": ka, "r": zs}} for ka, zs in points]
    mem = {"total": 100 * mult, "parameters": 40, "gradients": 20, "optimizer": 30, "activations": 10 * mult, "method": 0}
    return {"zero_shot": rows[0], "trajectory": rows[1:], "datasets": datasets, "steps_per_task": [steps] * (len(rows) - 1),
            "budget": {"memory_multiplier": mult, "mafs": flops * mult,
                       "method": {"flops": flops, "task_flops": 0, "memory": mem}},
            "train": [{"seconds": 1.5}] * (len(rows) - 1)}


def test_trajectory_endpoint_and_area():
    r = run([(10, 40), (20, 30), (30, 20)])
    t = fm.trajectory(r)
    assert list(t["A_KA"]) == [10, 20, 30] and t.index.name == "after task"
    assert fm.endpoint(r) == {"A_KA": 30, "A_ZS": 20, "GM": pytest.approx(math.sqrt(600))}
    assert fm.trajectory_area(r) == pytest.approx((math.sqrt(600) + math.sqrt(600)) / 2)


def test_summary_changes_and_distance_above_the_line():
    zs, joint = {"A_KA": 10, "A_ZS": 40}, {"A_KA": 50, "A_ZS": 20}
    s = fm.summary({"ft": run([(10, 40), (30, 25)], mult=1.0), "lora": run([(10, 40), (20, 38)], steps=20, mult=0.5)}, zs, joint)
    assert s.loc["ft", "ΔA_KA"] == 20 and s.loc["ft", "ΔA_ZS"] == -15
    # the line from (10, 40) to (50, 20) is at 30 for A_KA 30 and at 35 for A_KA 20
    assert s.loc["ft", "above line"] == pytest.approx(-5) and s.loc["lora", "above line"] == pytest.approx(3)
    assert s.loc["lora", "steps/task"] == 20 and s.loc["lora", "memory ×"] == 0.5 and s.loc["ft", "train s"] == 1.5


def test_macro_floor_is_the_binomial_se_of_the_macro_mean():
    r = run([(10, 40), (50, 20)])
    # adaptation: two sets at p = 0.5, n = 100: SE of the mean = √(2 · 0.25/100) / 2
    assert fm.macro_floor(r, "adaptation") == pytest.approx(2 * math.sqrt(2) * math.sqrt(0.005) / 2 * 100)
    assert fm.macro_floor(r, "retention") == pytest.approx(2 * math.sqrt(2) * math.sqrt(0.2 * 0.8 / 400) * 100)


def test_budget_table_units():
    b = fm.budget_table({"ft": run([(1, 1), (2, 2)], mult=1.0, flops=3e6), "lt": run([(1, 1), (2, 2)], steps=30, mult=0.4)})
    assert b.loc["ft", "MFLOPs/step"] == 3 and b.loc["lt", "memory multiplier"] == 0.4 and b.loc["lt", "steps/task"] == 30
    assert b.loc["ft", "memory MB"] == pytest.approx(100 / 2**20)


def test_schedule_curves_and_trajectory_plot():
    import matplotlib.pyplot as plt

    c = fm.schedule_curves(["cosine", "autoregressive-cosine"], tasks=3, steps=10)
    assert c.shape == (30, 2) and c["cosine"].max() == pytest.approx(1.0)
    assert c["autoregressive-cosine"].iloc[10:20].max() == pytest.approx(0.5)
    fig, ax = plt.subplots()
    fm.trajectory_plot(ax, {"ft": run([(10, 40), (30, 25)])}, {"A_KA": 10, "A_ZS": 40}, {"A_KA": 50, "A_ZS": 20}, "t")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["ft", "zero-shot θ0", "joint"]
    plt.close(fig)


def test_load_study_skips_missing_runs(tmp_path):
    from vlcp.utils import write_json

    write_json(tmp_path / "methods" / "fomo-ft" / "seed0" / "results.json", run([(1, 1), (2, 2)]))
    got = fm.load_study(tmp_path, {"methods": ["fomo-ft", "fomo-lora4"]}, 0)
    assert list(got) == ["fomo-ft"]


def test_memory_order_against_hand_cases():
    paper = {"locked-image": 0.26, "LNFit": 0.66, "BitFit": 0.66, "LoRA, r=4": 0.87, "full-ft": 1.0, "EWC": 1.01, "SI": 1.0}
    assert fm.memory_order_holds(paper)                        # Table 4's own multipliers
    assert not fm.memory_order_holds({**paper, "locked-image": 0.78})   # our tiny model: locked-image above LNFit
    assert not fm.memory_order_holds({**paper, "BitFit": 0.9})          # BitFit above LoRA
    assert not fm.memory_order_holds({**paper, "SI": 0.99})             # SI below full FT
    assert not fm.memory_order_holds({**paper, "LoRA, r=4": 1.0})       # LoRA not below full FT


def test_paper_scale_budget_beside_table4():
    import pandas as pd

    t4 = pd.DataFrame({"per_task_gflops": [100.0], "max_memory_gb": [40.0], "memory_multiplier": [1.0]}, index=["full-ft"])
    bench = {"methods": {"full-ft": {"flops_per_step_at_target": 9e10, "memory_at_target": {"total": 2 * 2**30},
                                     "memory_multiplier": 1.0},
                         "X": {"flops_per_step_at_target": 4.5e10, "memory_at_target": {"total": 2**30},
                               "memory_multiplier": 0.5}}}
    t = fm.paper_scale_budget(bench, t4)
    assert t.loc["full-ft", "GFLOPs/step (ours)"] == 90 and t.loc["full-ft", "GFLOPs/step (paper)"] == 100
    assert t.loc["X", "memory GiB (ours, fp32 accounting)"] == 1 and math.isnan(t.loc["X", "multiplier (paper)"])
