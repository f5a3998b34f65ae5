"""Every notebook, read without running it: each code cell parses and each cell has an id."""
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize("notebook", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_every_notebook_code_cell_parses(notebook):
    """A syntax error in a cell fails here, not minutes into a study's render (compiled, not only
    parsed: the compiler's own errors, e.g. a walrus in a comprehension's iterable, pass ast.parse);
    every cell has an id (nbformat 4.5: a missing one is a warning on every render, and a future error)."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    assert all("id" in c for c in nb["cells"]), f"{notebook}: a cell without an id"
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "code":
            src = "".join(c["source"])
            compile("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))), f"{notebook} cell {i}", "exec")
