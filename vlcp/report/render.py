"""Execute a parameterised notebook with papermill and convert it to HTML, atomically."""
from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

from vlcp.errors import VlcpError
from vlcp.report.findings import lead_with_findings
from vlcp.utils import atomic_path


def render_notebook(notebook: str | Path, reports_dir: str | Path = "reports", parameters: dict | None = None,
                    cwd: str | Path = ".", name: str | None = None) -> tuple[Path, Path]:
    """reports/<name>.ipynb (executed) and reports/<name>.html (code hidden); both or neither.
    `name`: the outputs' name (default: the notebook's). A cell that fails is a `VlcpError`
    (`failed_cell`) and leaves the executed notebook, traceback and all, as reports/<name>.failed.ipynb."""
    import nbformat
    import papermill
    from nbconvert import HTMLExporter
    from papermill.exceptions import PapermillExecutionError

    notebook = Path(notebook)
    if not notebook.exists():
        raise VlcpError(f"{notebook}: notebook not found")
    stem = name or notebook.stem
    out_nb, out_html, failed = (Path(reports_dir) / f"{stem}{ext}" for ext in (".ipynb", ".html", ".failed.ipynb"))
    # the kernel inherits our environment: an MPLBACKEND=Agg there would silently drop every figure
    with mock.patch.dict(os.environ, MPLBACKEND="module://matplotlib_inline.backend_inline"), \
            atomic_path(out_nb) as tmp_nb, atomic_path(out_html) as tmp_html:
        try:   # the kernel's own start-up log (a warning on every render) is left at errors
            papermill.execute_notebook(str(notebook), str(tmp_nb), parameters=parameters or {},
                                       cwd=str(cwd), progress_bar=False, kernel_name="python3",
                                       extra_arguments=["--IPKernelApp.log_level=ERROR"])
        except PapermillExecutionError as e:
            os.replace(tmp_nb, failed)     # papermill writes the notebook as far as it ran, then raises
            raise failed_cell(notebook, failed, nbformat.read(failed, as_version=4), e) from None
        exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
        executed = nbformat.read(tmp_nb, as_version=4)
        executed.cells = lead_with_findings(executed.cells)   # what the study found, first
        body, _ = exporter.from_notebook_node(executed, resources={"metadata": {"name": title(executed, stem)}})
        tmp_html.write_text(with_alt_text(body, figure_alts(executed)), encoding="utf-8")
    failed.unlink(missing_ok=True)      # an earlier failure's notebook: this render replaces it
    return out_nb, out_html


def failed_cell(notebook: Path, failed: Path, executed, e) -> VlcpError:
    """One line for papermill's error `e`: a `VlcpError` raised in the cell as its own message, anything
    else as its type and message; both with the cell (number, section, first line) and `failed`."""
    executed.cells = [c for c in executed.cells   # without papermill's banner
                      if "papermill-error-cell-tag" not in c.metadata.get("tags", [])]
    cell = executed.cells[e.cell_index] if 0 <= e.cell_index < len(executed.cells) else None
    heading = ([h.lstrip("#").strip() for h in _headings(executed.cells[:e.cell_index])] or [""])[-1]
    first = next((line.strip() for line in (cell.source if cell else "").splitlines() if line.strip()), "")
    details = ", ".join(x for x in (heading and f"section '{heading}'", first and f"`{_cut(first, 60)}`") if x)
    where = f"cell {e.cell_index + 1}" + (f" ({details})" if details else "")
    message = " ".join(str(e.evalue).split())
    if e.ename in _vlcp_errors():
        return VlcpError(f"{message} ({notebook}, {where}; the executed notebook with its traceback: {failed})")
    return VlcpError(f"{notebook}: {where} failed: {e.ename}: {_cut(message, 300)} (the executed notebook with "
                     f"its traceback: {failed})")


def _vlcp_errors(cls: type = VlcpError) -> set[str]:
    """The names of `VlcpError` and its subclasses (a notebook's kernel reports an error by name)."""
    import vlcp.train.checkpoint  # noqa: F401  (defines CheckpointError)

    return {cls.__name__}.union(*(_vlcp_errors(c) for c in cls.__subclasses__()))


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _headings(cells) -> list[str]:
    """The markdown heading lines of `cells`, in order."""
    return [line for c in cells if c.cell_type == "markdown"
            for line in c.source.splitlines() if line.startswith("#")]


def title(nb, default: str) -> str:
    """A report's HTML title: its notebook's first level-1 heading (its study), else `default`."""
    return next((h[2:].strip() for h in _headings(nb.cells) if h.startswith("# ")), default)


def figure_alts(nb) -> list[str]:
    """One alt text per PNG figure of the executed notebook, in order: "figure 2 of '<its section>'"."""
    alts, heading, k = [], "the report", 0
    for cell in nb.cells:
        if found := _headings([cell]):
            heading, k = found[-1].lstrip("#").strip(), 0
        for out in cell.get("outputs", []):
            if "image/png" in out.get("data", {}):
                k += 1
                alts.append(f"figure {k} of '{heading}'")
    return alts


def with_alt_text(body: str, alts: list[str]) -> str:
    """The HTML with each embedded PNG given its alt text, in order (nbconvert writes none, or the
    same "No description has been provided for this image" for every figure)."""
    import html
    import re

    left = iter(alts)

    def one(m: re.Match) -> str:
        alt = html.escape(next(left, "figure"), quote=True)
        return re.sub(r'\salt="[^"]*"', "", m.group(0)).replace("<img", f'<img alt="{alt}"', 1)

    return re.sub(r'<img\b[^>]*src="data:image/png;base64,', one, body)
