"""Tables, plots and claims ledgers as pure functions of `results.json` files."""
from __future__ import annotations

from pathlib import Path

MARKERS = ("params.yaml", "dvc.yaml")   # what makes a folder a vlcp project root


def project_root(start: str | Path | None = None) -> Path:
    """The first folder from `start` (default: the current directory) upwards that holds params.yaml and
    dvc.yaml, else the checkout above the installed `vlcp` package: the notebooks change to it, so their
    relative paths resolve wherever the kernel started."""
    here = Path(start if start is not None else Path.cwd()).resolve()
    checkout = Path(__file__).resolve().parents[2]   # vlcp/report/__init__.py -> the folder above vlcp/
    for folder in (here, *here.parents, checkout):
        if all((folder / m).is_file() for m in MARKERS):
            return folder
    from vlcp.errors import VlcpError

    raise VlcpError(f"no vlcp project root: neither {here} nor a folder above it holds both {' and '.join(MARKERS)}, "
                    f"nor does {checkout} (above the installed vlcp package); start the kernel inside a vlcp "
                    "checkout (e.g. `make lab` there)")


def tidy_tables() -> None:
    """In a notebook: show DataFrames indexed 0, 1, 2... (a RangeIndex) without that index."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import pandas as pd

    def html(df: pd.DataFrame) -> str:
        if isinstance(df.index, pd.RangeIndex) and not isinstance(df.columns, pd.MultiIndex):
            return df.style.hide(axis="index").format(precision=pd.get_option("display.precision")).to_html()
        return df._repr_html_()   # pandas' own

    shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, html)
