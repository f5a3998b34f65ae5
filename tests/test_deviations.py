"""The deviations tables (vlcp/report/deviations.py): every stated paper setting is the `paper`
profile's resolved value, and each study's table lists what the default profile changes."""
import copy

import pytest

from vlcp.config import load_params
from vlcp.report.deviations import DEVIATIONS, KINDS, PAPER_VALUES, STUDIES, deviations_table, paper_value_rows


@pytest.fixture(scope="module")
def params():
    return load_params("params.yaml")


@pytest.mark.parametrize("study", STUDIES)
def test_paper_profile_is_the_papers_setting(params, study):
    paper = copy.deepcopy(params)
    paper["profile"] = "paper"
    rows = paper_value_rows(paper, study)
    assert len(rows) == len(PAPER_VALUES[study])
    off = [(r["what"], r["paper"], r["ours"]) for r, pv in zip(rows, PAPER_VALUES[study])
           if not r["matches"] and not pv.at_paper_scale]
    assert not off, f"the paper profile differs from the paper: {off}"


@pytest.mark.parametrize("study", STUDIES)
def test_deviations_table_lists_every_entry(params, study):
    table = deviations_table(params, study)
    assert list(table.columns) == ["kind", "what", "paper", "ours", "why", "rows", "source"]
    assert set(table["kind"]) <= set(KINDS)
    assert len(table) >= len(DEVIATIONS[study])
    assert table["why"].str.len().gt(0).all(), "every deviation says why"
    assert table["rows"].str.len().gt(0).all(), "every deviation says which rows it touches"


def test_unknown_study_is_an_error(params):
    from vlcp.errors import VlcpError
    with pytest.raises(VlcpError, match="unknown study"):
        deviations_table(params, "nope")
