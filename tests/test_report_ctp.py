"""The CTP report (vlcp.report.ctp) on hand-made results dicts, and its notebook on a synthetic runs dir."""
import json
import math

import numpy as np
import pytest
import yaml

from vlcp.report import ctp
from vlcp.errors import VlcpError
from vlcp.report.results import MAP, MAP_STD, RETRIEVAL, fill_pass_flops, find_run, flops_per_step, load_runs

TASKS = ["Smileys & Emotion", "Animals & Nature", "Activities"]


def cell(rm, map1):
    """One cumulative-pool cell: every retrieval metric = rm, every mAP = map1 (standard one lower)."""
    return ({m: float(rm) for m in RETRIEVAL} | {m: float(map1) for m in MAP}
            | {m: float(map1) - 1 for m in MAP_STD})


def result(rm, map1=50.0, seed=0, seconds=10.0, flops=1e9, curve=None, final=None):
    """A results dict: `curve` = Rm after each task on the pool <= i (last = rm), `final` = the final
    model's Rm on each pool (default: no forgetting, final = curve)."""
    curve = list(curve or [rm + 2 * (len(TASKS) - 1 - i) for i in range(len(TASKS))])
    curve[-1] = rm
    final = list(final or curve)
    return {"experiment": "x", "seed": seed, "tasks": TASKS, "task_sizes": [10, 20, 30],
            "config": {"model": {"name": "vlcp-tiny"}, "train": {"steps": 30, "batch_size": 8, "lr": 1e-3},
                       "method": {"name": "er", "buffer_size": 20}},
            "flops_per_step": flops,
            "cumulative": [{"test": cell(c, map1)} for c in curve],
            "final_cumulative": [{k: v for k, v in cell(f, map1).items() if not k.startswith("mAP_std")} for f in final],
            "train": [{"task": t, "steps": 10, "seconds": seconds / len(TASKS), "eval_seconds": 0.1} for t in TASKS]}


def runs_of(spec, seeds=(0, 1, 2)):
    """{exp: (rm mean, seed offsets...)} -> {exp: [results]}; offsets give the seed spread."""
    out = {}
    for exp, (rm, *offsets) in spec.items():
        offs = offsets or [0.0] * len(seeds)
        out[exp] = [result(rm + o, seed=s) for s, o in zip(seeds, offs)]
    return out


# ---------------------------------------------------------------------------------------------
# per-run quantities


def test_final_row_reads_the_last_cumulative_pool_with_both_map_normalisers():
    r = result(30.0, map1=60.0)
    row = ctp.final_row(r)
    assert row["Rm"] == 30.0 and row["TR@10"] == 30.0
    assert row["mAP@1"] == 60.0 and row["mAP_std@10"] == 59.0
    assert set(row) == set(ctp.FINAL)


def test_mean_std_uses_the_sample_std_and_one_seed_has_none():
    m, s = ctp.mean_std([1.0, 2.0, 3.0])
    assert (m, s) == (2.0, 1.0)
    assert ctp.mean_std([5.0]) == (5.0, 0.0)
    assert all(math.isnan(x) for x in ctp.mean_std([]))
    df = ctp.stats_frame({"a": [result(10.0), result(12.0, seed=1), result(14.0, seed=2)], "b": []},
                         lambda rs: {"Rm": ctp.values(rs, "Rm")})
    assert df.loc["a", ("Rm", "mean")] == 12.0 and df.loc["a", ("Rm", "std")] == 2.0
    assert ctp.pm(df).loc["a", "Rm"] == "12.00 ± 2.00" and ctp.pm(df).loc["b", "Rm"] == "missing"


def test_time_ratio_is_per_seed_then_averaged_and_pairs_seeds():
    seqf = [result(1, seed=0, seconds=10.0), result(1, seed=1, seconds=20.0)]
    m = [result(1, seed=1, seconds=30.0), result(1, seed=0, seconds=12.0), result(1, seed=2, seconds=99.0)]
    # seed 0: 12/10 = 1.2, seed 1: 30/20 = 1.5; seed 2 has no SeqF run -> left out
    assert sorted(ctp.time_ratios(m, seqf)) == pytest.approx([1.2, 1.5])
    t1 = ctp.table1({"ctp-seqf": seqf, "ctp-ctp": m[:2]}, {"memory-free": ["ctp-seqf", "ctp-ctp"]})
    assert t1.loc[("memory-free", "CTP"), ("time × SeqF", "mean")] == pytest.approx(1.35)
    assert t1.loc[("memory-free", "CTP"), ("time × SeqF", "std")] == pytest.approx(np.std([1.2, 1.5], ddof=1))
    assert t1.loc[("memory-free", "SeqF"), ("time × SeqF", "mean")] == pytest.approx(1.0)


def test_flop_ratio_prefers_per_task_flops_when_recorded():
    a, b = result(1, flops=2e9), result(1, flops=1e9)
    assert ctp.flop_ratios([a], [b]) == [2.0]
    a["train"][0]["flops_per_step"] = 1e9          # task 0: no reference model yet
    for t in a["train"][1:]:
        t["flops_per_step"] = 4e9
    assert flops_per_step(a) == pytest.approx(3e9)
    a["train"][1]["task_pass_flops"] = 10 * 2e9    # e.g. an importance pass: 2 step-equivalents per step of its task
    assert flops_per_step(a) == pytest.approx((1e9 * 10 + 4e9 * 20 + 2e10) / 30)


def test_uncounted_passes_come_from_the_counted_seed():
    """A seed outside train.pass_flops_seeds records None per task; fill_pass_flops gives it the
    counted seed's passes, and flops_per_step refuses a run that still has None."""
    a, b = result(1, flops=1e9, seed=0), result(1, flops=1e9, seed=1)
    for t, p in zip(a["train"], (0, 5e9, 7e9)):
        t["flops_per_step"], t["task_pass_flops"] = 1e9, p
    for t in b["train"]:
        t["flops_per_step"], t["task_pass_flops"] = 2e9, None
    with pytest.raises(ValueError, match="x seed 1: its per-task passes were not counted"):
        flops_per_step(b)
    filled = fill_pass_flops([b, a])
    assert filled[1] is a and b["train"][1]["task_pass_flops"] is None           # copies, a unchanged
    assert [t["task_pass_flops"] for t in filled[0]["train"]] == [0, 5e9, 7e9]
    assert filled[0]["pass_flops_from_seed"] == 0
    assert flops_per_step(filled[0]) == pytest.approx((2e9 * 30 + 12e9) / 30)
    assert ctp.flop_ratios([b], [a]) == []                                      # no seed in common
    assert ctp.flop_ratios([a, b], [a]) == [1.0]
    assert fill_pass_flops([b]) == [b]                                          # none counted: as is


def test_flops_of_sampled_tasks_average_the_counted_ones():
    """`train.flops_every` leaves the skipped tasks' step and pass FLOPs None: flops_per_step is
    the step-weighted mean over the counted tasks, their passes included."""
    a = result(1, flops=1e9)
    for t, (f, p) in zip(a["train"], ((None, None), (4e9, 2e10), (2e9, 0))):
        t["flops_per_step"], t["task_pass_flops"] = f, p
    assert flops_per_step(a) == pytest.approx((4e9 * 10 + 2e10 + 2e9 * 10) / 20)
    assert fill_pass_flops([a]) == [a]                       # counted where counted: nothing to fill


def test_ctp_bwt_hand_computed():
    # so-far Rm on pools <= i: 50, 40, 30; the final model on them: 20, 25, 30 -> (30 + 15 + 0) / 2
    r = result(30.0, curve=[50, 40, 30], final=[20, 25, 30])
    assert ctp.run_bwt(r, "Rm") == pytest.approx(22.5)
    assert ctp.run_bwt(r, "mAP@1") == 0.0
    df = ctp.bwt_table({"e": [r, result(30.0, seed=1, curve=[50, 40, 30], final=[40, 40, 30])]}, {"SeqF": "e"})
    assert df.loc["SeqF", ("BWT Rm", "mean")] == pytest.approx((22.5 + 5.0) / 2)


def test_curves_mean_over_seeds_per_task():
    runs = {"e": [result(10.0, curve=[30, 20, 10]), result(12.0, seed=1, curve=[32, 22, 12])]}
    mean, std = ctp.curves(runs, {"SeqF": "e", "gone": "missing-exp"})
    assert mean["SeqF"].tolist() == [31.0, 21.0, 11.0] and list(mean.columns) == ["SeqF"]
    assert std["SeqF"].iloc[0] == pytest.approx(math.sqrt(2))


def test_labels_rows_and_paper_tables():
    assert ctp.method_label("ctp-ctp-er") == "CTP+ER" and ctp.method_label("ctp-rev-lwf") == "LWF"
    assert ctp.method_label("ctp-abl-cmc") == "ctp-abl-cmc"
    assert ctp.component_pairs("L_CMC") == [(0, 1), (2, 3)]
    assert ctp.component_pairs("L_c") == [(0, 2), (1, 3), (4, 5)]
    assert ctp.component_pairs("L_s") == [(1, 4), (3, 5)] and ctp.component_pairs("ER") == [(5, 6)]
    p1 = ctp.paper_table1()
    assert p1.loc[("memory-free", "CTP"), "hours × SeqF"] == pytest.approx(4.0 / 3.4)
    p2 = ctp.paper_table2()
    assert p2.loc["✓ ✓ × ×", "TR@1"] == 42.69 and math.isnan(p2.loc["✓ ✓ × ×", "Rm"])
    assert list(ctp.table2_rows(ctp.DEFAULT_STUDY["table2"]))[4] == "✓ × ✓ ×"
    assert ctp.paper_by_label("ctp_supp_table2").loc["m=0.995", "Rm"] == 65.04
    assert list(ctp.momentum_rows({0.9: "ctp-ctp", 0.7: "m7"}, ctp.DEFAULT_STUDY["table3"])) == [
        "only θ(t-1)", "only θt", "m=0.7", "m=0.9"]
    assert set(ctp.paper_table1("ctp_supp_table3").index.get_level_values(1)) == set(ctp.LABELS.values())


def test_start_and_end_reads_the_initialisation_and_the_final_row():
    def run(zs, last):
        r = result(5.0)
        r["zero_shot"] = {"test": {"Rm": zs}}
        r["matrix"] = {"test": {"Rm": [[0.0] * 3, [0.0] * 3, last]}}
        return r
    runs = {"ctp-seqf": [run([30, 20, 10], [10, 12, 40]), run([30, 20, 10], [20, 14, 42])],
            "ctp-jointt": [run([30, 20, 10], [35, 25, 45])]}
    t = ctp.start_and_end(runs, ["ctp-seqf", "ctp-ctp", "ctp-jointt"])
    assert list(t.columns) == ["initialisation", "SeqF", "JointT"] and list(t.index) == TASKS
    assert t["initialisation"].tolist() == [30, 20, 10] and t["SeqF"].tolist() == [15, 13, 41]
    assert ctp.start_and_end({}, ["ctp-seqf"]).empty


def test_runs_are_found_in_study_directories(tmp_path):
    """One process per study writes runs-ctp/<study>/<experiment>/seed<S>; the loaders find them
    there as well as at runs-ctp/<experiment>/seed<S>, and refuse a run found in both places."""
    for d, v in ((tmp_path / "table1-seed0" / "a" / "seed0", 5.0), (tmp_path / "b" / "seed0", 7.0)):
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(result(v)))
    runs, missing = ctp.load_available(tmp_path, ["a", "b"], [0])
    assert set(runs) == {"a", "b"} and not missing
    assert find_run(tmp_path, "a", 0) == tmp_path / "table1-seed0" / "a" / "seed0" / "results.json"
    assert set(load_runs(tmp_path, ["a", "b"], [0])) == {"a", "b"}
    (tmp_path / "a" / "seed0").mkdir(parents=True)
    (tmp_path / "a" / "seed0" / "results.json").write_text(json.dumps(result(6.0)))
    with pytest.raises(VlcpError, match="more than one place"):
        find_run(tmp_path, "a", 0)


def test_missing_runs_are_listed_not_raised(tmp_path):
    (tmp_path / "a" / "seed0").mkdir(parents=True)
    (tmp_path / "a" / "seed0" / "results.json").write_text(json.dumps(result(5.0)))
    runs, missing = ctp.load_available(tmp_path, ["a", "b"], [0, 1])
    assert list(runs) == ["a"] and missing == {"a": [1], "b": [0, 1]}
    assert ctp.describe_missing(missing) == "a (seed 1); b (seeds 0, 1)"
    t1 = ctp.table1(runs, {"memory-free": ["a", "b"]}, reference="b")
    assert t1.loc[("memory-free", "b"), ("seeds", "n")] == 0
    assert ctp.pm(t1).loc[("memory-free", "b"), "Rm"] == "missing"
    assert ctp.pm(t1).loc[("memory-free", "a"), "time × SeqF"] == "—"   # no SeqF to divide by
    # no run at all: every table keeps its rows and columns, every claim is inconclusive
    empty = ctp.pm(ctp.table1({}, ctp.DEFAULT_STUDY["table1"]))
    assert empty.shape == (15, 2 + len(ctp.FINAL)) and set(empty["mAP_std@1"]) == {"missing"}
    assert set(ctp.pm(ctp.table2({}, ctp.DEFAULT_STUDY["table2"]))["Rm"]) == {"missing"}
    claims = ctp.ledger(ctp.DEFAULT_STUDY, {}, {}, 1.0)
    assert {c.verdict for c in claims} == {"inconclusive"} and all(c.evidence.startswith("missing runs") for c in claims)


def test_kendall_tau_b_hand_computed():
    assert ctp.kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert ctp.kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    # pairs: (1,2) concordant, (1,3) concordant, (2,3) discordant -> (2 - 1) / 3
    assert ctp.kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    # a tie in x: 2 concordant, 0 discordant, 1 pair tied in x -> 2 / sqrt((3 - 1) * 3)
    assert ctp.kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / 6 ** 0.5)


def test_noise_floor_measured_from_table1_seeds_or_set():
    runs = runs_of({"a": (10, -1, 0, 1), "b": (20, -2, 0, 2), "c": (30,)}, seeds=(0, 1, 2))
    runs["c"] = runs["c"][:1]
    floor, how = ctp.noise_floor(runs, ["a", "b", "c"])
    assert floor == pytest.approx(math.sqrt(2 * (1 + 4) / 2)) and "measured" in how
    assert ctp.noise_floor(runs, ["a"], setting=0.7)[0] == 0.7
    assert ctp.noise_floor({"c": runs["c"]}, ["c"], default=1.5)[0] == 1.5


# ---------------------------------------------------------------------------------------------
# claims: confirmed / inconclusive / not confirmed / missing


def test_beats_all_outcomes():
    base = {"ctp-si": (10, -1, 0, 1), "ctp-ewc": (12, -1, 0, 1)}
    ok = runs_of(base | {"ctp-ctp": (20, -1, 0, 1)})
    c = ctp.claim_beats_all(ok, "ctp-ctp", ["ctp-si", "ctp-ewc"])
    assert c.verdict == "confirmed" and "CTP 20.00 ± 1.00" in c.evidence
    # 12.5 vs EWC 12: ahead by 0.5, spread √2 -> inconclusive
    assert ctp.claim_beats_all(runs_of(base | {"ctp-ctp": (12.5, -1, 0, 1)}), "ctp-ctp", ["ctp-si", "ctp-ewc"]).verdict == "inconclusive"
    c = ctp.claim_beats_all(runs_of(base | {"ctp-ctp": (11, -1, 0, 1)}), "ctp-ctp", ["ctp-si", "ctp-ewc"])
    assert c.verdict == "not confirmed" and "not beaten by: EWC" in c.evidence
    c = ctp.claim_beats_all(ok, "ctp-ctp", ["ctp-si", "ctp-ewc", "ctp-mas"])
    assert c.verdict == "inconclusive" and c.evidence.startswith("missing runs: ctp-mas")
    # a present counterexample is decisive even with runs missing
    assert ctp.claim_beats_all(runs_of(base | {"ctp-ctp": (5,)}), "ctp-ctp", ["ctp-si", "ctp-mas"]).verdict == "not confirmed"
    assert ctp.claim_beats_all(ok, "ctp-x", ["ctp-si"]).verdict == "inconclusive"
    # single seed: the floor decides
    one = runs_of({"a": (10.5,), "b": (10.0,)}, seeds=(0,))
    assert ctp.claim_beats_all(one, "a", ["b"], floor=1.0).verdict == "inconclusive"
    assert ctp.claim_beats_all(one, "a", ["b"], floor=0.2).verdict == "confirmed"


def test_groups_claim_uses_group_means_per_seed():
    spec = {"f1": (10, -1, 0, 1), "f2": (14, -1, 0, 1), "b1": (20, -1, 0, 1), "b2": (22, -1, 0, 1)}
    c = ctp.claim_groups(runs_of(spec), ["b1", "b2"], ["f1", "f2"])
    assert c.verdict == "confirmed" and "4/4 pairs" in c.evidence
    spec = {"f1": (10, -1, 0, 1), "f2": (30, -1, 0, 1), "b1": (20, -1, 0, 1), "b2": (21, -1, 0, 1)}
    c = ctp.claim_groups(runs_of(spec), ["b1", "b2"], ["f1", "f2"])   # 20.5 vs 20: within the spread
    assert c.verdict == "inconclusive" and "2/4 pairs" in c.evidence
    assert ctp.claim_groups(runs_of(spec), ["b1"], ["f2"]).verdict == "not confirmed"
    c = ctp.claim_groups(runs_of(spec), ["b1", "bx"], ["f1"])
    assert c.verdict == "inconclusive" and "missing runs: bx" in c.evidence


def gap_runs(jointt_rm, seqf_rm, jointt_map, seqf_map):
    return {"j": [result(jointt_rm + o, jointt_map + o, seed=s) for s, o in enumerate((-0.5, 0, 0.5))],
            "s": [result(seqf_rm + o, seqf_map + o, seed=s) for s, o in enumerate((-0.5, 0, 0.5))]}


def test_gap_claim_thresholds_relative_to_the_papers_gaps():
    # JointT Rm 40: large means >= 0.5 × 23.22/80.08 × 40 = 5.80; mAP@1 60: small means <= 2 × 1.65/63.79 × 60 = 3.10
    c = ctp.claim_gap(gap_runs(40, 20, 60, 59), "j", "s")
    assert c.verdict == "confirmed" and "threshold ≥ 5.80" in c.evidence and "threshold ≤ 3.10" in c.evidence
    assert ctp.claim_gap(gap_runs(40, 37, 60, 59), "j", "s").verdict == "not confirmed"    # Rm gap 3 < 5.8
    assert ctp.claim_gap(gap_runs(40, 20, 60, 50), "j", "s").verdict == "not confirmed"    # mAP@1 gap 10 > 3.1
    assert ctp.claim_gap(gap_runs(40, 20, 60, 59), "j", "s", floor=2.5).verdict == "inconclusive"  # 3.1 - 1 < 2.5
    assert ctp.claim_gap(gap_runs(40, 20, 60, 59), "j", "missing").verdict == "inconclusive"


TABLE2 = ctp.DEFAULT_STUDY["table2"]


def table2_runs(rms):
    return runs_of({e: (rm,) for e, rm in zip(TABLE2, rms) if rm is not None}, seeds=(0,))


def test_component_claims_on_the_papers_row_pairs():
    #          seqf  cmc   lc   cmc-lc cmc-ls ctp  ctp-er
    good = [10, 12, 13, 15, 14, 17, 22]
    for comp in ctp.COMPONENTS:
        assert ctp.claim_component(table2_runs(good), TABLE2, comp, floor=1.0).verdict == "confirmed"
    # L_s: cmc 12 -> cmc-ls 12.5 (within the floor), cmc-lc 15 -> ctp 17
    c = ctp.claim_component(table2_runs([10, 12, 13, 15, 12.5, 17, 22]), TABLE2, "L_s", floor=1.0)
    assert c.verdict == "inconclusive"
    c = ctp.claim_component(table2_runs([10, 12, 13, 15, 14, 14.5, 22]), TABLE2, "L_c", floor=1.0)
    assert c.verdict == "inconclusive"         # cmc-ls 14 -> ctp 14.5
    c = ctp.claim_component(table2_runs([10, 12, 13, 11, 14, 17, 22]), TABLE2, "L_CMC", floor=1.0)
    assert c.verdict == "not confirmed"        # lc 13 -> cmc-lc 11
    assert "paper 56.86 → 59.86" in c.evidence
    c = ctp.claim_component(table2_runs([10, 12, None, 15, 14, 17, 22]), TABLE2, "L_CMC", floor=1.0)
    assert c.verdict == "inconclusive" and "missing runs: ctp-abl-lc" in c.evidence
    assert ctp.claim_component(table2_runs([10, 12, 13, 15, 14, 17, None]), TABLE2, "ER").verdict == "inconclusive"


def test_momentum_insensitivity_bands():
    mom = {0.7: "a", 0.9: "b", 0.99: "c"}
    assert ctp.claim_momentum_insensitive(runs_of({"a": (10,), "b": (10.5,), "c": (10.2,)}, (0,)), mom, floor=1.0).verdict == "confirmed"
    assert ctp.claim_momentum_insensitive(runs_of({"a": (10,), "b": (11.5,), "c": (10.2,)}, (0,)), mom, floor=1.0).verdict == "inconclusive"
    assert ctp.claim_momentum_insensitive(runs_of({"a": (10,), "b": (13,), "c": (10.2,)}, (0,)), mom, floor=1.0).verdict == "not confirmed"
    c = ctp.claim_momentum_insensitive(runs_of({"a": (10,)}, (0,)), mom, floor=1.0)
    assert c.verdict == "inconclusive" and "missing runs: b, c" in c.evidence


def timed(seconds, flops, seeds=(0, 1, 2)):
    return [result(1, seed=s, seconds=t, flops=flops) for s, t in zip(seeds, seconds)]


def test_time_overhead_claim():
    seqf = timed([10, 10, 10], 1e9)
    c = ctp.claim_time_overhead({"ctp-ctp": timed([11, 11, 11.2], 1.2e9), "ctp-seqf": seqf}, "ctp-ctp", "ctp-seqf")
    assert c.verdict == "confirmed" and "FLOP ratio 1.200" in c.evidence
    # 1.5× > 1.18 but FLOPs 1.6×: the paper's 1.18 cannot be tested on this model, only ≤ 1.6 × 1.1 can
    c = ctp.claim_time_overhead({"ctp-ctp": timed([15, 15, 15], 1.6e9), "ctp-seqf": seqf}, "ctp-ctp", "ctp-seqf")
    assert c.verdict == "confirmed" and "≤ 1.18: not applicable (its FLOP ratio alone is 1.60 > 1.18)" in c.evidence
    # ... and 1.8× is over 1.6 × 1.1
    assert ctp.claim_time_overhead({"ctp-ctp": timed([18, 18, 18], 1.6e9), "ctp-seqf": seqf},
                                   "ctp-ctp", "ctp-seqf").verdict == "not confirmed"
    # FLOPs 1.15× allow the paper's figure: 1.25× time is within 1.15 × 1.1 but over 1.18
    assert ctp.claim_time_overhead({"ctp-ctp": timed([12.5, 12.5, 12.5], 1.15e9), "ctp-seqf": seqf},
                                   "ctp-ctp", "ctp-seqf").verdict == "not confirmed"
    # 1.15 ± 0.05 with FLOPs 1.1×: under 1.18 but within the spread
    assert ctp.claim_time_overhead({"ctp-ctp": timed([11, 11.5, 12], 1.1e9), "ctp-seqf": seqf},
                                   "ctp-ctp", "ctp-seqf").verdict == "inconclusive"
    # FLOPs unchanged but 1.15× the time: not explained by arithmetic (> 1.0 × 1.1)
    assert ctp.claim_time_overhead({"ctp-ctp": timed([11.5, 11.5, 11.5], 1e9), "ctp-seqf": seqf},
                                   "ctp-ctp", "ctp-seqf").verdict == "not confirmed"
    c = ctp.claim_time_overhead({"ctp-ctp": timed([11, 11, 11], 1e9)}, "ctp-ctp", "ctp-seqf")
    assert c.verdict == "inconclusive" and "missing runs: ctp-seqf" in c.evidence
    o = ctp.overhead({"ctp-ctp": timed([11, 11, 11.2], 1.2e9), "ctp-seqf": seqf}, "ctp-ctp", "ctp-seqf")
    assert o["FLOP target"] == pytest.approx(1.32) and o["paper ratio"] == pytest.approx(4.0 / 3.4)


def test_time_overhead_claim_prefers_the_paired_benchmark():
    """With benchmarks/results/ctp_cost.json the claim is judged on its repeats: confirmed when every
    repeat meets both goals, inconclusive when only the median does; the study's noisy timings
    (here 1.5x: would be not confirmed) are only quoted."""
    runs = {"ctp-ctp": timed([15, 15, 15], 1.1e9), "ctp-seqf": timed([10, 10, 10], 1e9)}
    bench = {"paired_ratios": {"ctp-ctp": [1.10, 1.15, 1.12]}, "ratio_to_reference": {"ctp-ctp": 1.12},
             "flop_ratio": {"ctp-ctp": 1.1}, "overrides": ["train.steps=480"], "commit": "abc", "date": "d"}
    c = ctp.claim_time_overhead(runs, "ctp-ctp", "ctp-seqf", bench=bench)
    assert c.verdict == "confirmed" and "median 1.120 (1.100–1.150)" in c.evidence and "study: time ratio" in c.evidence
    bench["paired_ratios"]["ctp-ctp"] = [1.10, 1.25, 1.12]             # one repeat over 1.18 and 1.21
    assert ctp.claim_time_overhead(runs, "ctp-ctp", "ctp-seqf", bench=bench).verdict == "inconclusive"
    bench["ratio_to_reference"]["ctp-ctp"] = 1.2                       # the median over 1.18
    assert ctp.claim_time_overhead(runs, "ctp-ctp", "ctp-seqf", bench=bench).verdict == "not confirmed"
    assert ctp.paired_cost(bench, "ctp-ctp-er") == {} and ctp.paired_cost(None, "ctp-ctp") == {}
    assert ctp.paired_cost(bench, "ctp-ctp")["FLOP target"] == pytest.approx(1.21)


def ranking_study(reversed_methods):
    return ctp.study_config(None, reversed=reversed_methods)


def test_ranking_claim_kendall_and_first_in_group():
    study = ranking_study(["seqf", "lwf", "ewc", "ctp", "er", "icarl", "ctp-er"])
    default = runs_of({"ctp-seqf": (10,), "ctp-lwf": (12,), "ctp-ewc": (14,), "ctp-ctp": (20,),
                       "ctp-er": (22,), "ctp-icarl": (24,), "ctp-ctp-er": (30,)}, seeds=(0,))
    same = runs_of({"ctp-rev-seqf": (11,), "ctp-rev-lwf": (13,), "ctp-rev-ewc": (15,), "ctp-rev-ctp": (21,),
                    "ctp-rev-er": (23,), "ctp-rev-icarl": (25,), "ctp-rev-ctp-er": (31,)}, seeds=(0,))
    c = ctp.claim_ranking(default, same, study, floor=1.0)
    assert c.verdict == "confirmed" and "τ = 1.00 over 7 methods" in c.evidence
    df = ctp.ranking(default, same, study)
    assert df.loc["CTP", "rank reversed (ours)"] == 4 and df.loc["CTP+ER", "reversed (paper)"] == 71.97
    # CTP no longer first among memory-free methods in the reversed order
    flipped = dict(same) | runs_of({"ctp-rev-ctp": (14.5,)}, seeds=(0,))
    assert ctp.claim_ranking(default, flipped, study, floor=1.0).verdict == "not confirmed"
    # reversed ranking inverted: τ = -1
    inverted = runs_of({f"ctp-rev-{m}": (40 - rm,) for m, rm in
                        zip(["seqf", "lwf", "ewc", "ctp", "er", "icarl", "ctp-er"], [10, 12, 14, 20, 22, 24, 30])}, seeds=(0,))
    assert ctp.claim_ranking(default, inverted, study, floor=1.0).verdict == "not confirmed"
    # CTP first only within the floor -> inconclusive
    close = dict(same) | runs_of({"ctp-rev-ctp": (15.5,)}, seeds=(0,))
    assert ctp.claim_ranking(default, close, study, floor=1.0).verdict == "inconclusive"
    partial = {k: v for k, v in same.items() if k != "ctp-rev-icarl"}
    c = ctp.claim_ranking(default, partial, study, floor=1.0)
    assert c.verdict == "inconclusive" and "missing runs: ctp-rev-icarl" in c.evidence


def test_ledger_runs_on_partial_results_and_study_config_reads_params(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"report": {"ctp": {"seeds": [0, 1], "noise_floor": 0.5,
                                                          "momentum": {"0.9": "ctp-ctp"}}}}))
    study = ctp.study_config(params, runs="elsewhere", seeds=None)
    assert study["seeds"] == [0, 1] and study["runs"] == "elsewhere" and study["momentum"] == {0.9: "ctp-ctp"}
    assert study["ablation_seeds"] == [0]               # from the defaults
    assert ctp.list_mismatch(study) == ""
    flat = ctp.study_config(None, experiments=ctp.table1_experiments(study)[:-1] + ["ctp-x"])
    assert ctp.list_mismatch(flat) == "`experiments` lacks ctp-jointt and adds ctp-x"
    runs1 = runs_of({"ctp-seqf": (10, -1, 1), "ctp-ctp": (20, -1, 1), "ctp-jointt": (40, -1, 1)}, seeds=(0, 1))
    claims = ctp.ledger(study, runs1, {}, 1.0)
    assert len(claims) == 14
    assert {c.verdict for c in claims} <= {"confirmed", "inconclusive", "not confirmed"}
    assert all("missing runs" in c.evidence for c in claims if c.verdict == "inconclusive")


# ---------------------------------------------------------------------------------------------
# the notebook, end to end on synthetic runs (a few runs missing on purpose)


def test_notebook_executes_on_synthetic_runs(tmp_path):
    papermill = pytest.importorskip("papermill")
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    study = ctp.DEFAULT_STUDY
    rng = np.random.default_rng(0)
    runs_dir = tmp_path / "runs-ctp"
    skip = {"ctp-afec", "ctp-abl-cmc-ls", "ctp-rev-icarl"}
    base = {e: 10 + 2 * i for i, e in enumerate(ctp.table1_experiments(study))}
    for exp, seeds in [(e, (0, 1)) for e in ctp.table1_experiments(study)] + \
                      [(e, (0,)) for e in ctp.single_seed_experiments(study)]:
        for s in seeds:
            if exp in skip or (exp == "ctp-mas" and s == 1):
                continue
            rm = base.get(exp, base.get("ctp-" + exp.removeprefix("ctp-rev-"), 15.0)) + rng.normal(0, 0.5)
            d = runs_dir / exp / f"seed{s}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "results.json").write_text(json.dumps(result(rm, 50 + rm / 10, seed=s, seconds=10 + rm / 10)))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"report": {"ctp": {"runs": str(runs_dir), "seeds": [0, 1]}}}))
    reports = tmp_path / "reports"
    reports.mkdir()
    papermill.execute_notebook(str(root / "notebooks" / "ctp_tables.ipynb"), str(reports / "ctp_tables.ipynb"),
                               parameters={"params_file": str(params), "reports_dir": str(reports)},
                               cwd=str(root), progress_bar=False, kernel_name="python3")
    ledger = json.loads((reports / "ctp_tables_claims.json").read_text())
    assert ledger["report"].startswith("CTP") and len(ledger["claims"]) == 14
    text = (reports / "ctp_tables.ipynb").read_text()
    assert "ctp-afec" in text and "missing" in text
