"""A report's first section: what its study found, written from its own claims file, and moved under
the title when the report renders."""
import html
import json
import re
from pathlib import Path

import nbformat
import pytest

from vlcp.report.findings import findings, lead_with_findings

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ("overview", "ctp_tables", "incclip_ablations", "cllclip_teir", "fomo_figures", "performance", "leaderboard")


def row(claim, verdict, effect=1.0, low=0.5, high=1.5, seeds=5, scaled=1.0, to_decide=None, paper=None):
    return {"claim": claim, "verdict": verdict, "effect": effect, "low": low, "high": high, "seeds": seeds,
            "scaled_effect": scaled, "seeds_to_decide": to_decide, "paper": paper}


CLAIMS = {"report": "a study", "power": {"headroom_over_noise": 11.34, "tasks_teaching": 8.0, "tasks": 9.0},
          "claims": [row("A beats B", "confirmed", 2.345, 0.91, 3.78, paper="A beats B by 3 points"),
                     row("C beats B", "refuted", -0.42, -1.1, 0.2),
                     row("D beats B", "underpowered", 0.3, -0.9, 1.5, 3, to_decide=27.4),
                     row("E beats B", "underpowered", 0.1, -0.5, 0.7, 3, to_decide=82),
                     row("F beats B", "not expressible here", 0.2, -1.0, 1.4, 3, scaled=None),
                     row("G is cheaper", "not testable", None, None, None, 0, scaled=None)]}


def test_the_findings_quote_the_claims_files_own_numbers():
    text = findings(CLAIMS)
    assert text.startswith("**At this scale, 6 claims**: 2 underpowered, 1 confirmed, 1 refuted, 1 not expressible "
                           "here, 1 not testable.")
    assert "The paper: A beats B by 3 points. Ours: A beats B: +2.3 [+0.9, +3.8] over 5 seeds, **confirmed**." in text
    assert "- **refuted**: C beats B (-0.4 [-1.1, +0.2] over 5 seeds)" in text
    assert "2 claims underpowered; the closest to deciding: D beats B (about 27 seeds per arm; ran 3); E beats B " \
           "(about 82 seeds per arm; ran 3)" in text
    assert "**Not expressible here**: 1 claim whose effect" in text and "F beats B" not in text.split("closest")[1]
    assert "11.3 × the noise" in text and "8 of 9 tasks teach" in text
    assert "nan" not in text and "None" not in text
    assert "<details><summary>The terms of these reports</summary>" in text and "**MDE**" in text   # the shared box


def test_no_claims_and_no_power_read_plainly():
    assert findings({"report": "r", "claims": []}) == "**r**: no claim was judged on these runs."
    assert findings({"report": "r", "claims": [row("A", "confirmed")]}).startswith("**At this scale, 1 claim**: ")
    text = findings({"report": "r", "claims": [row("A", "underpowered", to_decide=None)]})
    assert "1 claim underpowered. What would decide" in text and "headroom is" not in text


def test_the_findings_cell_moves_under_the_title():
    cells = [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("a = 1"),
             nbformat.v4.new_code_cell("a = 1", metadata={"tags": ["findings"]}), nbformat.v4.new_code_cell("b")]
    moved = lead_with_findings(cells)
    assert [c.source for c in moved] == ["# T", "a = 1", "a = 1", "b"]
    assert [bool(c.metadata.get("tags")) for c in moved] == [False, True, False, False]


@pytest.mark.parametrize("name", REPORTS)
def test_every_report_notebook_has_one_findings_cell(name):
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    tagged = [c for c in cells if "findings" in c["metadata"].get("tags", [])]
    source = "".join(tagged[0]["source"]) if len(tagged) == 1 else ""
    assert "findings_section(" in source or "reading(" in source, name


LEDGER_TABLE = re.compile(r'<table[^>]*class="vlcp-ledger"[^>]*>(.*?)</table>', re.S)
UNROUNDED = re.compile(r"(?<![\w.])[+-]?\d+\.\d{3,}(?![\w.])")     # a float with three or more decimals
COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
SOURCE = re.compile(r"(Table|Fig|§|supp\.|our check)")


def ledger_cells(page: str) -> list[tuple[str, str]]:
    """(column, text) of every cell of every ledger table of a rendered report (details expanded)."""
    out = []
    for table in LEDGER_TABLE.findall(page):
        head = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*col_heading[^>]*>(.*?)</th>", table, re.S)]
        for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S):
            cells = [html.unescape(re.sub(r"<[^>]+>", " ", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            out += list(zip(head, cells)) if len(cells) == len(head) else []
    return out


def readable_ledger_problems(page: str) -> list[str]:
    """What a reader should not meet in a ledger cell: nan, an unrounded float, a commit hash, a source
    that is not a paper's table, figure or section or our check."""
    bad = []
    for col, text in ledger_cells(page):
        if text.lower() == "nan" or " nan" in f" {text.lower()}":
            bad.append(f"{col}: nan")
        if col not in ("claim", "needs") and UNROUNDED.search(text):
            bad.append(f"{col}: unrounded {text!r}")
        if COMMIT.search(text):
            bad.append(f"{col}: a commit hash in {text[:80]!r}")
        if col == "source" and not SOURCE.search(text):
            bad.append(f"source {text!r}")
    return bad


def test_a_ledger_renders_for_reading():
    from vlcp.report.ledger import Row, ledger_frame, ledger_style
    rows = [Row("a", "confirmed", "greater", 2.345678, 0.91234, 3.7812, 5, scaled_effect=1.23456, sigma_d=0.4567,
                mde=1.98765, seeds_to_decide=27.4, claim="A beats B", source="Table 2",
                needs="a headroom these runs resolve (H = jointt − seqf on final_rm, measured on these runs: H 5.19)"),
            Row("b", "underpowered", "greater", claim="C beats B", source="our check")]
    page = ledger_style(ledger_frame(rows), "Calibrated headrooms: measured at seeds 10-14.").to_html()
    assert 'class="vlcp-ledger"' in page and "+2.35" in page and "+0.91" in page and "27" in page
    assert "2.345678" not in page and "nan" not in page and "—" in page
    assert "<details><summary>a headroom these runs resolve…</summary>" in page
    assert "Calibrated headrooms: measured at seeds 10-14." in page and "caption-side: bottom" in page
    assert readable_ledger_problems(page) == []
    assert readable_ledger_problems(page.replace("Table 2", "spine issue 4dff31b")) == [
        "source: a commit hash in 'spine issue 4dff31b'", "source 'spine issue 4dff31b'"]
