"""The paper items a report renders only in part or not at all (each study's coverage.yaml): what
is missing, why and what would render it, shown in the paper's own notebook."""
from __future__ import annotations

from types import MappingProxyType
from typing import Iterable

import pandas as pd

from vlcp.report.paper import Gap, coverage, studies

__all__ = ["COLUMNS", "NA", "NOT_APPLICABLE", "NOT_RENDERED", "Gap", "not_rendered"]

COLUMNS = ("item", "rendered", "missing", "why", "what would render it")
NA = "does not apply"

NOT_RENDERED = MappingProxyType({s: coverage(s).not_rendered for s in studies()})
NOT_APPLICABLE = MappingProxyType({s: coverage(s).not_applicable for s in studies()})


def not_rendered(paper: str, have: Iterable[str] = ()) -> pd.DataFrame:
    """The paper's items rendered in part or not at all, then those that do not apply here; an item
    whose runs (`Gap.experiments`) are all in `have` (the runs the report loaded) is left out."""
    have = set(have)
    rows = [g[:5] for g in NOT_RENDERED.get(paper, ()) if not (g.experiments and set(g.experiments) <= have)]
    rows += [(item, NA, "all", why, "none") for item, why in NOT_APPLICABLE.get(paper, ())]
    return pd.DataFrame(rows, columns=list(COLUMNS))
