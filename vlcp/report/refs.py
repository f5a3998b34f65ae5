"""The papers' own numbers, as data: CSV files transcribed from `../shared/papers/` (each file's
first line names its table and source). Reports show them beside ours, always labelled."""
from __future__ import annotations

from importlib import resources

import pandas as pd

from vlcp.errors import VlcpError


def paper_table(name: str) -> pd.DataFrame:
    """One transcribed table, e.g. `paper_table("ctp_table1")`; the caption is in `.attrs["source"]`."""
    path = resources.files("vlcp.report") / "refs" / f"{name}.csv"
    if not path.is_file():
        known = sorted(p.name[:-4] for p in (resources.files("vlcp.report") / "refs").iterdir() if p.name.endswith(".csv"))
        raise VlcpError(f"paper table {name!r} not found (known: {', '.join(known)})")
    with path.open() as f:
        source = f.readline().lstrip("# ").strip()
        df = pd.read_csv(f)
    df.attrs["source"] = source
    return df
