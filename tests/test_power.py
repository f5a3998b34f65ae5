"""Power: the MDE is what the ledger's own rule detects 80 % of the time (checked by simulating that
rule), the scaling rule, the seeds that decide, and every verdict of `power_verdict` / `powered`."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from vlcp.report import power as pw
from vlcp.report.claims import VERDICTS, Claim, effect, powered, write_claims


def test_mde_of_one_run_each_with_a_known_sd_is_z_plus_z():
    # the normal case by hand: (z_0.975 + z_0.8) × σ_d
    assert pw.mde(1.0, 1) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert pw.mde(2.0, 1) == pytest.approx(2 * (1.959964 + 0.841621), abs=1e-5)
    assert pw.mde(1.0, 4, paired=False) == pytest.approx((1.959964 + 0.841621) / 2, abs=1e-5)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_mde_is_what_the_ledgers_paired_rule_confirms_80_percent_of_the_time(n):
    sigma = 1.7
    d = pw.mde(sigma, n)
    rng = np.random.default_rng(n)
    diffs = rng.normal(d, sigma, size=(20000, n))       # per-seed differences a − b, paired by seed
    se = diffs.std(axis=1, ddof=1) / math.sqrt(n)
    low = diffs.mean(axis=1) - stats.t.ppf(0.975, n - 1) * se
    assert (low > 0).mean() == pytest.approx(0.8, abs=0.015)
    a = list(rng.normal(d, sigma, n))                   # and `effect` is that rule
    e = effect(a, [0.0] * n)
    assert e.paired and e.dof == n - 1 and e.sd == pytest.approx(np.std(a, ddof=1))
    assert e.mde() == pytest.approx(pw.mde(e.sd, n))


def test_mde_shrinks_with_seeds_and_grows_with_comparisons():
    ms = [pw.mde(1.0, n) for n in (2, 3, 5, 10, 30)]
    assert all(x > y for x, y in zip(ms, ms[1:]))
    ks = [pw.mde(1.0, 5, comparisons=k) for k in (1, 2, 10, 80)]
    assert all(x < y for x, y in zip(ks, ks[1:]))
    assert pw.detection_power(pw.mde(1.0, 5, comparisons=10), 1.0, 5) == pytest.approx(0.8 ** 0.1, abs=1e-6)


def test_seeds_to_decide_is_the_fewest_that_detect_the_effect():
    n = pw.seeds_to_decide(1.0, 1.0)
    assert pw.mde(1.0, n) <= 1.0 < pw.mde(1.0, n - 1)
    assert pw.seeds_to_decide(0.01, 1.0) is None         # more than MAX_SEEDS
    assert pw.seeds_to_decide(-1.0, 1.0) is None         # no positive effect to detect
    assert pw.seeds_to_decide(1.0, 1.0, comparisons=10) > n


def test_scaled_effect_is_the_papers_share_of_its_headroom_times_ours():
    assert pw.scaled_effect(2.0, 10.0, 5.0) == pytest.approx(1.0)
    assert pw.scaled_effect(-3.0, 12.0, 4.0) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="headroom"):
        pw.scaled_effect(1.0, 0.0, 5.0)


@pytest.mark.parametrize("low,high,scaled,mde,refute_high,verdict", [
    (0.5, 3.0, 2.0, 1.0, None, "confirmed"),        # the interval clears 0
    (-1.0, 1.5, 2.0, 1.0, None, "refuted"),         # ... excludes the scaled effect
    (-1.0, 3.0, 2.0, 2.5, None, "underpowered"),    # the MDE is above it
    (-1.0, 3.0, 2.0, 1.5, None, "inconclusive"),
    (-1.0, 3.0, 2.0, 1.5, 1.9, "refuted"),          # one comparison's Bonferroni interval excludes it
    (-1.0, 1.5, 2.0, 9.0, None, "refuted"),         # an interval that excludes it refutes, however weak the study
])
def test_power_verdict_returns_each_verdict(low, high, scaled, mde, refute_high, verdict):
    assert pw.power_verdict(low, high, scaled, mde, refute_high=refute_high) == verdict


def test_powered_claims_reach_every_verdict_and_carry_their_power():
    strong = powered("a > b", [([5.1, 6.0, 5.5], [1.0, 1.2, 0.9])], 2.0, paper="Table 1: +4.0 of H 10")
    assert strong.verdict == "confirmed" and strong.seeds_to_decide is None
    assert strong.scaled_effect == 2.0 and strong.paper_effect == "Table 1: +4.0 of H 10" and strong.comparisons == 1
    assert strong.mde == pytest.approx(pw.mde(strong.sigma_d, 3))
    smaller = powered("a > b", [([1.1, 1.0, 1.2], [1.0, 1.1, 1.0])], 2.0, paper="p")
    assert smaller.verdict == "refuted"
    weak = powered("a > b", [([1.0], [0.5])], 2.0, paper="p", sd=1.0)
    assert weak.verdict == "underpowered" and weak.seeds_to_decide == pw.seeds_to_decide(2.0, 1.0)
    assert f"{weak.seeds_to_decide} seeds per arm would decide it" in weak.evidence
    middle = powered("a > b", [([1.0], [0.0])], 2.9, paper="p", sd=1.0)     # MDE 2.80 ≤ 2.9 ≤ high 2.96
    assert middle.verdict == "inconclusive"
    assert {c.verdict for c in (strong, smaller, weak, middle)} == {"confirmed", "refuted", "underpowered", "inconclusive"}


def test_exploratory_rows_read_only_underpowered_or_inconclusive():
    """A row below the study's depth (issue 48: one seed per arm) cannot decide: what its interval
    alone would read is said, and the seeds that would decide it are given."""
    kw = dict(paper="p", sd=0.2, exploratory=True)
    up = powered("a > b", [([1.0], [0.0])], 0.5, **kw)          # 1.0 ± 0.39 clears 0
    down = powered("a > b", [([0.0], [0.0])], 2.0, **kw)        # 0 ± 0.39 excludes 2.0
    assert (up.verdict, down.verdict) == ("inconclusive", "inconclusive")
    assert "its interval alone would read confirmed" in up.evidence and "would read refuted" in down.evidence
    assert up.seeds_to_decide == pw.seeds_to_decide(0.5, 0.2)
    weak = powered("a > b", [([1.0], [0.5])], 2.0, paper="p", sd=1.0, exploratory=True)
    assert weak.verdict == "underpowered" and "exploratory" not in weak.evidence


def test_a_claim_of_many_comparisons_confirms_when_the_papers_effect_is_true():
    """With every one of k comparisons at the scaled effect and the study powered for it (MDE for k
    comparisons ≤ the effect), the claim confirms about 80 % of the time and is refuted rarely (the
    rest read "underpowered": the MDE from the spread those seeds happened to show). The old rule
    (any negative point estimate sinks it) confirmed a paper-sized effect 1 % of the time."""
    k, n, sigma = 8, 5, 1.0
    scaled = pw.mde(sigma, n, comparisons=k)
    rng = np.random.default_rng(0)
    verdicts = []
    for _ in range(300):
        pairs = [(list(rng.normal(scaled, sigma, n)), [0.0] * n) for _ in range(k)]
        verdicts.append(powered("a beats every b", pairs, scaled, paper="p").verdict)
    share = {v: verdicts.count(v) / len(verdicts) for v in set(verdicts)}
    assert share.get("confirmed", 0) == pytest.approx(0.8, abs=0.08)
    assert share.get("refuted", 0) <= 0.05


def test_power_rows_reach_the_claims_file(tmp_path):
    import json

    c = powered("a > b", [([5.1, 6.0, 5.5], [1.0, 1.2, 0.9])], 2.0, paper="p")
    sp = pw.StudyPower("Rm", headroom=6.0, sigma_d=0.5, tasks_teaching=6, tasks=9, seeds=3,
                       headroom_from="JointT − SeqF", noise_from="paired by seed")
    write_claims(tmp_path / "x_claims.json", "x", [c, Claim("c", "not testable", "why")], power=sp)
    data = json.loads((tmp_path / "x_claims.json").read_text())
    assert data["power"]["headroom_over_noise"] == pytest.approx(12.0)
    assert {"headroom", "sigma_d", "headroom_over_noise", "tasks_teaching", "tasks", "seeds"} <= set(data["power"])
    assert data["claims"][0]["scaled_effect"] == 2.0 and data["claims"][0]["mde"] > 0
    assert set(VERDICTS) >= {"confirmed", "refuted", "underpowered", "inconclusive"}
    frame = pw.power_frame({"spine": sp})
    assert frame.loc[0, "H/σ_d"] == pytest.approx(12.0) and frame.loc[0, "tasks that teach"] == "6/9"


def test_each_comparison_is_judged_against_its_own_scaled_effect():
    a = [5.0, 5.4, 4.8]
    close, far = [5.1, 5.2, 4.6], [1.0, 1.2, 0.9]      # a − close: −0.1, +0.2, +0.2
    # against the close baseline the paper's effect was small (0.3): this study cannot tell
    c = powered("a beats b and c", [(a, far), (a, close)], [3.5, 0.3], paper="p", labels=["far", "close"])
    assert c.scaled_effect == 0.3 and c.comparisons == 2 and c.verdict == "underpowered"
    assert "close: " in c.evidence and "(scaled paper effect +0.30)" in c.evidence
    # the same data against a paper effect of 3.5 over the close one: refuted
    c = powered("a beats b and c", [(a, far), (a, close)], [3.5, 3.5], paper="p")
    assert c.verdict == "refuted"
    with pytest.raises(ValueError, match="2 scaled effects for 1 comparisons"):
        powered("x", [(a, far)], [1.0, 2.0], paper="p")


def test_study_power_from_paired_seeds_or_a_subset_spread_and_its_line():
    from vlcp.report.claims import seed_spread

    gains = pd.DataFrame({"teaches": [True, True, False]})
    p = pw.study_power("Rm", [10.0, 12.0, 11.0], [2.0, 3.0, 2.5], gains, headroom_from="JointT − SeqF")
    assert p.headroom == pytest.approx(8.5) and p.sigma_d == pytest.approx(np.std([8, 9, 8.5], ddof=1))
    assert (p.tasks_teaching, p.tasks, p.seeds) == (2, 3, 3)
    assert "meets both power goals" in pw.power_line(p)
    sd, how = pw.spread_sigma(seed_spread({"Rm": {"a": [1.0, 3.0], "b": [2.0, 4.0]}}, "a, b"), "Rm")
    assert sd == pytest.approx(2.0) and "2 dof" in how
    assert pw.spread_sigma(None, "Rm")[0] is None
    assert pw.spread_dof(seed_spread({"Rm": {"a": [1.0, 3.0], "b": [2.0, 4.0]}}, "a, b"), "Rm") == 2   # Σ (seeds − 1)
    assert pw.spread_dof(None, "Rm") is None
    one = pw.study_power("Rm", [10.0], [2.0], None, headroom_from="x", sigma_d=sd, noise_from=how)
    assert one.headroom_over_noise == pytest.approx(4.0) and one.tasks == 0
    line = pw.power_line(one)
    assert "falls short of H/σ_d ≥ 10 and teaching" in line and "no per-task scores" in line
    with pytest.raises(ValueError, match="≥ 2 seeds"):
        pw.study_power("Rm", [10.0], [2.0], gains, headroom_from="x")


def test_the_noise_of_a_few_seeds_is_itself_uncertain():
    """σ from 2 dof (3 seeds): chi-square 97.5 % / 2.5 % points 7.378 and 0.0506, so σ ∈ [√(2/7.378),
    √(2/0.0506)] = [0.521, 6.29] × the estimate; a study's H/σ_d carries that interval."""
    lo, hi = pw.sigma_interval(1.0, 2)
    assert lo == pytest.approx(0.5207, abs=1e-3) and hi == pytest.approx(6.285, abs=1e-2)
    p = pw.study_power("Rm", [10.0, 12.0, 11.0], [2.0, 3.0, 2.5], None, headroom_from="x")
    assert p.sigma_dof == 2
    a, b = p.headroom_over_noise_interval()
    assert a == pytest.approx(p.headroom / (p.sigma_d * hi)) and b == pytest.approx(p.headroom / (p.sigma_d * lo))
    assert "95 % interval" in pw.power_line(p) and p.to_dict()["headroom_over_noise_interval"] == (a, b)
    assert pw.power_frame({"s": p}).loc[0, "H/σ_d 95 % interval"] == f"{a:.1f}–{b:.1f}"
    given = pw.study_power("Rm", [10.0], [2.0], None, headroom_from="x", sigma_d=2.0)
    assert given.headroom_over_noise_interval() is None and "95 % interval" not in pw.power_line(given)
    with pytest.raises(ValueError, match="dof"):
        pw.sigma_interval(1.0, 0)


def test_equivalence_mde_is_what_two_one_sided_tests_show_80_percent_of_the_time():
    from scipy import stats

    assert pw.equivalence_mde(1.0) == pytest.approx(stats.norm.ppf(0.95) + stats.norm.ppf(0.9))     # one run each, known sd
    assert pw.equivalence_mde(2.0, 5) > (stats.norm.ppf(0.95) + stats.norm.ppf(0.9)) * 2 / math.sqrt(5)   # an estimated sd costs
    # simulated: at a true difference of 0 and a margin of the MDE, the paired 90 % interval lies inside it ≈ 80 % of the time
    rng = np.random.default_rng(1)
    n, sd = 8, 1.0
    m = pw.equivalence_mde(sd, n)
    d = rng.normal(0, sd, (4000, n))
    half = stats.t.ppf(0.95, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    inside = (np.abs(d.mean(axis=1)) + half < m).mean()
    assert 0.77 < inside < 0.83
    assert pw.seeds_to_show_equivalence(m, sd) <= n and pw.seeds_to_show_equivalence(-1, sd) is None


@pytest.mark.parametrize("a,b,margin,verdict", [
    ([20.0, 20.1, 19.9, 20.0], [20.0, 20.0, 20.0, 20.0], 0.5, "confirmed"),     # 90 % interval ±0.1 inside ±0.5
    ([23.0, 23.1, 22.9, 23.0], [20.0, 20.0, 20.0, 20.0], 0.5, "refuted"),       # 3 apart: wholly outside
    ([20.0, 22.0, 18.0, 20.5], [20.0, 20.0, 20.0, 20.0], 0.5, "underpowered"),  # the design shows ±4 at best
    ([20.3, 20.5, 20.4, 20.45], [20.0, 20.0, 20.0, 20.0], 0.5, "inconclusive"),  # shows ±0.2, straddles 0.5
])
def test_powered_equivalence_each_verdict(a, b, margin, verdict):
    from vlcp.report.claims import powered_equivalence

    c = powered_equivalence("a ≈ b", a, b, margin, paper="the paper's margin")
    assert c.verdict == verdict, c
    assert c.scaled_effect == margin and c.sigma_d > 0 and (c.seeds_to_decide is None) == (verdict in ("confirmed", "refuted"))
    one = powered_equivalence("a ≈ b", a[:1], b[:1], margin, paper="p", sd=0.01, exploratory=True)
    assert one.verdict == "inconclusive" and "would read" in one.evidence


def test_powered_equivalence_refutes_one_of_k_only_on_its_bonferroni_interval():
    """Outside the margin at 90 % but not at 1 − 0.10/k: one of k equivalences does not refute the row."""
    from vlcp.report.claims import all_equivalent, powered_equivalence

    a, b = [21.0, 21.3, 20.8, 21.1], [20.0, 20.0, 20.0, 20.0]       # 90 % [+0.81, +1.29]; at k = 20 [+0.27, +1.83]
    assert powered_equivalence("c", a, b, 0.5, paper="p").verdict == "refuted"
    wide = powered_equivalence("c", a, b, 0.5, paper="p", comparisons=20)
    assert wide.verdict in ("inconclusive", "underpowered")
    far = powered_equivalence("c", [25.0, 25.1, 24.9, 25.0], b, 0.5, paper="p", comparisons=20)
    assert far.verdict == "refuted"
    row = all_equivalent("all hold", [powered_equivalence("x", b, b, 0.5, paper="p", sd=0.01), far])
    assert row.verdict == "refuted" and row.claim == "all hold" and row.effect == far.effect


def test_powered_equivalence_with_a_zero_margin_is_never_confirmed():
    """A headroom that is not positive carries the paper's margin to 0: refuted by an interval that
    excludes 0, else underpowered (no number of seeds decides it)."""
    from vlcp.report.claims import powered_equivalence

    same = powered_equivalence("c", [20.0, 20.1, 19.9, 20.0], [20.0] * 4, 0.0, paper="p")
    assert same.verdict == "underpowered" and same.seeds_to_decide is None and "margin 0" in same.evidence
    apart = powered_equivalence("c", [23.0, 23.1, 22.9, 23.0], [20.0] * 4, 0.0, paper="p")
    assert apart.verdict == "refuted" and apart.scaled_effect == 0.0
    with pytest.raises(ValueError, match=">= 0"):
        powered_equivalence("c", [1.0], [1.0], -0.1, paper="p")


def test_an_equivalence_on_an_unresolved_headroom_has_no_margin_to_refute_by():
    """A measured headroom these runs do not resolve is carried to 0 as unknown (`Scale.unresolved`),
    not as 0: an equivalence margin drawn from it cannot be shown or refuted, however far apart the
    two sides are, where a headroom that is not positive (margin 0) refutes any difference it sees."""
    from vlcp.report.claims import measured_scale, powered_equivalence

    gated = measured_scale(3.23, 16.32, "measured here", "Joint − ER does not resolve its headroom")
    assert gated.headroom == 0.0 and gated.unresolved == "Joint − ER does not resolve its headroom"
    assert measured_scale(3.23, 16.32, "measured here").unresolved is None
    apart = powered_equivalence("c", [23.0, 23.1, 22.9, 23.0], [20.0] * 4, gated(1.6), paper="p", unknown_margin=gated.unresolved)
    assert apart.verdict == "underpowered" and apart.scaled_effect is None and apart.seeds_to_decide is None
    assert "equivalence margin unknown: Joint − ER does not resolve its headroom" in apart.evidence
    assert apart.effect == pytest.approx(3.0) and apart.seeds == 4


def test_levers_frame_from_recorded_rows():
    """benchmarks/power_levers.py's rows → H (mean upper − lower), σ_d (sd of the per-seed
    differences), tasks that teach, and whether the setting meets the goal."""
    from vlcp.report.power import levers_frame

    row = {"study": "ctp", "label": "640 steps", "seeds": [10, 11, 12], "upper": "u", "lower": "l", "metric": "final Rm",
           "values": {"10": [10.0, 4.0], "11": [11.0, 4.5], "12": [12.0, 5.5]},   # differences 6, 6.5, 6.5
           "teaches": [True] * 7 + [False] * 2, "lower_train_seconds": [30.0, 32.0, 34.0], "date": "d", "commit": "c"}
    weak = {**row, "label": "weak", "values": {"10": [10.0, 4.0], "11": [11.0, 9.0], "12": [9.0, 8.0]}}
    df = levers_frame([row, weak, {**row, "study": "incclip"}], "ctp").set_index("setting")
    assert list(df.index) == ["640 steps", "weak"]
    sd = float(np.std([6, 6.5, 6.5], ddof=1))
    assert df.loc["640 steps", "H"] == pytest.approx(19 / 3) and df.loc["640 steps", "σ_d"] == pytest.approx(sd)
    assert df.loc["640 steps", "tasks that teach"] == "7/9" and df.loc["640 steps", "lower's training s"] == 32.0
    assert bool(df.loc["640 steps", "meets the goal"]) and not bool(df.loc["weak", "meets the goal"])
    assert levers_frame([row], "fomo").empty


def test_levers_frame_reads_a_candidate_metric():
    from vlcp.report.power import levers_frame

    row = {"study": "incclip", "label": "study", "seeds": [10, 11], "upper": "u", "lower": "l", "metric": "Average",
           "values": {"10": [20.0, 10.0], "11": [22.0, 11.0]}, "teaches": None, "lower_train_seconds": [1.0, 1.0],
           "more_values": {"R@1": {"10": [4.0, 1.0], "11": [5.0, 1.0]}}, "date": "d", "commit": "c"}
    df = levers_frame([row, {**row, "label": "old", "more_values": {}}], "incclip", "R@1")
    assert list(df["setting"]) == ["study"] and df["H"].iloc[0] == pytest.approx(3.5) and df["metric"].iloc[0] == "R@1"
    assert df["tasks that teach"].iloc[0] == "0/0" and not df["meets the goal"].iloc[0]


def test_levers_frame_reads_tasks_that_teach_on_another_pool():
    """`teach_on`: tasks that teach (and the goal) read on that pool, the test pools' reading beside
    it; a row that did not record the pool says so and cannot meet the goal."""
    from vlcp.report.power import lever_powers, levers_frame

    row = {"study": "spine", "label": "study", "seeds": [10, 11, 12], "upper": "u", "lower": "l", "metric": "final Rm",
           "values": {"10": [10.0, 4.0], "11": [11.0, 4.5], "12": [12.0, 5.5]}, "teaches": [True] * 3 + [False] * 6,
           "more_teaches": {"unseen_style": [True] * 8 + [False]}, "lower_train_seconds": [1.0] * 3,
           "date": "d", "commit": "c"}
    old = {**row, "label": "old"}
    del old["more_teaches"]
    df = levers_frame([row, old], "spine", teach_on="unseen_style").set_index("setting")
    assert df.loc["study", "tasks that teach"] == "8/9" and df.loc["study", "on the test pools"] == "3/9"
    assert df.loc["old", "tasks that teach"] == "not recorded" and df.loc["old", "on the test pools"] == "3/9"
    assert bool(df.loc["study", "meets the goal"]) and not bool(df.loc["old", "meets the goal"])
    assert not bool(levers_frame([row], "spine").set_index("setting").loc["study", "meets the goal"])   # 3/9 on test
    assert lever_powers([row], "spine", teach_on="unseen_style")["study"].to_dict()["teaching_from"] == "unseen_style"


def test_power_levers_records_one_row_per_setting_and_keeps_ledger_seeds_out(tmp_path):
    """benchmarks/power_levers.py: a re-measured setting replaces its row; the ledger's seeds (0-9)
    are refused, so a lever is never judged on the runs the verdicts read."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import power_levers

    out = tmp_path / "levers.json"
    power_levers.record({"study": "ctp", "label": "a", "v": 1}, out)
    power_levers.record({"study": "ctp", "label": "b", "v": 2}, out)
    power_levers.record({"study": "ctp", "label": "a", "v": 3}, out)
    import json
    rows = json.loads(out.read_text())["rows"]
    assert [(r["label"], r["v"]) for r in rows] == [("b", 2), ("a", 3)]
    with pytest.raises(SystemExit):
        power_levers.main(["--study", "ctp", "--label", "x", "--seeds", "0", "1", "--out", str(out)])


def test_blocked_noise_reads_a_repros_paired_runs_both_ways():
    """benchmarks/blocked_noise.py: today's paired sd (each pair's own, n − 1 dof) against the
    seeds-as-blocks residual (pooled over every experiment); a seed effect every experiment shares
    is noise to the single-seed spread, not to the blocks."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import blocked_noise

    rng = np.random.default_rng(1)
    shared = 5 * rng.normal(size=3)                    # one draw per seed, shared by every experiment
    values = {f"e{k}": list(k + shared + 0.5 * rng.normal(size=3)) for k in range(12)}
    row = blocked_noise.measure(values)
    assert row["experiments"] == 12 and row["seeds"] == 3 and row["blocked_sd"]["dof"] == 22
    assert row["paired_own_sd"]["dof"] == 2 and row["single_seed_sd"]["sd"] > 3 * row["blocked_sd"]["sd"]
    assert row["mde_paired_blocked"] < row["mde_paired_today"]      # 22 dof against 2, at similar sds
    params = {"seeds": [0, 1], "report": {
        "overview": {"experiments": ["a", "b"]}, "ctp": {"experiments": ["c", "d"], "seeds": [0, 1]},
        **{s: {"seeds": [0], "spread": {"experiments": ["x"], "seeds": [1]}, "experiments": ["x", "y"],
               "long": {"runs": f"runs-{s}-long", "seeds": [1, 2]}} for s in ("incclip", "cllclip")},
        "fomo": {"seed": 0, "spread": {"experiments": ["f"], "seeds": [1]}, "studies": {"m": ["f", "g"]},
                 "long": {"runs": "runs-fomo-long", "seeds": [1, 2]}}}}
    assert blocked_noise.study_runs(params, long=False)["incclip"] == (["runs-incclip"], ["x"], [0, 1])
    assert blocked_noise.study_runs(params, long=True)["fomo"] == (["runs-fomo", "runs-fomo-long"], ["f", "g"], [0, 1, 2])


def test_levers_intro_says_how_the_lever_rows_read_sigma_d():
    """The lever table pairs by seed; a power table above it may not (IncCLIP's, FoMo's and CLL-CLIP's read
    the subset's √2 × pooled seed std): the sentence says so, with the study's own note and the goal."""
    from vlcp.report.power import levers_intro

    plain, noted = levers_intro(), levers_intro("H here is joint − full fine-tuning", goal=12)
    assert "paired by seed" in plain and "σ_d from" in plain and "H/σ_d ≥ 10 " in plain and "never the ledger's" in plain
    assert "; H here is joint − full fine-tuning;" in noted and "H/σ_d ≥ 12 " in noted and "; ;" not in plain


# -- a calibrated headroom holds for the configuration it was measured on (claims.calibration_mismatch) --

def _cfg(**train):
    return {"name": "seqf", "seed": 0, "data": {"root": "data/emoji", "seed": 0, "workers": 4},
            "train": {"steps": 240, "num_threads": 2, "progress": True} | train, "eval": {"batch_size": 512}}


def test_a_fingerprint_ignores_seed_paths_and_execution_but_not_what_the_runs_measure():
    from vlcp.report.claims import calibration_fingerprint

    base = calibration_fingerprint(_cfg())
    moved = {"seed": 7, "data": {"root": "/elsewhere", "seed": 0, "workers": 1},
             "train": {"steps": 240, "num_threads": 1, "progress": False}, "eval": {"batch_size": 64}}
    assert calibration_fingerprint(_cfg() | moved) == base and len(base) == 12
    assert calibration_fingerprint(_cfg(steps=12)) != base                  # another step count
    assert calibration_fingerprint(_cfg() | {"data": {"root": "data/emoji", "seed": 3, "workers": 4}}) != base  # split


def test_calibration_mismatch_names_the_experiment_and_both_fingerprints():
    from vlcp.errors import VlcpError
    from vlcp.report.claims import calibration_fingerprint, calibration_mismatch

    on = {"seqf": calibration_fingerprint(_cfg())}
    same = {"seqf": [{"config": _cfg() | {"seed": s}} for s in (0, 1)]}
    assert calibration_mismatch({"calibrated_on": on}, same, "report.x.power") is None
    assert calibration_mismatch({}, {"seqf": [{"config": _cfg(steps=12)}]}, "report.x.power") is None   # nothing recorded
    assert calibration_mismatch({"calibrated_on": on}, {"er": [{"config": _cfg()}]}, "report.x.power") is None  # not run here
    why = calibration_mismatch({"calibrated_on": on}, {"seqf": [{"config": _cfg(steps=12)}]}, "report.x.power")
    here = calibration_fingerprint(_cfg(steps=12))
    assert why.startswith("report.x.power was calibrated on another configuration of seqf") and on["seqf"] in why and here in why
    mixed = {"seqf": [{"config": _cfg()}, {"config": _cfg(steps=12)}]}      # one seed ran another setup
    assert calibration_mismatch({"calibrated_on": on}, mixed, "report.x.power") is not None
    with pytest.raises(VlcpError, match=r"report.x.power.calibrated_on"):
        calibration_mismatch({"calibrated_on": ["seqf"]}, same, "report.x.power")


def test_every_calibration_in_params_matches_the_default_configuration():
    """Each study's calibrated headroom was measured on its experiments as the default runs them: a
    change to those experiments' settings fails here until they are re-calibrated (or, where the
    change leaves the runs' numbers alone, the fingerprint is re-recorded)."""
    from vlcp.config import load_params, resolve_experiment
    from vlcp.report.claims import calibration_fingerprint

    from vlcp.report.study import load_study, registered

    params = load_params(str(Path(__file__).resolve().parents[1] / "params.yaml"))
    studies = {k: v["power"] for k, v in params["report"].items() if isinstance(v, dict) and "headroom" in (v.get("power") or {})}
    studies |= {s: c.calibration for s in registered() if (c := load_study(s).claims) is not None and c.calibration}   # claims files
    assert set(studies) == {"overview", "incclip", "cllclip", "ctp", "fomo"}
    for study, power in studies.items():
        for e, fp in power["calibrated_on"].items():
            assert calibration_fingerprint(resolve_experiment(params, e, 0).to_dict()) == fp, (study, e)
    # a study that starts from a pretrained θ0 names its pretraining run too (read from base_runs)
    for study, power in studies.items():
        bases = {Path(cfg["model"]["pretrained"]).stem for e in power["calibrated_on"]
                 if str((cfg := resolve_experiment(params, e, 0).to_dict())["model"].get("pretrained") or "").endswith(".pt")}
        assert bases <= set(power["calibrated_on"]) and (not bases or power.get("base_runs")), (study, bases)
    # ... and its report stages (default and long) depend on that folder, so a re-pretrained θ0 re-renders them
    stages = {"cllclip": "cllclip_teir", "ctp": "ctp_tables", "fomo": "fomo_figures"}
    root = Path(__file__).resolve().parents[1]
    for dvc_file, suffix in (("dvc.yaml", ""), ("long/dvc.yaml", "_long")):
        spec = yaml.safe_load((root / dvc_file).read_text())["stages"]
        for study, power in studies.items():
            if power.get("base_runs"):
                assert power["base_runs"] in spec[stages[study] + suffix]["deps"], (dvc_file, study)


def test_a_calibration_covers_the_theta0_its_runs_start_from(tmp_path):
    """A study whose runs load a pretrained θ0 (model.pretrained: a weights file) lists that
    pretraining run in calibrated_on; its results are read from base_runs, so a θ0 pretrained
    otherwise (here: more steps) voids the calibration though the stream's own configs match."""
    from vlcp.errors import VlcpError
    from vlcp.report.claims import calibration_fingerprint, calibration_mismatch, pretraining_runs
    from vlcp.utils import write_json

    base = _cfg() | {"name": "x-base"}
    power = {"calibrated_on": {"seqf": calibration_fingerprint(_cfg()), "x-base": calibration_fingerprint(base)},
             "base_runs": str(tmp_path)}
    same = {"seqf": [{"config": _cfg()}]}
    assert pretraining_runs(power, "report.x.power") == {}                 # not pretrained here: nothing to check
    assert calibration_mismatch(power, same, "report.x.power") is None
    write_json(tmp_path / "x-base" / "seed0" / "results.json", {"config": base})
    assert [r["config"] for r in pretraining_runs(power, "report.x.power")["x-base"]] == [base]
    assert calibration_mismatch(power, same, "report.x.power") is None
    write_json(tmp_path / "x-base" / "seed0" / "results.json", {"config": _cfg(steps=480) | {"name": "x-base"}})
    why = calibration_mismatch(power, same, "report.x.power")
    assert why.startswith("report.x.power was calibrated on another configuration of x-base") and "θ0" in why
    assert calibration_mismatch({k: v for k, v in power.items() if k != "base_runs"}, same, "report.x.power") is None
    with pytest.raises(VlcpError, match=r"report.x.power.base_runs"):
        calibration_mismatch(power | {"base_runs": ["runs"]}, same, "report.x.power")


def test_a_measured_headroom_scales_only_where_the_runs_resolve_it():
    """A headroom measured on a ledger's own runs (its calibration does not apply) carries the paper's
    effects only where the study's power table resolves it, H > 2 σ_d; else, or with no power table
    to check, the effects carry to 0 and the scale says why."""
    from vlcp.report.claims import RESOLVED, measured_scale, unresolved_headroom

    assert RESOLVED == 2.0
    clear = pw.StudyPower("final Rm", headroom=9.0, sigma_d=1.0, tasks_teaching=6, tasks=9, seeds=3)
    assert unresolved_headroom(clear) is None
    murky = pw.StudyPower("final Rm", headroom=0.76, sigma_d=0.49, tasks_teaching=0, tasks=4, seeds=2)
    why = unresolved_headroom(murky)
    assert why.startswith("these runs do not resolve their headroom (H/σ_d 1.6 ≤ 2") and "H 0.76, σ_d 0.49" in why
    assert unresolved_headroom(pw.StudyPower("x", headroom=2.0, sigma_d=1.0, tasks_teaching=0, tasks=1, seeds=2)) is not None
    assert "no power table" in unresolved_headroom(None)
    kept = measured_scale(4.0, 8.0, "measured here")
    assert kept.headroom == 4.0 and kept(2.0) == pytest.approx(1.0) and kept.how == "measured here"
    gone = measured_scale(4.0, 8.0, "measured here", why)
    assert gone.headroom == 0.0 and gone(2.0) == 0.0 and gone.how == f"measured here; it measures 4.00, but {why}: carried to 0"


def test_a_scales_own_pair_must_resolve_its_headroom_too():
    """Where a scale's pair is not its power table's (IncCLIP's Joint − ER, FoMo-in-Flux's full-FT change,
    CLL-CLIP's cells), that pair's own noise must resolve it as well: H > 2 σ_d of one run of that pair,
    paired by seed; under 2 seeds there is no σ_d to check it against."""
    from vlcp.report.claims import Noise, Scale, pair_noise, scales_how, unresolved_pair

    n = pair_noise({0: 12.0, 1: 14.0, 2: 10.0}, {0: 2.0, 1: 2.0, 2: 2.0, 3: 9.0})   # seed 3 unpaired: left out
    assert n.sd == pytest.approx(2.0) and n.dof == 2 and n.source == "sd of the per-seed differences, 3 seeds"
    alone = pair_noise({0: 1.0, 1: 3.0})
    assert alone.sd == pytest.approx(np.sqrt(2.0)) and alone.source == "seed sd, 2 seeds"
    assert pair_noise({0: 1.0}) is None and pair_noise({0: 1.0, 1: 2.0}, {1: 0.0, 2: 0.0}) is None
    assert unresolved_pair(4.01, Noise(2.0, "x"), "a − b") is None
    why = unresolved_pair(4.0, Noise(2.0, "paired"), "a − b")   # the boundary H = 2 σ_d is not resolved
    assert why == "a − b does not resolve its headroom (H/σ_d 2.0 ≤ 2: H 4.00, σ_d 2.00, paired)"
    assert "H/σ_d undefined" in unresolved_pair(-1.0, Noise(0.0, "x"), "a − b")
    assert unresolved_pair(4.0, None, "a − b") == "no σ_d of a − b to check it against (it needs ≥ 2 seeds)"
    same = {"A_KA": Scale(1.0, 2.0, "one way"), "GM": Scale(1.0, 2.0, "one way")}
    assert scales_how(same) == "one way" and scales_how({}) == ""
    assert scales_how(same | {("in", "I2T", "F"): Scale(0.0, 2.0, "other")}) == "A_KA, GM: one way; in I2T F: other"
    gated = same | {"A_ZS": Scale(0.0, 2.0, "one way; it measures 1.00, but x: carried to 0")}
    assert scales_how(gated) == "one way; A_ZS: it measures 1.00, but x: carried to 0"
