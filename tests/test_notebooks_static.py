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


@pytest.mark.parametrize("notebook", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_every_vlcp_module_attribute_a_notebook_reads_exists(notebook):
    """`fm.teach_runs` after a rename fails here, not in the render: every `<module>.<name>` a cell reads,
    for the vlcp modules the notebook imports (`from vlcp.report import fomo as fm`, `... import ctp`)."""
    import ast
    import importlib

    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    trees = [ast.parse("\n".join(l for l in "".join(c["source"]).splitlines() if not l.lstrip().startswith(("%", "!"))))
             for c in nb["cells"] if c["cell_type"] == "code"]
    modules = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vlcp"):
                for a in node.names:
                    try:
                        modules[a.asname or a.name] = importlib.import_module(f"{node.module}.{a.name}")
                    except ModuleNotFoundError:   # a function or class, not a submodule
                        pass
    missing = sorted({f"{n.value.id}.{n.attr}" for tree in trees for n in ast.walk(tree)
                      if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
                      and not hasattr(modules[n.value.id], n.attr)})
    assert not missing, f"{notebook} reads attributes its vlcp modules lack: {missing}"


@pytest.mark.parametrize("pipeline", ["dvc.yaml", "long/dvc.yaml"])
def test_a_report_stage_depends_on_the_power_levers_its_notebook_shows(pipeline):
    """A notebook that shows the measured power levers (`power.lever_rows()`) renders again when
    `benchmarks/power_levers.py` records a row: its stage lists that file among its deps."""
    import yaml

    from vlcp.report.power import LEVERS_FILE

    stages = yaml.safe_load((ROOT / pipeline).read_text())["stages"]
    rendering = {name: s for name, s in stages.items() if "report render notebooks/" in str(s.get("cmd", ""))}
    assert rendering, pipeline
    for name, stage in rendering.items():
        notebook = str(stage["cmd"]).split("report render ")[1].split()[0]
        shows = "lever_rows()" in (ROOT / notebook).read_text()
        assert (LEVERS_FILE in stage.get("deps", [])) == shows, f"{pipeline}: {name} ({notebook})"


def test_each_ledger_names_its_report_by_a_title_not_its_file():
    """`reports/index.html` lists each ledger under the name its notebook gives its claims file: a title a
    reader knows ("IncCLIP", "CTP (ICCV'23)"), the same kind for every report, never the file's stem."""
    import re

    names = {}
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        src = "".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"])
        for stem, name in re.findall(r'write_(?:claims|json)\([^,]*"(\w+)_claims\.json", (?:ledger_json\()?"([^"]+)"', src):
            names[stem] = name
    from vlcp.report.study import load_study, registered

    for s in registered():   # a ledger on the report engine: its title is its study's (study.yaml)
        names[load_study(s).notebook] = load_study(s).title
    assert len(names) >= 6, names
    assert all(name != stem and "_" not in name for stem, name in names.items()), names
    assert len(set(names.values())) == len(names), names
