"""Each report stage of dvc.yaml and long/dvc.yaml depends on the report modules its notebook
runs (the notebook's imports, `vlcp report render` and `vlcp report metrics`, and all they import
inside vlcp/report) and on its own study's folder, not on the whole of vlcp/report: so an edit to
one study's module or claims re-renders that study's reports only."""
import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from test_layers import ROOT, imports, modules

REPORT = "vlcp.report"
CLI_PATH = ("vlcp.report.render", "vlcp.report.metrics")   # what `vlcp report render/metrics` import


def notebook_imports(notebook: Path) -> set[str]:
    """The vlcp names a notebook's code cells import (magics and shell lines left out)."""
    out = set()
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name.startswith("vlcp")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vlcp"):
                out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def report_files(starts) -> set[str]:
    """The files under vlcp/report that importing `starts` runs: every module reached through its
    imports (a package's __init__ importing its own submodules too) and their parent packages."""
    known = modules()

    def resolve(name):
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    seen, todo = set(), [m for m in map(resolve, starts) if m]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [t for base, name, _ in imports(known[m], m, known) if (t := resolve(f"{base}.{name}" if name else base))]
    return {str(known[m].relative_to(ROOT)) for m in seen if m == REPORT or m.startswith(REPORT + ".")}


def study_folder(notebook: str) -> str | None:
    """The study folder of the registered study whose report this notebook renders."""
    for f in sorted((ROOT / "vlcp/report/studies").glob("*/study.yaml")):
        if yaml.safe_load(f.read_text()).get("notebook") == notebook:
            return str(f.parent.relative_to(ROOT))
    return None


def report_stages():
    for dvc in ("dvc.yaml", "long/dvc.yaml"):
        for name, stage in yaml.safe_load((ROOT / dvc).read_text())["stages"].items():
            m = re.search(r"vlcp report render notebooks/(\w+)\.ipynb", str(stage.get("cmd", "")))
            if m:
                yield f"{dvc}:{name}", m.group(1), [str(d) for d in stage.get("deps", [])]


def needed(notebook: str) -> set[str]:
    own = study_folder(notebook)
    return report_files(notebook_imports(ROOT / "notebooks" / f"{notebook}.ipynb") | set(CLI_PATH)) | ({own} if own else set())


def covered(path: str, deps: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)


STAGES = list(report_stages())


def test_the_report_stages_are_found():
    assert len(STAGES) >= 10, [s for s, _, _ in STAGES]


@pytest.mark.parametrize("stage, notebook, deps", STAGES, ids=[s for s, _, _ in STAGES])
def test_a_report_stage_depends_on_what_its_notebook_runs(stage, notebook, deps):
    missing = sorted(p for p in needed(notebook) if not covered(p, deps))
    assert not missing, f"{stage}: add to its deps: {', '.join(missing)}"
    assert "vlcp/report" not in deps, f"{stage}: depends on the whole of vlcp/report, not on what its notebook runs"
    if study_folder(notebook):
        assert "vlcp/report/studies" not in deps, f"{stage}: depends on every study's folder, not its own"
    gone = [d for d in deps if d.startswith("vlcp/") and not (ROOT / d).exists()]
    assert not gone, f"{stage}: depends on files that no longer exist: {', '.join(gone)}"
