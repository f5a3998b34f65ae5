"""Execute a parameterised notebook with papermill and convert it to HTML, atomically."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from vlcp.errors import VlcpError
from vlcp.utils import atomic_path


def render_notebook(notebook: str | Path, reports_dir: str | Path = "reports",
                    parameters: dict | None = None, cwd: str | Path = ".", name: str | None = None) -> tuple[Path, Path]:
    """reports/<name>.ipynb (executed) and reports/<name>.html (code hidden); both or neither.
    `name`: the outputs' name (default: the notebook's)."""
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    notebook = Path(notebook)
    if not notebook.exists():
        raise VlcpError(f"{notebook}: notebook not found")
    reports = Path(reports_dir)
    stem = name or notebook.stem
    out_nb, out_html = reports / f"{stem}.ipynb", reports / f"{stem}.html"
    # the kernel inherits our environment: an MPLBACKEND=Agg there would silently drop every figure
    with _environ(MPLBACKEND="module://matplotlib_inline.backend_inline"), \
            atomic_path(out_nb) as tmp_nb, atomic_path(out_html) as tmp_html:
        papermill.execute_notebook(str(notebook), str(tmp_nb), parameters=parameters or {},
                                   cwd=str(cwd), progress_bar=False, kernel_name="python3")
        exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
        executed = nbformat.read(tmp_nb, as_version=4)
        body, _ = exporter.from_notebook_node(executed, resources={"metadata": {"name": title(executed, stem)}})
        tmp_html.write_text(body, encoding="utf-8")
    return out_nb, out_html


def title(nb, default: str) -> str:
    """A report's HTML title: its notebook's first level-1 heading (its study), else `default`."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return default


@contextlib.contextmanager
def _environ(**values: str):
    """Set environment variables for the duration of the block, then restore them."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
