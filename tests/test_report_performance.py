"""The performance report's method-overhead tables, on hand-made runs."""
import pandas as pd
import pytest

from test_readme import costs_markdown
from vlcp.report import performance as pf
from vlcp.utils import write_json


def run(name, method, seconds, flops, passes=0, mem=100.0, steps=10, seed=0, phases=None, **method_args):
    return {"experiment": name, "seed": seed, "config": {"method": {"name": method, **method_args}},
            "train": [{"steps": steps, "seconds": seconds, "flops_per_step": flops, "task_pass_flops": passes,
                       "peak_memory_mb": mem, **({"phase_seconds": phases} if phases else {})} for _ in range(2)]}


def test_study_overheads_ratios_and_uncounted_work(tmp_path):
    runs = {"ref": [run("ref", "seqf", 1.0, 100), run("ref", "seqf", 3.0, 100, seed=1)],   # 0.2 s/step mean
            "si": [run("si", "si", 3.0, 100, mem=150)],                                    # time 1.5x, FLOPs 1x
            "ewc": [run("ewc", "ewc", 4.0, 150, passes=500)],                               # FLOPs (150*10+500)/10 = 200: 2x
            "teir": [run("teir", "cllclip", 3.0, 100, teir=True)],
            "new": [run("new", "brand-new", 5.0, 100)]}
    for exp, rs in runs.items():
        for r in rs:
            write_json(tmp_path / "study-seed0" / exp / f"seed{r['seed']}" / "results.json", r)
    found = pf.discover_runs(tmp_path, list(runs) + ["absent"])
    assert list(found) == list(runs) and len(found["ref"]) == 2
    t = pf.study_overheads(found, "ref")
    assert t.loc["ref", "time ratio"] == 1 and t.loc["ref", "seeds"] == 2
    assert t.loc["si", "time ratio"] == pytest.approx(1.5) and t.loc["si", "FLOP ratio"] == 1
    assert t.loc["si", "memory ratio"] == 1.5 and not t.loc["si", "within"]
    assert "path-integral" in t.loc["si", "uncounted work"]
    assert t.loc["ewc", "FLOP ratio"] == pytest.approx(2.0) and t.loc["ewc", "within"]      # 2.0 <= 2.0 x 1.1
    assert t.loc["ewc", "uncounted work"] == ""
    assert "TEIR" in t.loc["teir", "uncounted work"]
    assert t.loc["new", "uncounted work"] == "not analysed"
    assert t["extra time by phase (rows over target)"].eq("").all() and t["explained"].eq("").all()   # no phase times
    assert t["own-work ratio"].isna().all()


def test_extra_time_is_located_by_phase_and_checked_against_the_explanation():
    """Per step: ref 10 ms forward, 10 backward, 2 optimizer (22 ms). SI spends +6 ms in after_step
    (a phase its explanation names); LwF's +6 ms are in after_task, which its explanation (the
    distillation in the loss) does not name, and with only its own phases differing it is at the
    reference's time (variance elsewhere); a second LwF run also has +4 ms in forward, so even its
    own-work ratio (26/22) is over: not explained."""
    def ph(**extra):   # seconds per task of 10 steps
        return {"forward": 0.1, "backward": 0.1, "optimizer": 0.02} | {k: v / 100 for k, v in extra.items()}
    runs = {"ref": [run("ref", "seqf", 0.22, 100, phases=ph())],
            "si": [run("si", "si", 0.28, 100, phases=ph(after_step=6, forward=10.5))],
            "lwf": [run("lwf", "lwf", 0.28, 100, phases=ph(after_task=6))],
            "lwf2": [run("lwf2", "lwf", 0.32, 100, phases=ph(after_task=6, forward=14))],
            "odd": [run("odd", "lwf", 0.28, 100, phases=ph(forward=9.0))]}
    phases = pf.study_phases(runs)
    assert list(phases.columns[:3]) == ["forward", "backward", "optimizer"] and "after_task" in phases
    assert phases.loc["si", "after_step"] == pytest.approx(6.0) and phases.loc["ref", "after_step"] == 0
    assert pf.extra_time(phases, "ref", "si").index[0] == "after_step"
    t = pf.study_overheads(runs, "ref")
    assert t.loc["si", "extra time by phase (rows over target)"] == "after_step +6.0 ms"   # forward +0.5: under 10 %
    assert t.loc["si", "explained"] == "its phases" and t.loc["si", "own-work ratio"] == pytest.approx(28.5 / 22)
    assert t.loc["lwf", "extra time by phase (rows over target)"].startswith("after_task +6.0")
    assert t.loc["lwf", "explained"] == "variance elsewhere" and t.loc["lwf", "own-work ratio"] == pytest.approx(1.0)
    assert t.loc["lwf2", "explained"] == "no" and t.loc["lwf2", "own-work ratio"] == pytest.approx(26 / 22)
    assert t.loc["odd", "extra time by phase (rows over target)"] == "none beyond the reference's"
    assert t.loc["odd", "explained"] == "variance elsewhere"
    assert t.loc["ref", "explained"] == "" and t.loc["ref", "own-work ratio"] == 1


def test_study_overheads_needs_flop_counts():
    old = run("ref", "seqf", 1.0, 100)
    for t in old["train"]:
        del t["flops_per_step"]
    with pytest.raises(ValueError, match="no runs with FLOP counts"):
        pf.study_overheads({"ref": [old]}, "ref")


def test_profile_frame_names_the_phase_and_its_ops():
    prof = {"studies": {"S": {"reference": "ref", "experiments": {
        "ref": {"ms_per_step": {"forward": 10.0, "optimizer": 2.0}, "top_ops": {}},
        "teir": {"ms_per_step": {"forward": 10.5, "optimizer": 7.0, "before_task": 1.0},
                 "top_ops": {"optimizer": [["aten::mul_", 3.0], ["aten::_fused_adamw_", 2.5]]}}}}}}
    t = pf.profile_frame(prof)
    assert list(t.index) == [("S", "teir")]
    row = t.loc[("S", "teir")]
    assert row["phase"] == "optimizer" and row["extra ms/step"] == pytest.approx(5.0)
    assert row["its ops (self ms/step)"] == "aten::mul_ 3.0, aten::_fused_adamw_ 2.5"


def test_budget_table_reads_each_paper_at_the_measured_and_the_reference_pace():
    pipe = {"stages": {"prepare": 60.0, "run@seqf-0": 240.0, "run_ctp@0": 1800.0, "run_ctp@1": 1200.0,
                       "ctp_tables": 60.0}, "seqf_seconds_per_step": 0.12}
    budgets = {"spine": {"minutes": 10, "stages": ["prepare", "run"]},
               "ctp": {"minutes": 25, "stages": ["run_ctp", "ctp_tables"]},
               "fomo": {"minutes": 25, "stages": ["run_fomo"]}}
    slow = pf.pace_slowdown(pipe, {"median_seconds_per_step": {"seqf": 0.04}})
    assert slow == pytest.approx(3.0)
    assert pf.pace_slowdown(pipe, None) == pf.pace_slowdown({"stages": {}}, {"median_seconds_per_step": {"seqf": 0.04}}) == 1.0
    both_ends = {**pipe, "seqf_seconds_per_step_end": 0.16}     # the probe after the repro: the mean of both ends
    assert pf.pace_slowdown(both_ends, {"median_seconds_per_step": {"seqf": 0.04}}) == pytest.approx(3.5)
    assert pf.pace_slowdown({**pipe, "seqf_seconds_per_step_end": None}, {"median_seconds_per_step": {"seqf": 0.04}}) == pytest.approx(3.0)
    # stopped and resumed on another day: each attempt's stages at its own pace (the first attempt's
    # start is the spine's SeqF runs; the resumed one probes at its start; the end probe joins the last)
    resumed = {"stages": {"a": 120.0, "b": 100.0}, "seqf_seconds_per_step": 0.08, "seqf_seconds_per_step_end": 0.04,
               "attempts": [{"stage_names": ["a"]}, {"stage_names": ["b"], "seqf_seconds_per_step_start": 0.06}]}
    ref = {"median_seconds_per_step": {"seqf": 0.04}}
    assert pf.pace_slowdown(resumed, ref) == pytest.approx(220 / (120 / 2.0 + 100 / 1.25))
    no_probe = {**resumed, "attempts": [resumed["attempts"][0], {"stage_names": ["b"]}]}   # the second attempt's end alone
    assert pf.pace_slowdown(no_probe, ref) == pytest.approx(220 / (120 / 2.0 + 100 / 1.0))
    old_style = {**resumed, "attempts": [{"stages": 1}, {"stages": 1}]}    # before attempts listed their stages
    assert pf.pace_slowdown(old_style, ref) == pytest.approx(1.5)
    # each study at the pace of the attempt its stages ran in, not the mean over the repro
    assert pf.pace_slowdown(resumed, ref, ["a"]) == pytest.approx(2.0)
    assert pf.pace_slowdown(resumed, ref, ["b"]) == pytest.approx(1.25)
    per = pf.study_slowdowns(resumed, ref, {"first": {"stages": ["a"]}, "second": {"stages": ["b"]}})
    assert per == pytest.approx({"first": 2.0, "second": 1.25})
    bt = pf.budget_table(resumed, {"first": {"minutes": 1, "stages": ["a"]}, "second": {"minutes": 1, "stages": ["b"]}}, per)
    assert list(bt["at reference pace min"]) == pytest.approx([1.0, 100 / 60 / 1.25])
    assert bt["at reference pace min"].sum() == pytest.approx(220 / 60 / pf.pace_slowdown(resumed, ref))   # the whole's sum kept
    costs = pd.DataFrame({"runs": [1, 1], "stages": [1, 1], "measured min": [2.0, 100 / 60],
                          "at reference pace min": list(bt["at reference pace min"]), "budget min": [1, 1],
                          "not timed": ["", ""]}, index=["first", "second"])
    md = costs_markdown(costs, {**resumed, "date": "2026-11-29", "commit": "abc", "cpus": 2})
    assert "2 attempts" in md and "the attempt they ran in" in md
    # a start probe set aside (other work shared the cores): that attempt reads its end alone, and the table says why
    aside = {**no_probe, "attempts": [no_probe["attempts"][0], {**no_probe["attempts"][1], "pace_note": "Probe set aside."}],
             "date": "2026-11-30", "commit": "abc", "cpus": 2}
    assert pf.pace_slowdown(aside, ref) == pf.pace_slowdown(no_probe, ref)
    assert "Probe set aside." in costs_markdown(costs, aside) and "set aside" not in md
    t = pf.budget_table(pipe, budgets, slow)
    assert t.loc["spine", "measured min"] == pytest.approx(5.0) and t.loc["spine", "verdict"] == "confirmed"
    assert t.loc["ctp", "stages"] == 3 and t.loc["ctp", "measured min"] == pytest.approx(51.0)
    assert t.loc["ctp", "at reference pace min"] == pytest.approx(17.0)
    assert (t.loc["ctp", "verdict"], t.loc["ctp", "status"]) == ("inconclusive", "met at the reference pace only")
    assert t.loc["fomo", "status"] == "not built" and t["verdict"].isna()["fomo"]
    assert pf.budget_table(pipe, budgets).loc["ctp", "verdict"] == "refuted"    # no slowdown given


def test_pipeline_stages_expand_as_dvc_names_them():
    """foreach over a list gives name@item, over a mapping name@key, a matrix name@a-b (DVC's names)."""
    from vlcp.report.performance import pipeline_stages

    params = {"seeds": [0, 1], "exps": ["seqf", "er"], "bases": {"b1": "x", "b2": "y"}}
    dvc = {"stages": {"prepare": {"cmd": "x"}, "run": {"matrix": {"experiment": "${exps}", "seed": "${seeds}"}},
                      "base": {"foreach": "${bases}", "do": {}}, "seed": {"foreach": [3], "do": {}}}}
    assert pipeline_stages(dvc, params) == ["prepare", "run@seqf-0", "run@seqf-1", "run@er-0", "run@er-1",
                                            "base@b1", "base@b2", "seed@3"]


def test_time_line_counts_each_run_once_however_nested():
    from vlcp.report.results import iter_results, time_line

    a = {"train": [{"seconds": 50.0, "eval_seconds": 10.0}]}                  # no wall clock: train + eval
    b = {"train": [{"seconds": 1.0, "eval_seconds": 1.0}], "wall_seconds": 120.0}
    assert iter_results({"x": [a], "y": {0: b, 1: a}}) == [a, b, a]
    line = time_line({"x": [a]}, {"y": {0: b, 1: a}})
    assert line.startswith("**2 runs**, **3.0 min**") and "longest 2.0 min" in line
    assert time_line({}) == "No runs read."
    twice = [{**b, "experiment": "e", "seed": 0}, {**b, "experiment": "e", "seed": 0}]   # loaded by two tables
    assert time_line({"t1": twice[:1]}, {"t2": twice[1:]}).startswith("**1 run**,")


def test_a_study_retimed_alone_replaces_its_row_at_its_own_pace():
    """study_costs: a later `benchmarks/pipeline.py --targets` measurement that timed all of a study's
    stages gives that study's minutes, scaled by its own day's slowdown; the others keep the whole repro's."""
    params = {"seeds": [0], "report": {
        "overview": {"experiments": ["seqf"]},
        "ctp": {"experiments": ["a"], "seeds": [0, 1], "ablation_experiments": [], "ablation_seeds": [0]},
        "incclip": {"experiments": [], "seeds": [0]}, "cllclip": {"experiments": [], "seeds": [0]},
        "fomo": {"studies": {}},
        "performance": {"budgets": {"spine": {"minutes": 10, "stages": ["run", "overview"]},
                                    "ctp": {"minutes": 25, "stages": ["run_ctp", "ctp_tables"]}}}}}
    dvc = {"stages": {"run": {"cmd": "x"}, "run_ctp": {"foreach": "${report.ctp.seeds}", "do": {}},
                      "ctp_tables": {"cmd": "x"}}}
    whole = {"date": "2026-11-28T10:00", "commit": "aaa", "cpus": 2,
             "stages": {"run": 120.0, "run_ctp@0": 1200.0, "run_ctp@1": 1200.0, "ctp_tables": 60.0}}
    part = {"date": "2026-11-28T14:00", "commit": "bbb", "targets": ["ctp_tables"], "seqf_seconds_per_step": 0.09,
            "stages": {"run_ctp@0": 600.0, "run_ctp@1": 600.0, "ctp_tables": 60.0}}
    partial = {"date": "2026-11-29T14:00", "commit": "ccc", "targets": ["run_ctp@0"], "stages": {"run_ctp@0": 1.0}}
    spine = {"median_seconds_per_step": {"seqf": 0.045}}
    parts = pf.retimed({"pipeline-ctp": part, "pipeline-one": partial, "pipeline": whole, "other": part}, spine)
    assert [p["commit"] for p, _ in parts] == ["bbb", "ccc"] and parts[0][1] == pytest.approx(2.0)
    c = pf.study_costs(whole, params, dvc, 1.5, parts)
    assert c.loc["ctp", "measured min"] == pytest.approx(21.0)                 # the part's 1,260 s: ccc timed one stage only
    assert c.loc["ctp", "at reference pace min"] == pytest.approx(10.5)        # ÷ its own 2.0, not the whole's 1.5
    assert "bbb" in c.loc["ctp", "measured"] and c.loc["spine", "measured"] == "the whole repro"
    assert c.loc["spine", "at reference pace min"] == pytest.approx(120 / 60 / 1.5)
    md = costs_markdown(c, whole)
    assert "an estimate" in md and "| **all** | 3 | 4 | — | **11.8** | 35 |" in md    # minutes of two paces are not added
    alone = costs_markdown(pf.study_costs(whole, params, dvc, 1.5), whole)
    assert "an estimate" not in alone and "| **all** | 3 | 4 | 43.0 | **28.7** | 35 | |" in alone
    # a whole repro begun later on the part's day (its attempts' start times) takes the study back
    later = {**whole, "date": "2026-11-28", "attempts": [{"started": "2026-11-28T16:37:00+0000", "stages": 4}]}
    earlier = {**part, "date": "2026-11-28", "attempts": [{"started": "2026-11-28T13:22:27+0000", "stages": 3}]}
    assert pf.measured_at(later) == "2026-11-28T16:37:00+0000" and pf.measured_at(partial) == "2026-11-29T14:00"
    again = pf.study_costs(later, params, dvc, 1.5, pf.retimed({"pipeline-ctp": earlier}, spine))
    assert again.loc["ctp", "measured"] == "the whole repro" and again.loc["ctp", "measured min"] == pytest.approx(41.0)
    assert pf.study_costs(whole, params, dvc, 1.5, pf.retimed({"pipeline-ctp": earlier}, spine)).loc[
        "ctp", "measured"].startswith("alone")   # the part began after the whole (no attempts: its date)


def test_study_runs_count_each_budgets_registered_study():
    """study_runs: a budget's study is the registered one whose report stage (its notebook) it lists; its
    runs are its `lists` at their seeds (`ablation_seeds` beside `ablation_experiments`; `seed`: one), its
    `spread`, and one base model per pretraining stage instance; a budget naming no study's stage: None."""
    params = {"seeds": [0, 1], "report": {
        "overview": {"experiments": ["seqf", "er"]},
        "ctp": {"experiments": ["a", "b"], "seeds": [0, 1, 2], "ablation_experiments": ["c"], "ablation_seeds": [0]},
        "fomo": {"seed": 0, "studies": {"x": ["f1", "f2"], "y": ["f3"]},
                 "spread": {"experiments": ["f1"], "seeds": [1, 2]}, "bases": {"b1": "m1.pt", "b2": "m2.pt"}},
        "performance": {"budgets": {"spine": {"stages": ["run", "overview"]},
                                    "ctp": {"stages": ["ctp_base", "ctp_tables"]},
                                    "fomo": {"stages": ["fomo_base", "fomo_figures"]}, "other": {"stages": ["run"]}}}}}
    dvc = {"stages": {"run": {"cmd": "vlcp run"}, "ctp_base": {"cmd": "scripts/venv vlcp pretrain ctp-base"},
                      "fomo_base": {"foreach": "${report.fomo.bases}", "do": {"cmd": "vlcp pretrain ${key}"}}}}
    assert pf.study_runs(params, dvc) == {"spine": 4, "ctp": 2 * 3 + 1 + 1, "fomo": 3 + 2 + 2, "other": None}


def test_time_line_says_when_a_studys_runs_mix_cpu_capabilities():
    from vlcp.report.results import time_line

    run = lambda exp, cap: {"experiment": exp, "seed": 0, "train": [], "wall_seconds": 60.0,  # noqa: E731
                            "versions": {"cpu_capability": cap} if cap else {}}
    same = time_line({"a": [run("a", "AVX2")], "b": [run("b", "AVX2")], "c": [run("c", None)]})
    assert "CPU capabilities" not in same
    mixed = time_line({"a": [run("a", "AVX2")], "b": [run("b", "AVX512")], "c": [run("c", None)]})
    assert "mix CPU capabilities** (1 on AVX2, 1 on AVX512, 1 unrecorded)" in mixed
    assert "Warning:" not in mixed           # the tiny repro's check that no library warning tops a report


def test_a_part_stands_for_a_study_but_its_shared_stages_keep_the_whole_repros_minutes():
    """study_costs: a budget's `shared` stages (the index reads every study's reports) cannot be timed
    alone; a part that timed the study's other stages stands for them, the shared ones keep the whole
    repro's minutes at its own pace, and the row's slowdown is measured ÷ at the reference pace."""
    params = {"seeds": [0], "report": {
        "overview": {"experiments": ["seqf"]},
        "ctp": {"experiments": [], "seeds": [0], "ablation_experiments": [], "ablation_seeds": [0]},
        "incclip": {"experiments": [], "seeds": [0]}, "cllclip": {"experiments": [], "seeds": [0]},
        "fomo": {"studies": {}},
        "performance": {"budgets": {"spine": {"minutes": 10, "stages": ["run", "overview", "index"],
                                              "shared": ["index"]}}}}}
    dvc = {"stages": {"run": {"cmd": "x"}, "overview": {"cmd": "x"}, "index": {"cmd": "x"}}}
    whole = {"date": "2026-11-29T10:00", "commit": "aaa", "cpus": 2,
             "stages": {"run": 120.0, "overview": 60.0, "index": 30.0}}
    part = {"date": "2026-11-30T10:00", "commit": "bbb", "targets": ["overview"], "seqf_seconds_per_step": 0.09,
            "stages": {"run": 240.0, "overview": 60.0}}
    spine = {"median_seconds_per_step": {"seqf": 0.045}}
    c = pf.study_costs(whole, params, dvc, 1.5, pf.retimed({"pipeline-spine": part}, spine)).loc["spine"]
    assert c["measured min"] == pytest.approx((240 + 60 + 30) / 60)
    assert c["at reference pace min"] == pytest.approx((300 / 2.0 + 30 / 1.5) / 60)   # each at its own pace
    assert c["slowdown"] == pytest.approx(330 / (150 + 20)) and c["not timed"] == ""
    assert c["measured"] == "alone, 2026-11-30 at bbb (2.00 × slow); index: the whole repro"
    # without `shared`, the part did not time every stage: the whole repro stands
    params["report"]["performance"]["budgets"]["spine"].pop("shared")
    c = pf.study_costs(whole, params, dvc, 1.5, pf.retimed({"pipeline-spine": part}, spine)).loc["spine"]
    assert c["measured"] == "the whole repro" and c["measured min"] == pytest.approx(3.5)
