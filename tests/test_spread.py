"""The seed spread (vlcp/report/stats.py) on hand-computed cases, and how every ledger reaches a
reader: the index's verdict counts and the ledger table's colours."""
import math

import numpy as np
import pytest


def test_index_counts_every_verdict_and_shows_the_interval(tmp_path):
    from vlcp.report.index import write_index
    from vlcp.report.ledger import Row, ledger_json
    from vlcp.report.power import StudyPower
    from vlcp.utils import write_json

    power = StudyPower("Rm", headroom=6.0, sigma_d=0.5, tasks_teaching=6, tasks=9, seeds=3)
    write_json(tmp_path / "a_claims.json", ledger_json("Paper A", [
        Row("a", "confirmed", "greater", 4.03, 3.6, 4.5, 3, claim="a > b", source="§5.2"),
        Row("t", "not testable", "not testable", claim="1.18x", source="Table 1")], power.to_dict()))
    write_json(tmp_path / "b_claims.json", ledger_json("Paper B", [Row("c", "refuted", "target", claim="c")]))
    (tmp_path / "a.html").write_text("<html></html>")
    page = write_index(tmp_path).read_text()
    assert ("<tr><td>Paper A</td><td>1</td><td>0</td><td>0</td><td>0</td><td>0</td><td>1</td><td>2</td>"
            "<td>12.0</td><td>6/9</td><td>3</td></tr>") in page
    assert ("<tr><td>Paper B</td><td>0</td><td>1</td><td>0</td><td>0</td><td>0</td><td>0</td><td>1</td>"
            "<td></td><td></td><td></td></tr>") in page
    assert "+4.03 [+3.60, +4.50]" in page and "§5.2" in page and "not testable" in page
    assert "href='a.html'" in page and "class=\"sortable\"" in page


def test_seed_spread_pools_by_degrees_of_freedom_and_skips_single_seeds():
    from vlcp.report.stats import seed_spread
    sp = seed_spread({"AR": {"a": [1.0, 3.0], "b": [0.0, 2.0, 4.0], "c": [5.0]}, "F": {"a": [1.0]}}, "a, b, c")
    m = sp["metrics"]["AR"]
    # variances 2 (1 dof) and 4 (2 dof): pooled = sqrt((1*2 + 2*4) / 3)
    assert m["dof"] == 3 and m["pooled_std"] == pytest.approx(math.sqrt(10 / 3))
    assert m["difference_spread"] == pytest.approx(math.sqrt(2) * math.sqrt(10 / 3))
    assert set(m["std_per_experiment"]) == {"a", "b"} and "F" not in sp["metrics"] and "a, b, c" in sp["source"]


def test_block_spread_pools_the_residual_of_experiment_plus_seed_and_drops_the_shared_seed_effect():
    from vlcp.report.stats import block_spread, seed_spread
    y = {"a": [11.0, 0.0, 5.0], "b": [13.0, 6.0, 9.0]}   # two experiments at three seeds
    sp = block_spread(y)
    resid = np.array(y["a"]) - np.array(y["b"])           # with two experiments: half the paired difference's deviations
    assert sp["dof"] == 2 and sp["experiments"] == 2 and sp["seeds"] == 3
    assert sp["difference_spread"] == pytest.approx(resid.std(ddof=1))   # √2 σ = the sd of the paired differences
    # the same as a least-squares fit with experiment and seed dummies (an independent reference)
    rng = np.random.default_rng(0)
    vals = {e: list(rng.normal(size=4) + 10 * np.arange(4) + k) for k, e in enumerate("abcde")}   # a big shared seed effect
    x = np.array([[float(i == k) for k in range(5)] + [float(j == s) for s in range(1, 4)] for i in range(5) for j in range(4)])
    target = np.concatenate(list(vals.values()))
    rss = ((target - x @ np.linalg.lstsq(x, target, rcond=None)[0]) ** 2).sum()
    got = block_spread(vals)
    assert got["dof"] == 12 and got["residual_std"] == pytest.approx(math.sqrt(rss / 12))
    # seed_spread counts the shared seed effect (10 a seed) as noise; the blocks do not
    assert seed_spread({"m": vals}, "a-e")["metrics"]["m"]["pooled_std"] > 5 * got["residual_std"]
    with pytest.raises(ValueError, match="a: 3, b: 2"):
        block_spread({"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0]})
    with pytest.raises(ValueError, match="≥ 2 experiments"):
        block_spread({"a": [1.0, 2.0]})


def test_ledger_style_colours_each_verdict_and_hides_the_index():
    from vlcp.report.ledger import Row, ledger_frame, ledger_style

    html = ledger_style(ledger_frame([Row("a", "confirmed"), Row("b", "refuted"), Row("c", "underpowered")])).to_html()
    assert "color:#1a7f37" in html.replace(" ", "") and "color:#cf222e" in html.replace(" ", "")
    assert "color:#6e7781" in html.replace(" ", "") and 'class="row_heading' not in html
