"""The CLL-CLIP report's claim functions (vlcp.report.cllclip) on hand-made results: the per-language
sampling noise of AR and F, and each claim function fed data for each verdict it can return."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlcp.report import cllclip as cl
from vlcp.report.refs import paper_table

LANGS = ["en", "de", "fr"]


def matrix(final, before=None):
    """Lower-triangular a[i][j] (None before language j is learned); `before[j]` = R@1 on j right
    after learning it (default: the final value, no forgetting)."""
    before = before or final
    rows = [[before[j] if j <= i else None for j in range(len(final))] for i in range(len(final) - 1)]
    return rows + [list(final)]


def run(final, before=None, coverage=(1.0, 1.0, 1.0), loss=1.0):
    m = matrix(final, before)
    cell = {"TR@1": m, "IR@1": m}
    zero = {"TR@1": [10.0] * len(LANGS), "IR@1": [10.0] * len(LANGS)}
    return {"languages": LANGS, "coverage": {"test": dict(zip(LANGS, coverage))}, "stream": "language",
            "tasks": list(LANGS), "task_languages": [[lang] for lang in LANGS],
            "zero_shot": {"in_domain": zero, "out_domain": zero},
            "matrix": {"in_domain": cell, "out_domain": cell}, "convergence": {"loss": loss, "fisher_trace": loss}}


SUBSET_SEEDS = [0, 1, 2]


def subset(spread_ar=5.0, spread_loss=0.01):
    """The seed subset at seeds 0, 1, 2: each experiment's AR (every cell) at mean ± `spread_ar`
    (seed std `spread_ar`), F 20 at every seed, loss and Fisher trace at 1 ± `spread_loss`."""
    return {e: [run([v + k * spread_ar] * 3, before=[v + k * spread_ar + 20] * 2 + [v + k * spread_ar], loss=1 + k * spread_loss)
                for k in (0, 1, -1)] for e, v in (("cll-clip", 50.0), ("cll-clip-teir", 60.0))}


def test_test_counts_follow_each_languages_coverage():
    r = run([50, 50, 50], coverage=(1.0, 0.5, 0.25))
    assert list(cl.test_counts(r, 400)) == [400, 200, 100]
    r["coverage"]["test"].pop("fr")
    with pytest.raises(ValueError, match=r"coverage.test has no entry for languages \['fr'\]"):
        cl.test_counts(r, 400)


def test_ar_se_uses_the_per_language_counts_not_the_total():
    a = np.array([[50.0, 50.0]])
    # each language 50 % over its own count: se = 100·√(Σ .25/n_j) / 2
    assert cl.ar_se(a, np.array([100.0, 25.0])) == pytest.approx(100 * np.sqrt(0.25 / 100 + 0.25 / 25) / 2)
    assert cl.ar_se(a, np.array([100.0, 25.0])) > cl.ar_se(a, np.array([125.0, 125.0]))   # total-count SE is smaller


def test_f_se_adds_both_ends_of_each_forgetting_term():
    a = np.array([[50.0, np.nan], [20.0, 50.0]])       # F = 30 on language 0 only
    assert cl.forgetting(a) == pytest.approx(30.0)
    assert cl.f_se(a, np.array([100.0, 100.0])) == pytest.approx(100 * np.sqrt((0.25 + 0.16) / 100))
    assert cl.f_se(a[:1], np.array([100.0, 100.0])) is None


def test_better_signs_forgetting_as_a_reduction():
    a, b = run([50, 50, 50], before=[60, 60, 50]), run([50, 50, 50], before=[70, 70, 50])   # F 10 vs 20
    e = cl.better(a, b, 1000, "in", "T2I", "F")
    assert e.diff == pytest.approx(10.0) and "test-set noise of F" in e.how
    assert cl.better(a, b, 1000, "out", "I2T", "AR").diff == pytest.approx(0.0)
    with pytest.raises(ValueError, match="metric must be 'AR' or 'F'"):
        cl.better(a, b, 1000, "in", "T2I", "R@1")
    with pytest.raises(ValueError, match="same seeds expected on both sides, got 3 and 2"):
        cl.better([a, a, a], [b, b], 1000, "in", "T2I", "F")      # never silently the first run of each


@pytest.mark.parametrize("teir_final, n_test, verdict", [(60.0, 10_000, "confirmed"), (51.0, 20, "inconclusive"),
                                                        (45.0, 10_000, "not confirmed")])
def test_improves_every_verdict_over_all_four_cells(teir_final, n_test, verdict):
    plain = run([50, 50, 50], before=[70, 70, 50])                   # F 20
    teir = run([teir_final] * 3, before=[teir_final + 5, teir_final + 5, teir_final])   # F 5
    c = cl.improves("TEIR improves AR and F of every method", [("clip", teir, plain)], n_test, source="Table 2")
    assert c.verdict == verdict
    assert c.evidence.startswith(("8/8", "0/8", "4/8")) and "in I2T/in T2I/out I2T/out T2I" in c.evidence
    assert "seed spread not measured" in c.evidence


def test_improves_checks_only_the_named_metric():
    a, b = run([60, 60, 60], before=[90, 90, 60]), run([50, 50, 50])    # a: higher AR, more forgetting
    assert cl.improves("c", [("a vs b", a, b)], 10_000, metrics=("AR",)).verdict == "confirmed"
    assert cl.improves("c", [("a vs b", a, b)], 10_000, metrics=("F",)).verdict == "not confirmed"


def test_f_margin_is_the_smallest_regulariser_effect_in_table3():
    rel, how = cl.f_margin(paper_table("cllclip_table3"))
    assert rel == pytest.approx((18.4 - 16.1) / 18.4)            # (3) vs (1), out-of-domain T2I
    assert "(3) vs (1)" in how


@pytest.mark.parametrize("six_final, six_f, n_test, verdict", [
    (60.0, 10.0, 10_000, "confirmed"),         # AR up, F equal: inside the margin
    (52.0, 10.0, 30, "inconclusive"),          # too few captions to tell
    (60.0, 20.0, 10_000, "not confirmed"),     # F up by 10 > margin 0.125 × 20 = 2.5
    (45.0, 10.0, 10_000, "not confirmed"),     # AR down
])
def test_improves_without_forgetting_more_every_verdict(six_final, six_f, n_test, verdict):
    one = run([40, 40, 40], before=[60, 60, 40])          # (1): F 20
    five = run([50, 50, 50], before=[60, 60, 50])         # (5): F 10
    six = run([six_final] * 3, before=[six_final + six_f, six_final + six_f, six_final])
    c = cl.improves_without_forgetting_more(six, five, one, n_test, 0.125, "paper")
    assert c.verdict == verdict and c.source == "Table 3 (6) vs (5)"


def test_improves_without_forgetting_more_needs_a_forgetting_plain_model():
    flat = run([50, 50, 50])                              # (1) does not forget: F 0
    c = cl.improves_without_forgetting_more(run([60, 60, 60]), run([50, 50, 50]), flat, 1000, 0.125, "paper")
    assert c.verdict == "not testable" and "does not forget" in c.evidence


@pytest.mark.parametrize("values, sd, verdict, reads", [
    ({"(1)": 2.0, "(2)": 1.0, "(3)": 1.2}, 0.1, "inconclusive", "would read confirmed"),   # one run a setting
    ({"(1)": 2.0, "(2)": 1.0, "(3)": 1.2}, None, "inconclusive", "no spread measured"),    # never confirmed
    ({"(1)": 2.0, "(2)": 1.0, "(3)": 2.5}, 0.1, "inconclusive", "would read refuted"),
    ({"(1)": 2.0, "(2)": 2.0, "(3)": 1.99}, 0.1, "underpowered", "seeds per arm"),
])
def test_lower_than_every_verdict(values, sd, verdict, reads):
    c = cl.lower_than("lower training loss than (1)", values, "(1)", sd=sd, sd_source="x")
    assert c.verdict == verdict and reads in c.evidence


def test_lower_than_without_the_reference_is_not_testable():
    assert cl.lower_than("c", {"(2)": 1.0}, "(1)").verdict == "not testable"


def test_engineering_targets_table_is_shared():
    t = cl.engineering_targets([{"target": "TEIR costs at most 1.05× CLL-CLIP's training time", "ratio": 1.02,
                                 "slowest": 1.08, "goal": 1.05, "source": "bench"}])
    assert t.loc["TEIR costs at most 1.05× CLL-CLIP's training time", "result"] == "met by the median only"


def ledger_ns(tmp_path, spread_ar, study=None):
    """The ledger cell's namespace on fake runs: TEIR 10 AR points above and 5 F points below its
    plain run; the seed subset (at `spread_ar`; None: missing) at seeds 0, 1, 2."""
    from vlcp.report.claims import claims_frame, ledger_style, write_claims

    methods = ["clip", "er"]
    runs = {f"cll36-{m}{t}": run([60.0 if t else 50.0] * 3, before=[65.0 if t else 70.0] * 2 + [60.0 if t else 50.0])
            for m in methods for t in ("", "-teir")}
    abl = {"(1) CLL-CLIP": "cll-clip", "(2) init": "cll-abl-init", "(3) grad": "cll-abl-grad", "(4) decay": "cll-abl-decay",
           "(5) grad + decay": "cll-abl-graddecay", "(6) = (1) + TEIR": "cll-clip-teir", "(7) TEIR + oracle vocab": "cll-abl-oracle"}
    for i, e in enumerate([*abl.values(), "cll-fullmodel", "cll-only-cm", "cll-only-cl"]):
        runs[e] = run([40.0 + i] * 3, before=[60.0, 60.0, 40.0 + i], loss=2.0 - i / 10)
    ns = {"report": True, "runs": runs, "methods": methods, "n_test": 200, "abl": abl, "cl": cl, "pd": pd, "Path": Path,
          "paper_table": paper_table, "claims_frame": claims_frame, "ledger_style": ledger_style, "write_claims": write_claims,
          "reports_dir": str(tmp_path), "display": lambda *a, **k: None, "Markdown": str,
          "spread": None if spread_ar is None else cl.seed_spread(subset(spread_ar), SUBSET_SEEDS),
          "subset_missing": ["cll-clip seed 1"] if spread_ar is None else [], "spread_exps": ["cll-clip", "cll-clip-teir"],
          "spread_seeds": SUBSET_SEEDS, "study_power_table": None, "unresolved": None,   # (the power cell, earlier in the notebook)
          "subset": {} if spread_ar is None else subset(spread_ar), "study": study or {},
          "seeded_runs": None}   # the long profile's runs at every seed (setup cell; None by default)
    return ns


@pytest.mark.parametrize("spread_ar", [None, 20.0])
def test_ledger_cell_runs_on_fake_runs_and_keeps_the_cost_target_out(tmp_path, spread_ar):
    ns = ledger_ns(tmp_path, spread_ar)
    exec(_cell("fed0ab5d"), ns)
    texts = [c.claim for c in ns["claims"]]
    every = ns["claims"][texts.index("TEIR improves AR and F of every method")]
    if spread_ar is None:       # the subset missing: test-set noise only, as before
        assert every.verdict == "confirmed" and "seed spread not measured" in every.evidence
    else:                       # a 10-point gap inside a seed spread of 20: the ledger's verdict follows the spread
        assert every.verdict == "inconclusive"
        assert all("at seeds 0, 1, 2" in c.evidence for c in ns["claims"] if c.verdict != "not testable")
    assert not any("1.05" in t or "training time" in t for t in texts)
    assert any("both objectives" in t for t in texts) and any("Fisher" in t for t in texts)
    assert json.loads((tmp_path / "cllclip_teir_claims.json").read_text())["claims"][0]["claim"] == texts[0]


CALIBRATED = {"calibrated": "test", "headroom": {cl.spread_key(m, s, d): (10.0 if m == "AR" else 5.0)
                                                 for s, d in cl.CELLS for m in ("AR", "F")}}


def test_the_main_teir_claim_reads_every_seed_of_the_subset_paired_and_judges_power(tmp_path):
    """TEIR on and off at seeds 0-2 (10 AR points apart at every seed, seed std 1): decided, paired
    by seed, against the paper's (6) − (1) carried by our H 10 / the paper's joint − CLL-CLIP.
    The 36-language and ablation rows (one run each) are exploratory."""
    ns = ledger_ns(tmp_path, 1.0, study={"power": CALIBRATED})
    ns["subset"] = {e: [run([v + k] * 3, before=[v + k + f] * 2 + [v + k]) for k in (0, 1, -1)]
                    for e, v, f in (("cll-clip", 50.0, 20.0), ("cll-clip-teir", 60.0, 10.0))}
    exec(_cell("fed0ab5d"), ns)
    rows = {c.claim.split(" (")[0]: c for c in ns["claims"]}
    main = rows["TEIR improves plain CLL-CLIP's AR and F"]
    assert main.verdict == "confirmed" and main.seeds == 3 and main.comparisons == 8
    assert "paired" in main.evidence and "calibrated test" in main.paper_effect
    # the weakest cell's scaled effect: in-domain T2I AR, (20.5 − 15.2) / (31.4 − 15.2) × 10
    assert main.scaled_effect == pytest.approx(min((38.3 - 29.6) / (53.3 - 29.6) * 10, (20.5 - 15.2) / (31.4 - 15.2) * 10,
                                                   (35.0 - 26.4) / (50.7 - 26.4) * 10, (24.3 - 17.6) / (37.1 - 17.6) * 10,
                                                   (23.2 - 14.7) / 23.2 * 5, (15.6 - 10.5) / 15.6 * 5,
                                                   (23.1 - 15.3) / 23.1 * 5, (18.4 - 12.5) / 18.4 * 5))
    every = rows["TEIR improves AR and F of every method"]
    assert every.seeds == 1 and every.verdict in ("underpowered", "inconclusive") and every.scaled_effect is not None
    assert every.verdict == "underpowered" or "exploratory" in every.evidence


def test_main_teir_claim_is_refuted_when_teir_hurts_at_every_seed(tmp_path):
    ns = ledger_ns(tmp_path, 1.0, study={"power": CALIBRATED})
    ns["subset"] = {e: [run([v + k] * 3, before=[v + k + 10] * 2 + [v + k]) for k in (0, 1, -1)]
                    for e, v in (("cll-clip", 60.0), ("cll-clip-teir", 50.0))}
    exec(_cell("fed0ab5d"), ns)
    assert ns["claims"][0].verdict == "refuted"


def test_paper_rows_and_headrooms_read_tables_2_and_3():
    assert cl.paper_row("clip", teir=True)[("in", "I2T", "AR")] == pytest.approx(38.3)
    assert cl.paper_row("der", teir=False)[("out", "T2I", "F")] == pytest.approx(14.4)
    assert cl.paper_row("(5)")[("in", "T2I", "F")] == pytest.approx(10.6)
    assert ("in", "I2T", "F") not in cl.paper_row("joint", teir=False)
    assert cl.paper_headroom("in", "I2T", "AR") == pytest.approx(53.3 - 29.6)
    assert cl.paper_headroom("out", "T2I", "F") == pytest.approx(18.4)
    with pytest.raises(ValueError, match="no row"):
        cl.paper_row("(9)")
    assert cl.study_scales({}, {}) == {}
    sc = cl.study_scales({"power": CALIBRATED}, {})[("in", "I2T", "AR")]
    assert sc(8.7) == pytest.approx(8.7 / 23.7 * 10.0) and sc.how == "calibrated test"



def test_a_calibration_of_another_configuration_gives_way_to_the_ledgers_own_headroom():
    """report.cllclip.power.calibrated_on records the configuration the calibration ran (cll-clip);
    runs of another one scale by their own joint − plain CLL-CLIP: the 12-language pair, else (it is
    not in the default) the 36-language one, read from the main seed's runs."""
    cfg = lambda steps: {"name": "cll-clip", "train": {"steps": steps}}  # noqa: E731
    subset = {"cll-clip": [dict(run([40.0] * 3), config=cfg(12))]}
    main = {"cll36-joint": run([55.0] * 3), "cll36-clip": run([45.0] * 3)}
    study = {"power": CALIBRATED | {"calibrated_on": {"cll-clip": "0" * 12}}}
    quiet = {"metrics": {"AR in I2T": {"difference_spread": 1.0, "pooled_std": 0.71, "dof": 4}}}   # the seed subset's
    sc = cl.study_scales(study, subset, main, spread=quiet)[("in", "I2T", "AR")]
    assert sc.headroom == pytest.approx(10.0) and sc.how.startswith("measured on this ledger's own cll36-joint and cll36-clip runs")
    assert "calibrated on another configuration of cll-clip" in sc.how
    main["cll-joint"] = run([43.0] * 3)
    assert cl.study_scales(study, subset, main, spread=quiet)[("in", "I2T", "AR")].headroom == pytest.approx(3.0)   # 43 − 40
    # the power table's pair is the 36-language T2I AR: each cell must resolve its own headroom on the subset's noise
    loud = {"metrics": {"AR in I2T": {"difference_spread": 2.0, "pooled_std": 1.41, "dof": 4}}}
    murky = cl.study_scales(study, subset, main, spread=loud)
    assert murky[("in", "I2T", "AR")].headroom == 0.0 and "cll-joint − cll-clip on AR in I2T does not resolve its headroom " \
        "(H/σ_d 1.5 ≤ 2: H 3.00, σ_d 2.00, seed subset's √2 × pooled seed std, 4 dof)" in murky[("in", "I2T", "AR")].how
    assert "no σ_d of cll-clip's F in I2T to check it against" in murky[("in", "I2T", "F")].how   # not measured
    assert cl.study_scales(study, subset, main)[("in", "I2T", "AR")].headroom == 0.0   # no seed subset: no σ_d
    from vlcp.report.claims import calibration_fingerprint
    kept = {"power": CALIBRATED | {"calibrated_on": {"cll-clip": calibration_fingerprint(cfg(12))}}}
    assert cl.study_scales(kept, subset, main)[("in", "I2T", "AR")].headroom == 10.0   # the calibrated 10
    blind = cl.study_scales(study, subset, main, "its own runs do not resolve it")[("in", "I2T", "AR")]
    assert blind.headroom == 0.0 and "it measures 3.00, but its own runs do not resolve it: carried to 0" in blind.how
    assert cl.study_scales(kept, subset, main, "x")[("in", "I2T", "AR")].headroom == 10.0   # calibrated: no gate


# -- the seed spread of the subset (report.cllclip.spread) joining the single-seed verdicts' noise --

def test_seed_spread_pools_every_cell_and_fig3_over_the_subset():
    sp = cl.seed_spread(subset(spread_ar=5.0, spread_loss=0.01), SUBSET_SEEDS)
    assert sp["where"] == "cll-clip, cll-clip-teir at seeds 0, 1, 2"
    assert set(sp["metrics"]) == {cl.spread_key(m, s, d) for s, d in cl.CELLS for m in ("AR", "F")} | set(cl.CONVERGENCE)
    ar = sp["metrics"]["AR in I2T"]
    assert ar["std_per_experiment"] == {"cll-clip": pytest.approx(5.0), "cll-clip-teir": pytest.approx(5.0)}
    assert ar["pooled_std"] == pytest.approx(5.0) and ar["dof"] == 4 and ar["difference_spread"] == pytest.approx(5 * np.sqrt(2))
    assert sp["metrics"]["F out T2I"]["pooled_std"] == pytest.approx(0.0)
    assert sp["metrics"]["loss"]["pooled_std"] == pytest.approx(0.01)
    assert set(cl.spread_frame(sp).columns) == {"seed std cll-clip", "seed std cll-clip-teir", "pooled std", "dof",
                                               "difference spread"}
    assert cl.seed_spread({}, SUBSET_SEEDS) is None                          # no subset: no spread
    assert cl.seed_spread({"cll-clip": [run([50.0] * 3)]}, [0]) is None       # one seed: no spread


def test_better_adds_the_seed_spread_to_the_test_noise_with_t_on_its_dof():
    from scipy import stats

    a, b, sp = run([60.0] * 3), run([50.0] * 3), cl.seed_spread(subset(spread_ar=5.0), SUBSET_SEEDS)
    test_sd = float(np.hypot(cl.value_se(a, 1000, "in", "I2T", "AR")[1], cl.value_se(b, 1000, "in", "I2T", "AR")[1]))
    plain, seeded = cl.better(a, b, 1000, "in", "I2T", "AR"), cl.better(a, b, 1000, "in", "I2T", "AR", sp)
    assert plain.high - plain.diff == pytest.approx(stats.norm.ppf(0.975) * test_sd)
    assert seeded.high - seeded.diff == pytest.approx(stats.t.ppf(0.975, 4) * np.hypot(test_sd, 5 * np.sqrt(2)))
    assert "test-set noise of AR + seed spread of cll-clip, cll-clip-teir at seeds 0, 1, 2" in seeded.how
    sp_no_f = {**sp, "metrics": {k: v for k, v in sp["metrics"].items() if not k.startswith("F")}}
    e = cl.better(a, b, 1000, "in", "I2T", "F", sp_no_f)      # a spread without the metric: test noise only, said
    assert "the seed spread has no F in I2T" in e.how and e.high - e.diff == pytest.approx(stats.norm.ppf(0.975) * (
        np.hypot(cl.value_se(a, 1000, "in", "I2T", "F")[1], cl.value_se(b, 1000, "in", "I2T", "F")[1])))


@pytest.mark.parametrize("spread_ar, verdict", [(0.1, "confirmed"), (5.0, "inconclusive")])
def test_improves_a_gap_confirmed_under_test_noise_is_inconclusive_with_a_large_seed_spread(spread_ar, verdict):
    plain = run([50, 50, 50], before=[70, 70, 50])
    teir = run([55.0] * 3, before=[60, 60, 55])
    pairs = [("clip", teir, plain)]
    assert cl.improves("TEIR improves AR and F", pairs, 10_000).verdict == "confirmed"      # test-set noise alone
    c = cl.improves("TEIR improves AR and F", pairs, 10_000, spread=cl.seed_spread(subset(spread_ar), SUBSET_SEEDS))
    assert c.verdict == verdict
    assert "seed spread of cll-clip, cll-clip-teir at seeds 0, 1, 2" in c.evidence
    assert "seed spread not measured" not in c.evidence


def test_improves_without_forgetting_more_takes_the_seed_spread():
    one = run([40, 40, 40], before=[60, 60, 40])
    five, six = run([50, 50, 50], before=[60, 60, 50]), run([54.0] * 3, before=[64, 64, 54])
    assert cl.improves_without_forgetting_more(six, five, one, 10_000, 0.125, "paper").verdict == "confirmed"
    c = cl.improves_without_forgetting_more(six, five, one, 10_000, 0.125, "paper",
                                            spread=cl.seed_spread(subset(5.0), SUBSET_SEEDS))
    assert c.verdict == "inconclusive" and "at seeds 0, 1, 2" in c.evidence and "not measured" not in c.evidence


@pytest.mark.parametrize("values, spread_loss, verdict, reads", [
    ({"(1)": 2.0, "(2)": 1.0, "(3)": 1.2}, 0.01, "inconclusive", "would read confirmed"),   # lower by ≫ σ_d
    ({"(1)": 1.0, "(2)": 2.0, "(3)": 1.2}, 0.01, "inconclusive", "would read refuted"),     # (2) higher
    ({"(1)": 1.0, "(2)": 0.99, "(3)": 0.98}, 1.0, "underpowered", ""),                    # one run: MDE ≈ 3 σ_d
])
def test_lower_than_judges_fig3_against_one_comparisons_noise(values, spread_loss, verdict, reads):
    """Fig. 3 gives no numbers: the stand-in effect is σ_d itself; one run a setting, so exploratory."""
    assert cl.lower_than("c", values, "(1)").verdict in ("inconclusive", "not confirmed")   # no spread: never confirmed
    sp = cl.seed_spread(subset(spread_loss=spread_loss), SUBSET_SEEDS)
    c = cl.lower_than("c", values, "(1)", spread=sp, metric="loss")
    assert c.verdict == verdict and reads in c.evidence
    assert c.scaled_effect == pytest.approx(sp["metrics"]["loss"]["difference_spread"]) and c.comparisons == 2
    assert "seed spread of cll-clip, cll-clip-teir at seeds 0, 1, 2" in c.evidence and "stand-in" in c.paper_effect
    assert c.mde > c.scaled_effect or verdict != "underpowered"
    with pytest.raises(ValueError, match="not both"):
        cl.lower_than("c", values, "(1)", sd=0.1, spread=sp, metric="loss")


def test_stand_in_is_the_smallest_gain_table3_credits_per_cell():
    gains, cite = cl.stand_in()
    assert gains[("in", "T2I", "AR")] == pytest.approx(20.5 - 19.7)        # (6) vs (5)
    assert gains[("out", "T2I", "F")] == pytest.approx(18.4 - 18.2)        # (2) vs (1)
    assert gains[("in", "I2T", "F")] == pytest.approx(23.2 - 21.9)
    assert "(6) = (1) + TEIR vs (5)" in cite and "stand-in" in cite
    assert set(cl.stand_in(("F",))[0]) == {(s, d, "F") for s, d in cl.CELLS}


def seeded(final, f, n=3, jitter=0.2):
    """Runs at n seeds: every cell's AR `final` (± jitter by seed), F `f`."""
    return [run([final + k * jitter] * 3, before=[final + k * jitter + f] * 2 + [final + k * jitter]) for k in range(n)]


SCALES = cl.study_scales({"power": CALIBRATED}, {})


@pytest.mark.parametrize("a_final, verdict", [(70.0, "confirmed"), (40.0, "refuted"), (50.0, "underpowered")])
def test_improves_with_a_stand_in_reaches_every_verdict(a_final, verdict):
    a, b = seeded(a_final, 10.0, jitter=0.2 if verdict != "underpowered" else 3.0), seeded(50.0, 10.0, jitter=0.1)
    c = cl.improves("embeddings forget less", [("x", a, b)], 10_000, metrics=("AR",), scales=SCALES,
                    stand_in=cl.stand_in(("AR",)), source="Fig. 4")
    assert c.verdict == verdict and c.comparisons == 4 and "stand-in" in c.paper_effect
    assert c.scaled_effect == pytest.approx(min(SCALES[k](g) for k, g in cl.stand_in(("AR",))[0].items()))
    one = cl.improves("c", [("x", a[0], b[0])], 10_000, metrics=("AR",), scales=SCALES, stand_in=cl.stand_in(("AR",)))
    assert one.verdict in ("underpowered", "inconclusive") and one.seeds == 1        # one run each: exploratory


@pytest.mark.parametrize("six, six_f, verdict", [
    (60.0, 10.0, "confirmed"),      # AR up, F as (5)'s: inside the non-inferiority margin
    (60.0, 20.0, "refuted"),        # F up by 10, far beyond the margin
    (40.0, 10.0, "refuted"),        # AR down
])
def test_improves_without_forgetting_more_judged_for_power(six, six_f, verdict):
    one = run([40, 40, 40], before=[60, 60, 40])          # (1): F 20, margin 0.125 × 20 = 2.5
    paper = (cl.paper_row("(6) = (1) + TEIR"), cl.paper_row("(5)"))
    c = cl.improves_without_forgetting_more(seeded(six, six_f), seeded(50.0, 10.0), one, 10_000, 0.125, "paper",
                                            paper=paper, scales=SCALES)
    assert c.verdict == verdict and c.comparisons == 8 and c.source == "Table 3 (6) vs (5)"
    assert "non-inferiority margin" in c.evidence and "paired by seed" in c.evidence
    single = cl.improves_without_forgetting_more(run([60.0] * 3, before=[70, 70, 60]), run([50.0] * 3, before=[60, 60, 50]),
                                                 one, 10_000, 0.125, "paper", paper=paper, scales=SCALES)
    assert single.verdict in ("underpowered", "inconclusive") and single.mde is not None


def _write(root, exp, seed, r):
    f = Path(root) / exp / f"seed{seed}" / "results.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(r))


def test_load_subset_finds_the_main_and_spread_seeds_and_names_the_missing(tmp_path):
    runs = subset()
    for e, rs in runs.items():
        for s, r in zip(SUBSET_SEEDS, rs):
            if (e, s) != ("cll-clip-teir", 2):
                _write(tmp_path / ("stream-seed0" if s == 0 else f"spread-seed{s}"), e, s, r)
    got, missing = cl.load_subset(tmp_path, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert list(got) == ["cll-clip"] and got["cll-clip"] == runs["cll-clip"] and missing == ["cll-clip-teir seed 2"]
    note = cl.spread_note(None, missing, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert "missing: cll-clip-teir seed 2" in note and "test-set noise only" in note
    _write(tmp_path / "spread-seed2", "cll-clip-teir", 2, runs["cll-clip-teir"][2])
    got, missing = cl.load_subset(tmp_path, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert not missing and cl.seed_spread(got, SUBSET_SEEDS)["metrics"]["AR in T2I"]["dof"] == 4
    assert "at seeds 0, 1, 2" in cl.spread_note(cl.seed_spread(got, SUBSET_SEEDS), missing, list(got), SUBSET_SEEDS)


def _cell(cell_id):
    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "cllclip_teir.ipynb").read_text())
    return "".join(next(c for c in nb["cells"] if c.get("id") == cell_id)["source"])


@pytest.mark.parametrize("with_spread", [True, False])
def test_teach_cell_passes_every_subset_seed_to_task_gains(with_spread):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {"cll36-clip": run([50.0] * 3), "cll36-clip-teir": run([55.0] * 3)}
    sub = subset()
    shown = []
    ns = {"report": True, "runs": runs, "first": runs["cll36-clip"], "n_test": 200, "study": {"needs_teaching": ["x"]},
          "subset": sub if with_spread else {}, "subset_missing": [] if with_spread else ["cll-clip seed 1"],
          "spread": cl.seed_spread(sub, SUBSET_SEEDS) if with_spread else None, "spread_exps": list(sub),
          "spread_seeds": SUBSET_SEEDS, "languages": LANGS, "cl": cl, "plt": plt, "Markdown": str,
          "display": lambda x, *a, **k: shown.append(x)}
    try:
        exec(_cell("7dc734f0"), ns)
    finally:
        plt.close("all")
    assert all((g["n_seeds"] == 1).all() for g in ns["gains"].values())      # the whole stream: one seed
    if with_spread:
        assert list(ns["sub_gains"]) == ["cll-clip (3 seeds)", "cll-clip-teir (3 seeds)"]
        assert all((g["n_seeds"] == 3).all() and g["noise_source"].str.startswith("seed std").all()
                   for g in ns["sub_gains"].values())
    else:
        assert "sub_gains" not in ns and any("No seed spread" in str(x) for x in shown)


def test_lower_than_a_paired_pair_at_depth_refutes_the_row():
    """(1) and (6) at three seeds, paired: (6) higher at every seed refutes "every setting lower",
    although the single-run settings keep the row from ever being confirmed."""
    sp = cl.seed_spread(subset(spread_loss=0.01), SUBSET_SEEDS)
    up = {"(1)": [1.0, 1.02, 0.98], "(6)": [1.5, 1.51, 1.49], "(2)": 0.5}
    c = cl.lower_than("c", up, "(1)", spread=sp, metric="loss")
    assert c.verdict == "refuted" and "refuted by (1) − (6), at the study's depth" in c.evidence
    assert c.effect == pytest.approx(-0.5) and c.seeds == 3 and "(seeds)" in c.evidence
    down = {"(1)": [1.5, 1.51, 1.49], "(6)": [1.0, 1.02, 0.98], "(2)": 0.5}
    c = cl.lower_than("c", down, "(1)", spread=sp, metric="loss")
    assert c.verdict in ("inconclusive", "underpowered") and "exploratory" in c.evidence   # (2) is one run
    both = cl.lower_than("c", {"(1)": [1.5, 1.51, 1.49], "(6)": [1.0, 1.02, 0.98]}, "(1)", spread=sp, metric="loss")
    assert both.verdict == "confirmed"                                    # every comparison at depth


def test_the_long_profiles_ledger_pairs_every_row_by_seed(tmp_path):
    """The long profile (`long = True`): every row at seeds 0-2 (`seeded_runs`), so no row is
    exploratory; TEIR 10 AR points above its plain run at every seed decides Table 2's claim."""
    ns = ledger_ns(tmp_path, 1.0, study={"power": CALIBRATED})
    ns["seeded_runs"] = {e: [r, r, r] for e, r in ns["runs"].items()}
    ns["subset"] = {e: ns["seeded_runs"][e] for e in ("cll-clip", "cll-clip-teir")}
    exec(_cell("fed0ab5d"), ns)
    assert not any("exploratory" in c.evidence for c in ns["claims"])
    every = next(c for c in ns["claims"] if c.claim == "TEIR improves AR and F of every method")
    assert every.seeds == 3 and "paired by seed" in every.evidence and every.verdict == "confirmed"
    fisher = next(c for c in ns["claims"] if "Fisher" in c.claim)
    assert fisher.seeds == 3


def test_table_cells_show_mean_and_std_over_the_long_profiles_seeds(tmp_path):
    """The long profile (`seeded_runs`: every row at seeds 0-2): Table 2, Table 3 and Fig. 3 read
    mean ± std over the seeds, Table 2's Δ paired by seed; the bar chart draws the means."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = ["clip", "er"]
    abl_exps = ["cll-clip", "cll-abl-init", "cll-abl-grad", "cll-abl-decay", "cll-abl-graddecay", "cll-clip-teir", "cll-abl-oracle"]

    def at_seeds(v, teir=False):   # AR v + k at seed k; with TEIR also + 2k, so its paired Δ moves 2 points a seed
        return [{**run([v + k * (3 if teir else 1)] * 3, loss=1.0 + k / 100), "needs_task_id": False,
                 "steps_per_task": [6] * 3, "vocab_sizes": [100, 120, 140]} for k in range(3)]
    seeded_runs = {f"cll36-{m}{t}": at_seeds(50.0 if not t else 52.0, bool(t)) for m in methods for t in ("", "-teir")}
    seeded_runs |= {"cll36-joint": at_seeds(60.0)} | {e: at_seeds(40.0 + i) for i, e in enumerate(abl_exps)}
    from vlcp.report.results import mean_std

    ns = {"report": True, "cl": cl, "pd": pd, "np": np, "plt": plt, "paper_table": paper_table, "methods": methods, "mean_std": mean_std,
          "display": lambda *a, **k: None, "Markdown": str, "seeded_runs": seeded_runs, "shown": seeded_runs,
          "runs": {e: rs[0] for e, rs in seeded_runs.items()}, "shown_seeds": "mean ± std over seeds 0, 1, 2"}
    ns["first"], ns["langs36"] = ns["runs"]["cll36-clip"], LANGS
    for cell in ("0140f6bb", "a924d4eb", "1318c88e", "f640b602"):
        exec(_cell(cell), ns)
        plt.close("all")
    t2 = ns["t2"]
    assert t2.loc[("clip", "plain"), ("in", "T2I", "AR")] == "51.0 ± 1.0"
    assert t2.loc[("clip", "Δ (TEIR − plain)"), ("in", "T2I", "AR")] == "4.0 ± 2.0"     # 2, 4, 6: paired by seed
    assert ns["t3"].loc["(2) init", ("in", "I2T", "AR")] == "42.0 ± 1.0"
    assert cl.convergence_over({"(1)": seeded_runs["cll-clip"]}).loc["(1)", "loss"] == "1.01 ± 0.01"
