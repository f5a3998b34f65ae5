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
    return {"languages": LANGS, "coverage": {"test": dict(zip(LANGS, coverage))},
            "matrix": {"in_domain": cell, "out_domain": cell}, "convergence": {"loss": loss, "fisher_trace": loss}}


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


@pytest.mark.parametrize("values, sd, verdict", [
    ({"(1)": 2.0, "(2)": 1.0, "(3)": 1.2}, 0.1, "confirmed"),
    ({"(1)": 2.0, "(2)": 1.0, "(3)": 1.2}, None, "inconclusive"),   # no spread measured: never confirmed
    ({"(1)": 2.0, "(2)": 1.0, "(3)": 2.5}, 0.1, "not confirmed"),
])
def test_lower_than_every_verdict(values, sd, verdict):
    c = cl.lower_than("lower training loss than (1)", values, "(1)", sd=sd, sd_source="x")
    assert c.verdict == verdict
    assert ("no spread measured" in c.evidence) == (sd is None)


def test_lower_than_without_the_reference_is_not_testable():
    assert cl.lower_than("c", {"(2)": 1.0}, "(1)").verdict == "not testable"


def test_engineering_targets_table_is_shared():
    t = cl.engineering_targets([{"target": "TEIR costs at most 1.05× CLL-CLIP's training time", "ratio": 1.02,
                                 "slowest": 1.08, "goal": 1.05, "source": "bench"}])
    assert t.loc["TEIR costs at most 1.05× CLL-CLIP's training time", "result"] == "met by the median only"


def test_ledger_cell_runs_on_fake_runs_and_keeps_the_cost_target_out(tmp_path):
    from vlcp.report.claims import claims_frame, write_claims

    nb = json.loads((Path(__file__).parents[1] / "notebooks" / "cllclip_teir.ipynb").read_text())
    code = "".join(next(c for c in nb["cells"] if c.get("id") == "fed0ab5d")["source"])
    methods = ["clip", "er"]
    runs = {f"cll36-{m}{t}": run([60.0 if t else 50.0] * 3, before=[65.0 if t else 70.0] * 2 + [60.0 if t else 50.0])
            for m in methods for t in ("", "-teir")}
    abl = {"(1) CLL-CLIP": "cll-clip", "(2) init": "cll-abl-init", "(3) grad": "cll-abl-grad", "(4) decay": "cll-abl-decay",
           "(5) grad + decay": "cll-abl-graddecay", "(6) = (1) + TEIR": "cll-clip-teir", "(7) TEIR + oracle vocab": "cll-abl-oracle"}
    for i, e in enumerate([*abl.values(), "cll-fullmodel", "cll-only-cm", "cll-only-cl"]):
        runs[e] = run([40.0 + i] * 3, before=[60.0, 60.0, 40.0 + i], loss=2.0 - i / 10)
    ns = {"report": True, "runs": runs, "methods": methods, "n_test": 200, "abl": abl, "cl": cl, "pd": pd, "Path": Path,
          "paper_table": paper_table, "claims_frame": claims_frame, "write_claims": write_claims,
          "reports_dir": str(tmp_path), "display": lambda *a, **k: None, "Markdown": str}
    exec(code, ns)
    texts = [c.claim for c in ns["claims"]]
    assert "TEIR improves AR and F of every method" in texts
    assert ns["claims"][0].verdict == "confirmed"
    assert not any("1.05" in t or "training time" in t for t in texts)
    assert any("both objectives" in t for t in texts) and any("Fisher" in t for t in texts)
    assert json.loads((tmp_path / "cllclip_teir_claims.json").read_text())["claims"][0]["claim"] == texts[0]
