"""The CLL-CLIP report (vlcp.report.cllclip) on hand-made results: the per-language sampling noise
of AR and F, the seed spread, its tables, and its ledger (vlcp/report/studies/cllclip/claims.yaml
judged by the report engine): each kind of row fed data for the verdicts it can return."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlcp.report import cllclip as cl
from vlcp.report.paper import paper_table

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


def test_engineering_targets_table_is_shared():
    t = cl.engineering_targets([{"target": "TEIR costs at most 1.05× CLL-CLIP's training time", "ratio": 1.02,
                                 "slowest": 1.08, "goal": 1.05, "source": "bench"}])
    assert t.loc["TEIR costs at most 1.05× CLL-CLIP's training time", "result"] == "met by the median only"


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


def _write(root, exp, seed, r):
    f = Path(root) / exp / f"seed{seed}" / "results.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(r))


def test_complete_subset_finds_the_main_and_spread_seeds_and_names_the_missing(tmp_path):
    runs = subset()
    for e, rs in runs.items():
        for s, r in zip(SUBSET_SEEDS, rs):
            if (e, s) != ("cll-clip-teir", 2):
                _write(tmp_path / ("stream-seed0" if s == 0 else f"spread-seed{s}"), e, s, r)
    got, missing = cl.complete_subset(tmp_path, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert list(got) == ["cll-clip"] and got["cll-clip"] == runs["cll-clip"] and missing == ["cll-clip-teir seed 2"]
    note = cl.spread_note(None, missing, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
    assert "missing: cll-clip-teir seed 2" in note and "test-set noise only" in note
    _write(tmp_path / "spread-seed2", "cll-clip-teir", 2, runs["cll-clip-teir"][2])
    got, missing = cl.complete_subset(tmp_path, ["cll-clip", "cll-clip-teir"], SUBSET_SEEDS)
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


# -- the ledger: vlcp/report/studies/cllclip/claims.yaml judged by the report engine --

from vlcp.report.ledger import evaluate, evidence          # noqa: E402
from vlcp.report.study import load_study                   # noqa: E402

METHODS = ["clip", "oewc", "er", "der", "mla", "ptuning", "lora", "dualprompt", "codaprompt"]
ABLATIONS = ["cll-abl-init", "cll-abl-grad", "cll-abl-decay", "cll-abl-graddecay", "cll-abl-oracle",
             "cll-fullmodel", "cll-only-cm", "cll-only-cl"]


def at_seeds(final, f=0.0, seeds=(0,), jitter=0.1, loss=1.0):
    """{seed: results}: every cell's AR `final` + jitter × seed, F `f` + jitter × seed², Fig. 3's
    loss and trace `loss` + jitter × seed / 10 (arms of different jitters differ by seed)."""
    def one(s):
        ar = final + jitter * s
        return run([ar] * 3, before=[ar + f + jitter * s * s] * 2 + [ar], loss=loss + jitter * s / 10)
    return {s: one(s) for s in seeds}


def ledger_runs(seeds=(0,), teir=60.0, teir_f=10.0):
    """Every experiment the ledger reads: plain runs at AR 50, F 20; with TEIR at AR `teir`, F
    `teir_f`; the ablations' settings near AR 55, F 15; every setting's loss 0.5 against (1)'s 1.0."""
    runs = {f"cll36-{m}": at_seeds(50.0, 20.0, seeds) for m in METHODS}
    runs |= {f"cll36-{m}-teir": at_seeds(teir, teir_f, seeds, jitter=0.3) for m in METHODS}
    runs |= {"cll-clip": at_seeds(50.0, 20.0, seeds), "cll-clip-teir": at_seeds(teir, teir_f, seeds, jitter=0.3, loss=0.5)}
    runs |= {e: at_seeds(55.0 + i, 15.0 - i, seeds, jitter=0.2 + i / 20, loss=0.5) for i, e in enumerate(ABLATIONS)}
    return runs


def judged(runs, spread=None, n_test=100_000):
    rows = evaluate(load_study("cllclip"), runs, {}, calibrated=True, floors=cl.floors(runs, n_test, spread))
    return {r.claim_id: r for r in rows}


def test_the_claims_file_holds_todays_rows_with_the_papers_numbers_from_its_tables():
    st = load_study("cllclip")
    assert st.title == "CLL-CLIP + TEIR" and st.claims_file == "cllclip_teir_claims.json" and st.params == "cllclip"
    rows = {r.id: r for r in st.claims.rows}
    assert len(rows) == 12 and rows["teir-every-method"].claim == "TEIR improves AR and F of every method"
    assert len(rows["teir-every-method"].comparisons) == 9 * 8 and len(rows["regularisers"].comparisons) == 8
    main = rows["teir-main"].comparisons
    assert main[0].effect == pytest.approx(38.3 - 29.6) and main[0].measure == "AR in I2T"   # Table 3 (6) − (1)
    assert main[4].a == "cll-clip" and main[4].effect == pytest.approx(23.2 - 14.7)          # F: (1)'s F − (6)'s
    sc = st.claims.scales
    assert sc["AR in I2T"].paper_headroom == pytest.approx(53.3 - 29.6) and sc["AR in I2T"].calibrated == 0.92
    assert sc["F out T2I"].paper_headroom == pytest.approx(18.4) and sc["F out T2I"].upper == "cll-clip"
    assert set(st.claims.calibration["calibrated_on"]) == {"cll-joint", "cll-clip", "cll-base"}


def test_a_clear_effect_at_every_seed_confirms_and_the_reverse_refutes():
    rows = judged(ledger_runs(seeds=(0, 1, 2)))
    for cid in ("teir-main", "teir-every-method", "init", "regularisers", "fig4-cross-lingual"):
        assert rows[cid].verdict == "confirmed", (cid, evidence(rows[cid]))
    assert rows["teir-main"].seeds == 3 and rows["teir-main"].comparisons[0]["how"] == "paired by seed, n=3"
    assert judged(ledger_runs(seeds=(0, 1, 2), teir=40.0, teir_f=30.0))["teir-main"].verdict == "refuted"


def test_a_missing_arm_is_not_testable():
    runs = ledger_runs()
    del runs["cll-abl-oracle"], runs["cll-only-cl"]
    rows = judged(runs)
    assert rows["oracle"].verdict == "not testable" and "cll-abl-oracle" in rows["oracle"].notes[0]
    assert rows["fig4-both"].verdict == "not testable" and rows["fig3-loss"].verdict == "not testable"


def test_floors_add_the_test_set_noise_and_the_seed_spread():
    runs = ledger_runs()
    se = cl.value_se(runs["cll-clip"][0], 200, "in", "I2T", "AR")[1]
    plain = cl.floors(runs, 200, None)
    assert plain["AR in I2T"].sd == pytest.approx(np.sqrt(2) * se) and plain["AR in I2T"].dof is None
    assert "AR in I2T, seed spread" not in plain and "loss" not in plain
    se36 = cl.value_se(runs["cll36-clip"][0], 200, "out", "T2I", "F")[1]
    assert plain["F out T2I, 36 languages"].sd == pytest.approx(np.sqrt(2) * se36)
    sp = cl.seed_spread(subset(spread_ar=5.0, spread_loss=0.01), SUBSET_SEEDS)
    seeded = cl.floors(runs, 200, sp)
    m = sp["metrics"]["AR in I2T"]
    assert seeded["AR in I2T"].sd == pytest.approx(np.hypot(np.sqrt(2) * se, m["difference_spread"]))
    assert seeded["AR in I2T"].dof == 4 and seeded["loss"].sd == pytest.approx(sp["metrics"]["loss"]["difference_spread"])
    assert seeded["AR in I2T, seed spread"].sd == pytest.approx(m["difference_spread"])
    assert seeded["F in I2T, one run"].sd == pytest.approx(sp["metrics"]["F in I2T"]["pooled_std"])


def test_a_single_seed_row_reads_its_floor():
    runs = ledger_runs()
    fl = cl.floors(runs, 1000, None)
    row = judged(runs, n_test=1000)["init"]
    c = row.comparisons[0]
    assert c["seeds"] == 1 and c["sigma_d"] == pytest.approx(fl["AR in I2T"].sd) and "floor sd" in c["how"]
    assert row.verdict in ("underpowered", "inconclusive") and "exploratory" in " ".join(row.notes)
    t2 = judged(runs, n_test=1000)["teir-every-method"].comparisons[0]
    assert t2["sigma_d"] == pytest.approx(fl["AR in I2T, 36 languages"].sd)


@pytest.mark.parametrize("six_f, six_ar, verdict", [
    (15.0, 60.0, "confirmed"),    # AR up 5, F as (5)'s: inside the margin
    (30.0, 60.0, "refuted"),      # F up 15, far beyond the margin (0.125 × plain F ≈ 2.5)
    (15.0, 50.0, "refuted"),      # AR down 5
])
def test_improves_without_forgetting_more_by_hand(six_f, six_ar, verdict):
    runs = ledger_runs(seeds=(0, 1, 2))
    runs["cll-abl-graddecay"] = at_seeds(55.0, 15.0, (0, 1, 2), jitter=0.2)      # (5)
    runs["cll-clip-teir"] = at_seeds(six_ar, six_f, (0, 1, 2), jitter=0.3)        # (6)
    row = judged(runs)["init-without-forgetting"]
    assert row.verdict == verdict, evidence(row)
    f = next(c for c in row.comparisons if c["label"].startswith("(6) vs (5) in I2T F"))
    share = (23.2 - 20.3) / 23.2                                   # Table 3: (3)'s F reduction, a share of (1)'s
    margin = share * 20.0                                          # × plain CLL-CLIP's F at its first seed
    assert f["label"].endswith(f"+ margin {margin:.2f}")
    assert f["effect"] == pytest.approx(np.mean([(15.0 + 0.2 * s * s) - (six_f + 0.3 * s * s) for s in (0, 1, 2)]) + margin)
    # F's target: the margin + the paper's (5) − (6) F reduction carried by F's scale (H 0.73 / 23.2)
    assert f["scaled_effect"] == pytest.approx((14.9 - 14.7) / 23.2 * 0.73 + margin)


def test_improves_without_forgetting_more_needs_a_forgetting_plain_model():
    runs = ledger_runs(seeds=(0, 1, 2))
    runs["cll-clip"] = at_seeds(50.0, 0.0, (0, 1, 2), jitter=0.0)
    row = judged(runs)["init-without-forgetting"]
    assert row.verdict == "not testable" and "does not forget" in row.notes[0]


def test_fig3_reads_its_effect_in_units_of_its_floor():
    sp = cl.seed_spread(subset(spread_loss=0.01), SUBSET_SEEDS)
    sd = sp["metrics"]["loss"]["difference_spread"]
    rows = judged(ledger_runs(seeds=(0, 1, 2)), spread=sp)
    assert rows["fig3-loss"].verdict == "confirmed" and rows["fig3-loss"].scaled_effect == pytest.approx(sd)
    up = ledger_runs(seeds=(0, 1, 2))
    up["cll-abl-init"] = at_seeds(55.0, 15.0, (0, 1, 2), jitter=0.3, loss=1.5)   # (2) above (1) at every seed
    assert judged(up, spread=sp)["fig3-loss"].verdict == "refuted"
    one = judged(ledger_runs())["fig3-loss"]                             # one run each, no spread: no σ_d
    assert one.verdict == "underpowered" and one.scaled_effect is None and "no seed spread" in one.needs


def test_ledger_runs_join_the_subsets_seeds_and_the_long_profiles(tmp_path):
    study = {"seeds": [0], "experiments": ["cll-clip", "cll-abl-init"], "spread": {"experiments": ["cll-clip"], "seeds": [1, 2]},
             "long": {"runs": str(tmp_path.parent / (tmp_path.name + "-long")), "seeds": [1, 2]}}
    _write(tmp_path / "stream-seed0", "cll-clip", 0, run([50.0] * 3))
    _write(tmp_path / "stream-seed0", "cll-abl-init", 0, run([51.0] * 3))
    for s in (1, 2):
        _write(tmp_path / f"spread-seed{s}", "cll-clip", s, run([50.0 + s] * 3))
        _write(tmp_path.parent / (tmp_path.name + "-long"), "cll-abl-init", s, run([51.0 + s] * 3))
    short = cl.ledger_runs(tmp_path, study)
    assert sorted(short["cll-clip"]) == [0, 1, 2] and sorted(short["cll-abl-init"]) == [0]
    assert sorted(cl.ledger_runs(tmp_path, study, long=True)["cll-abl-init"]) == [0, 1, 2]


def test_the_notebooks_ledger_cell_calls_the_studys_ledger_hook():
    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "cllclip_teir.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if "ledger_json(" in "".join(c["source"]))
    compile(cell, "ledger cell", "exec")
    assert 'load_study("cllclip")' in cell and "cl.ledger(cllclip, params, runs_dir, long)" in cell   # the hook test_pins pins
    assert not any(f in cell for f in ("cl.improves", "lower_than", "study_scales", "write_claims", "evaluate("))


def test_a_row_compares_at_the_seeds_both_arms_ran():
    """The seed subset's arms at seeds 0-2 beside a one-seed ablation: TEIR on and off pair at
    three seeds; (2) vs (1) compares the main seed's runs, never one run against three."""
    runs = ledger_runs()
    runs["cll-clip"] = at_seeds(50.0, 20.0, (0, 1, 2))
    runs["cll-clip-teir"] = at_seeds(60.0, 10.0, (0, 1, 2), jitter=0.3)
    rows = judged(runs)
    assert rows["teir-main"].comparisons[0]["seeds"] == 3
    init = rows["init"].comparisons[0]
    assert init["seeds"] == 1 and init["how"].startswith("one run each") and init["effect"] == pytest.approx(55.0 - 50.0)
