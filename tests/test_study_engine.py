"""The report engine over data: a study's claims file read (one-line errors), its rows judged on
runs of one shape ({experiment: {seed: results}}), and a toy study added the documented way
(docs/architecture.md, "Add a study")."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from vlcp.errors import VlcpError
from vlcp.report.ledger import evaluate, ledger_frame, ledger_json
from vlcp.report.results import MEASURES
from vlcp.report.study import load_runs, load_study, parse_claims, registered


def group_run(seed: int, final: float, drop: float, forget: float, tasks: int = 3) -> dict:
    """A group stream's results, reduced to what the spine's measures read."""
    m = np.full((tasks, tasks), 30.0)
    m[0, 0], m[-1, 0] = 30.0 + forget, 30.0 + forget - drop
    return {"seed": seed, "cumulative": [{"test": {"Rm": final}}], "matrix": {"unseen_style": {"Rm": m.tolist()}},
            "zero_shot": {"unseen_style": {"Rm": [10.0] * tasks}}, "config": {}}


def spine_runs(rng, gaps=(6.0, 6.0), seeds=range(5), noise=0.5) -> dict:
    runs = {"seqf": {}, "er": {}, "jointt": {}}
    for s in seeds:
        base = 20 + rng.normal()
        runs["seqf"][s] = group_run(s, base + rng.normal(0, noise), 10 + rng.normal(0, noise), 12 + rng.normal(0, noise))
        runs["er"][s] = group_run(s, base + gaps[1] + rng.normal(0, noise), 4 + rng.normal(0, noise), 5 + rng.normal(0, noise))
        runs["jointt"][s] = group_run(s, base + sum(gaps) + rng.normal(0, noise), 1 + rng.normal(0, noise),
                                      1 + rng.normal(0, noise))
    return runs


def test_the_spine_is_registered_and_reads():
    spine = load_study("overview")
    assert "overview" in registered() and spine.claims_file == "overview_claims.json"
    assert [r.id for r in spine.claims.rows] == ["order", "seqf-forgets", "er-forgets-less"]
    assert spine.claims.scales["forgetting"].lower == "jointt"   # SeqF's forgetting above JointT's (defect 3)


def test_the_spine_confirms_a_clear_order_and_refutes_a_missing_step():
    rng = np.random.default_rng(0)
    spine = load_study("overview")
    rows = {r.claim_id: r for r in evaluate(spine, spine_runs(rng), MEASURES, calibrated=False)}
    assert {r.verdict for r in rows.values()} == {"confirmed"}
    flat = {r.claim_id: r for r in evaluate(spine, spine_runs(rng, gaps=(12.0, 0.0)), MEASURES, calibrated=False)}
    assert flat["order"].verdict == "refuted"            # ER − SeqF ≈ 0 against a scaled +6
    assert flat["order"].comparisons[1]["label"] == "ER − SeqF"


def test_a_calibrated_headroom_must_clear_the_noise_of_its_own_pair():
    """Defect 1: a calibrated H is checked against 2 σ_d of its pair on these runs, as a measured one is."""
    rng = np.random.default_rng(1)
    spine = load_study("overview")
    noisy = spine_runs(rng, noise=30.0)
    row = next(r for r in evaluate(spine, noisy, MEASURES, calibrated=True) if r.claim_id == "order")
    assert row.verdict == "underpowered" and row.scaled_effect is None and "within 2 σ_d" in " ".join(row.notes)


def test_a_missing_experiment_makes_its_rows_not_testable():
    rng = np.random.default_rng(2)
    runs = spine_runs(rng)
    del runs["er"]
    rows = {r.claim_id: r for r in evaluate(load_study("overview"), runs, MEASURES, calibrated=False)}
    assert rows["order"].verdict == rows["er-forgets-less"].verdict == "not testable"
    assert "no runs of er" in rows["order"].notes[0] and rows["seqf-forgets"].verdict != "not testable"


def test_the_ledger_file_holds_what_the_index_reads(tmp_path):
    rows = evaluate(load_study("overview"), spine_runs(np.random.default_rng(3)), MEASURES, calibrated=False)
    data = json.loads(json.dumps(ledger_json("the spine", rows)))
    c = data["claims"][0]
    assert {"claim", "source", "verdict", "effect", "low", "high", "seeds", "evidence"} <= set(c)
    assert c["evidence"].startswith("JointT − ER +") and len(ledger_frame(rows)) == 3


def test_runs_load_in_one_shape(tmp_path):
    for e, s in (("seqf", 0), ("seqf", 2), ("er", 0)):
        d = tmp_path / e / f"seed{s}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({"experiment": e, "seed": s}))
    runs = load_runs(tmp_path, ["seqf", "er", "jointt"], [0, 1, 2])
    assert {e: sorted(v) for e, v in runs.items()} == {"seqf": [0, 2], "er": [0]}


@pytest.mark.parametrize("text, says", [
    ("claims: 3", "expected a mapping with a `claims:` list"),
    ("claims: [{claim: x, kind: greater}]", "claims[0]: `id` is missing"),
    ("claims: [{id: a, claim: x, kind: greater}, {id: a, claim: y, kind: greater}]", "claim a: the id is used twice"),
    ("claims: [{id: a, claim: x, kind: greater, scale: h}]", "claim a: scale 'h' is not among `scales:`"),
    ("claims: [{id: a, claim: x, kind: greater, comparisons: [{a: e, effect: big}]}]",
     "claim a: comparisons[0]: effect: expected a number"),
    ("scales: {h: {upper: a, measure: m, paper_headroom: 0}}\nclaims: []", "scales.h: `paper_headroom` must be > 0"),
    ("scales: {h: {upper: a, measure: m, top: 1}}\nclaims: []", "scales.h: unknown field(s) top"),
    ("depth: 0\nclaims: []", "`depth` must be an integer ≥ 1"),
])
def test_a_malformed_claims_file_is_one_line_naming_the_row_and_field(text, says):
    import yaml

    with pytest.raises(VlcpError, match="^x/claims.yaml: ") as e:
        parse_claims(yaml.safe_load(text), "x/claims.yaml")
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_toy_study_added_the_documented_way(tmp_path, monkeypatch):
    """docs/architecture.md, "Add a study": a folder with study.yaml and claims.yaml, and a module
    with its own measure and claim kind; the engine judges it without a change of its own."""
    root = tmp_path / "studies"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "study.yaml").write_text("title: a toy study\nnotebook: toy\nmodule: toy_study\n")
    (root / "toy" / "claims.yaml").write_text(textwrap.dedent("""\
        depth: 3
        scales:
          room: {upper: big, lower: small, measure: score, paper_headroom: 10}
        claims:
          - {id: bigger, claim: big beats small, kind: greater, measure: score, scale: room,
             comparisons: [{a: big, b: small, effect: 5}]}
          - {id: same, claim: big and twin are alike, kind: equivalent, measure: score, scale: room,
             comparisons: [{a: big, b: twin, effect: 2}]}
          - {id: odd, claim: an own kind, kind: parity, measure: score}
          - {id: nope, claim: needs a GPU farm, kind: not testable, why: "10,000 GPU hours"}
        """))
    (tmp_path / "toy_study.py").write_text(textwrap.dedent("""\
        from vlcp.report.ledger import Row

        MEASURES = {"score": lambda r: r["score"]}
        KINDS = {"parity": lambda spec, runs, ctx: Row(spec.id, "inconclusive", "parity", notes=[str(len(runs))])}
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = load_study("toy", root=root)
    assert registered(root) == ("toy",)
    rng = np.random.default_rng(4)
    runs = {e: {s: {"score": mu + rng.normal(0, 0.3)} for s in range(4)} for e, mu in
            (("big", 10.0), ("small", 0.0), ("twin", 10.0))}
    rows = {r.claim_id: r for r in evaluate(toy, runs, {})}
    assert rows["bigger"].verdict == "confirmed" and rows["bigger"].scaled_effect == pytest.approx(
        0.5 * np.mean([runs["big"][s]["score"] - runs["small"][s]["score"] for s in range(4)]))
    assert rows["same"].verdict == "confirmed"
    assert rows["odd"].verdict == "inconclusive" and rows["odd"].claim == "an own kind"
    assert rows["nope"].verdict == "not testable" and rows["nope"].notes == ["10,000 GPU hours"]


def test_a_study_without_a_claims_file_has_no_ledger(tmp_path):
    """A study that ranks rather than claims (the leaderboard): study.yaml alone, no ledger to judge or count."""
    (tmp_path / "board").mkdir()
    (tmp_path / "board" / "study.yaml").write_text("title: a board\nnotebook: board\n")
    board = load_study("board", root=tmp_path)
    assert registered(tmp_path) == ("board",) and board.claims is None
    assert board.metric_sources({"report": {}, "seeds": [0]}) == {"runs": "runs", "claims": None, "experiments": None,
                                                                  "seeds": [0]}
    with pytest.raises(ValueError, match="no claims file"):
        evaluate(board, {}, MEASURES)


def test_a_paper_effect_is_a_number_a_table_cell_or_a_difference_of_two():
    from vlcp.report.study import paper_number

    er = {"table": "incclip_table1", "row": {"steps": "4", "method": "er"}, "column": "Average"}
    joint = {"table": "incclip_table1", "row": {"steps": "joint"}, "column": "Average"}
    assert paper_number("x", 0.5) == 0.5 and paper_number("x", er) == 16.29
    assert paper_number("x", {"a": joint, "b": er}) == pytest.approx(32.61 - 16.29)
    with pytest.raises(VlcpError, match="^f.yaml: claim c: table incclip_table1 has no column 'Avg'"):
        paper_number("f.yaml: claim c", {**er, "column": "Avg"})


def test_single_run_rows_read_the_named_floor_and_a_seed_subset():
    """A row whose arms ran one seed reads the noise floor it names; `seeds:` keeps those seeds only."""
    from vlcp.report.ledger import Context, KINDS, Scale
    from vlcp.report.stats import Noise
    from vlcp.report.study import ClaimSpec, ComparisonSpec

    runs = {"a": {0: {"v": 5.0}, 1: {"v": 9.0}}, "b": {0: {"v": 1.0}}}
    spec = ClaimSpec("x", "a > b", "greater", measure="v", scale="h", comparisons=(ComparisonSpec("a", "b", 1.0, "a − b"),),
                     options={"floor": "v", "seeds": [0]})
    ctx = Context({"v": lambda r: r["v"]}, {"h": Scale(1.0, 2.0)}, 2, {"v": Noise(1.0, 10, "a subset")})
    row = KINDS["greater"](spec, runs, ctx)
    assert row.effect == 4.0 and "floor sd 1.00 (a subset)" in row.comparisons[0]["how"]
    assert row.verdict == "underpowered" and "exploratory (below 2 seeds)" in row.notes[0]   # MDE ≈ 3.1 > scaled 2
    bare = KINDS["greater"](ClaimSpec("x", "a > b", "greater", measure="v", scale="h", comparisons=spec.comparisons,
                                      options={"floor": "w"}), runs, ctx)
    assert bare.verdict == "not testable" and "no noise floor 'w'" in bare.notes[0]


def test_a_paper_effect_may_be_the_mean_of_a_rows_cells():
    """`{table, row, columns}`: the mean of those cells (e.g. a method's mean R@1 over four columns)."""
    from vlcp.report.study import paper_number

    cols = ["Flickr30K I2T R@1", "Flickr30K T2I R@1", "MSCOCO I2T R@1", "MSCOCO T2I R@1"]
    ref = {"table": "incclip_table2", "row": {"steps": "4", "method": "er"}, "columns": cols}
    assert paper_number("x", ref) == pytest.approx((17.5 + 11.18 + 9.6 + 6.41) / 4)
