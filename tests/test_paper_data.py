"""The paper-data loaders (vlcp/report/paper.py): each study's YAML and CSV files read into typed,
read-only values; a malformed file is one line naming the file, the entry and the field; the files
ship with the package."""
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest

from vlcp.errors import VlcpError
from vlcp.report import paper
from vlcp.report.deviations import DERIVATIONS, STUDIES

ROOT = Path(__file__).resolve().parents[1]


def write(root: Path, study: str, name: str, text: str) -> Path:
    (root / study).mkdir(parents=True, exist_ok=True)
    path = root / study / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def toy(tmp_path):
    """A study folder `toy` with one file of each kind."""
    write(tmp_path, "toy", "paper_values.yaml", """\
        - experiment: toy-a
          field: train.steps
          paper: 1000
          source: Toy §1
          rows: every table
          why: "scale: 10"
        - experiments: {toy-a: Table 1, toy-b: "Table 2: b row"}
          field: samples seen
          paper: 5.0e-4
          source: Toy §2
          derive: seen
          rel_tol: 0.01
        """)
    write(tmp_path, "toy", "deviations.yaml", """\
        - kind: data
          what: emoji instead of photos
          why: offline
          rows: every table
        """)
    write(tmp_path, "toy", "coverage.yaml", """\
        not_rendered:
          - item: Table 5
            rendered: "no"
            missing: all of it
            why: budget
            renders_it: the long profile
            experiments: [toy-long]
        not_applicable:
          - {item: Fig. 1, why: a diagram}
        """)
    write(tmp_path, "toy", "toy_table1.csv", "# Toy Table 1. Transcribed by hand.\nmethod,Rm,hours\nA,80.08,\nB,56.86,3.4\n")
    write(tmp_path, "toy", "paper.yaml", """\
        gap: {value: {Rm: 23.22}, source: Toy §5.2}
        hours: {value: {table: toy_table1, row: {method: B}, column: hours}, source: Toy Table 1}
        both: {value: {table: toy_table1, row: {method: A}, columns: [method, Rm]}, source: Toy Table 1}
        pair: {value: [2.4, 64.4], source: Toy §7}
        """)
    return tmp_path


def test_the_loaders_read_a_study_folder_into_typed_read_only_values(toy):
    pvs = paper.paper_values("toy", toy, derivations={"seen": None})
    assert [(p.experiment, p.field, p.rows) for p in pvs] == [
        ("toy-a", "train.steps", "every table"), ("toy-a", "samples seen", "Table 1"), ("toy-b", "samples seen", "Table 2: b row")]
    assert pvs[0].paper == 1000 and pvs[0].why == "scale: 10" and pvs[0].derive == ""
    assert pvs[2].paper == 5e-4 and pvs[2].derive == "seen" and pvs[2].rel_tol == 0.01 and pvs[2].source == "Toy §2"
    assert paper.deviations("toy", toy) == (paper.Deviation("data", "emoji instead of photos", "offline", "every table"),)
    cov = paper.coverage("toy", toy)
    assert cov.not_rendered == (paper.Gap("Table 5", "no", "all of it", "budget", "the long profile", ("toy-long",)),)
    assert cov.not_applicable == (("Fig. 1", "a diagram"),)
    data = paper.paper_data("toy", toy)
    assert dict(data) == {"gap": {"Rm": 23.22}, "hours": 3.4, "both": ("A", 80.08), "pair": (2.4, 64.4)}
    assert type(data["hours"]) is float                         # a table's cell as a Python number
    with pytest.raises(TypeError):
        data["gap"]["Rm"] = 0.0                                  # read-only
    assert paper.studies(toy) == ("toy",) and paper.tables(toy) == ("toy_table1",)
    t = paper.paper_table("toy_table1", toy)
    assert t.attrs["source"] == "Toy Table 1. Transcribed by hand." and list(t["method"]) == ["A", "B"]


def test_a_missing_file_lists_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    assert paper.paper_values("empty", tmp_path) == () and paper.deviations("empty", tmp_path) == ()
    assert paper.coverage("empty", tmp_path) == ((), ()) and dict(paper.paper_data("empty", tmp_path)) == {}


@pytest.mark.parametrize("name, text, message", [
    ("deviations.yaml", "- {kind: data, what: x, rows: r}\n", "deviations.yaml: entry 1: missing field 'why'"),
    ("deviations.yaml", "- {kind: data, what: x, why: y, rows: r}\n- {kind: taste, what: x, why: y, rows: r}\n",
     "deviations.yaml: entry 2: unknown kind 'taste' (known: scale, data, open choice, code vs text, original code, design)"),
    ("deviations.yaml", "- {kind: data, what: x, why: y, rows: r, note: z}\n", "entry 1: unknown field 'note' (fields: kind, "),
    ("deviations.yaml", "- {kind: data, what: x, why: 3, rows: r}\n", "entry 1: field 'why' must be text, got 3"),
    ("deviations.yaml", "kind: data\n", "deviations.yaml: expected a list of entries, got dict"),
    ("deviations.yaml", "- [unclosed\n", "deviations.yaml: not valid YAML"),
    ("paper_values.yaml", "- {experiment: e, field: f, paper: 1, source: s, rows: r, derive: steps_x_batch}\n",
     "paper_values.yaml: entry 1 (e f): unknown derivation 'steps_x_batch' (known: samples_seen, "),
    ("paper_values.yaml", "- {experiment: e, field: f, source: s, rows: r}\n", "paper_values.yaml: entry 1 (e f): missing field 'paper'"),
    ("paper_values.yaml", "- {experiments: {a: r1, b: r2}, field: f, paper: 1, source: s, rel_tol: tight}\n",
     "paper_values.yaml: entry 1 (a f): field 'rel_tol' must be a number, got 'tight'"),
    ("paper_values.yaml", "- {experiment: e, experiments: {a: r}, field: f, paper: 1, source: s}\n",
     "entry 1: give experiment and rows, or experiments, not both"),
    ("coverage.yaml", "not_rendered:\n  - {item: T, rendered: maybe, missing: m, why: w, renders_it: x}\n",
     "coverage.yaml: not_rendered entry 1: unknown rendered 'maybe' (known: no, in part)"),
    ("coverage.yaml", "not_rendered:\n  - {item: T, rendered: no, missing: m, why: w, renders_it: x}\n",
     "not_rendered entry 1: field 'rendered' must be text, got False"),      # YAML's bare `no` is a boolean
    ("coverage.yaml", "gaps: []\n", "coverage.yaml: top level: unknown section 'gaps' (known: not_rendered, not_applicable)"),
    ("paper.yaml", "gap: {value: 1.0}\n", "paper.yaml: gap: missing field 'source'"),
    ("paper.yaml", "h: {value: {table: toy_table1, row: {method: C}, column: Rm}, source: s}\n",
     "paper.yaml: h: row {'method': 'C'} matches 0 rows of table toy_table1, not one"),
    ("paper.yaml", "h: {value: {table: toy_table1, row: {method: A}, column: hours}, source: s}\n",
     "paper.yaml: h: table toy_table1's cell 'hours' at row {'method': 'A'} is empty"),
    ("paper.yaml", "h: {value: {table: toy_table1, row: {method: A}, column: TR@1}, source: s}\n",
     "paper.yaml: h: table toy_table1 has no column 'TR@1'"),
    ("paper.yaml", "h: {value: {table: toy_table1, row: {method: no}, column: Rm}, source: s}\n",
     "paper.yaml: h: field 'row' holds a boolean, {'method': False} (quote yes / no"),
    ("paper.yaml", "h: {value: {table: toy_table9, row: {method: A}, column: Rm}, source: s}\n",
     "paper.yaml: h: paper table 'toy_table9' not found (known: toy_table1)"),
])
def test_a_malformed_file_is_one_line_naming_the_file_and_entry(toy, name, text, message):
    path = write(toy, "toy", name, text)
    load = {"paper_values.yaml": lambda: paper.paper_values("toy", toy, derivations=DERIVATIONS),
            "deviations.yaml": lambda: paper.deviations("toy", toy), "coverage.yaml": lambda: paper.coverage("toy", toy),
            "paper.yaml": lambda: paper.paper_data("toy", toy)}[name]
    with pytest.raises(VlcpError) as err:
        load()
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text, text


def test_the_packaged_files_name_the_package_folder_in_their_errors():
    with pytest.raises(VlcpError, match=r"^paper table 'ctp_table9' not found \(known: cllclip_table2, "):
        paper.paper_table("ctp_table9")
    assert set(STUDIES) == {"ctp", "incclip", "cllclip", "fomo"} and set(STUDIES) < set(paper.studies())


def test_every_study_file_is_package_data_and_reads_through_importlib_resources():
    """pyproject.toml's package-data globs cover every file in vlcp/report/studies, and the
    loaders find them as package resources (what an installed vlcp reads)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["vlcp"]
    files = [p.relative_to(ROOT / "vlcp").as_posix() for p in (ROOT / "vlcp/report/studies").rglob("*") if p.is_file()]
    assert files and all(any(fnmatch(f, g) for g in globs) for f in files), [f for f in files if not any(fnmatch(f, g) for g in globs)]
    base = resources.files("vlcp.report") / "studies"
    assert sorted(f"{s}/{p.name}" for s in paper.studies() for p in (base / s).iterdir()) == \
        sorted(f.removeprefix("report/studies/") for f in files)
    assert len(paper.tables()) == sum(f.endswith(".csv") for f in files)
    for s in STUDIES:
        assert paper.paper_values(s, derivations=DERIVATIONS) and paper.deviations(s) and paper.coverage(s).not_applicable


@pytest.mark.slow
def test_a_built_wheel_carries_the_paper_data(tmp_path):
    """The wheel pip builds holds every study file, and an install of it (the wheel unpacked)
    loads them through importlib.resources."""
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    shutil.copytree(ROOT / "vlcp", src / "vlcp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for f in ("pyproject.toml", "README.md"):
        (src / f).write_bytes((ROOT / f).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "-q", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, timeout=600)
    wheel = next((tmp_path / "dist").glob("vlcp-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "vlcp/report/studies").rglob("*") if p.is_file())
    assert [f for f in files if f not in names] == []
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    check = ("import vlcp.report.paper as p; from vlcp.report.deviations import DERIVATIONS; assert 'site' in p.__file__; "
             "print(len(p.tables()), len(p.paper_values('fomo', derivations=DERIVATIONS)), p.paper_data('ctp')['seqf_hours'])")
    out = subprocess.run([sys.executable, "-c", check], env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
                         check=True, capture_output=True, text=True, cwd=tmp_path, timeout=300).stdout.split()
    assert out == [str(sum(f.endswith(".csv") for f in files)), "39", "3.4"]
