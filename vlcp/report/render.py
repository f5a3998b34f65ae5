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
        # the kernel's own start-up log (ipykernel warns that a local kernel talks over TCP without
        # encryption, on every render) is left at errors; the notebook's warnings are its cells' output
        papermill.execute_notebook(str(notebook), str(tmp_nb), parameters=parameters or {},
                                   cwd=str(cwd), progress_bar=False, kernel_name="python3",
                                   extra_arguments=["--IPKernelApp.log_level=ERROR"])
        exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
        executed = nbformat.read(tmp_nb, as_version=4)
        body, _ = exporter.from_notebook_node(executed, resources={"metadata": {"name": title(executed, stem)}})
        body = with_alt_text(body, figure_alts(executed))
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


def figure_alts(nb) -> list[str]:
    """One alt text per PNG figure of the executed notebook, in order: the heading of the section it
    is drawn in ("figure 2 of '6. Fig. 3: convergence'")."""
    alts, heading, k = [], "the report", 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    heading, k = line.lstrip("#").strip(), 0
        else:
            for out in cell.get("outputs", []):
                if "image/png" in out.get("data", {}):
                    k += 1
                    alts.append(f"figure {k} of '{heading}'")
    return alts


def with_alt_text(body: str, alts: list[str]) -> str:
    """The HTML with each embedded PNG given its alt text, in order (nbconvert writes none, or the
    same "No description has been provided for this image" for every figure)."""
    import html
    import itertools
    import re

    count = itertools.count()

    def one(m: re.Match) -> str:
        i = next(count)
        alt = html.escape(alts[i] if i < len(alts) else "figure", quote=True)
        tag = re.sub(r'\salt="[^"]*"', "", m.group(0))
        return tag.replace("<img", f'<img alt="{alt}"', 1)

    return re.sub(r'<img\b[^>]*src="data:image/png;base64,', one, body)


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
