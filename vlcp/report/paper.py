"""The papers' data, read from each study's folder `vlcp/report/studies/<study>/`: paper_values.yaml,
deviations.yaml, paper.yaml, coverage.yaml and transcribed tables `<study>_*.csv`. A missing file lists
nothing; a malformed one is one line naming the file, the entry and the field. `root`: another folder of
study folders."""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Collection, Iterable, Mapping, NamedTuple

import pandas as pd
import yaml

from vlcp.errors import VlcpError

KINDS = ("scale", "data", "open choice", "code vs text", "original code", "design")
RENDERED = ("no", "in part")


@dataclass(frozen=True)
class PaperValue:
    """A setting the paper states for one experiment: `field`, a dotted path into its resolved config,
    or, with `derive` (a `vlcp.report.deviations.DERIVATIONS` name), the label of a value derived from it."""
    experiment: str
    field: str
    paper: Any
    source: str               # where the paper says so: "CTP §5.1", "IncCLIP Table 9"
    rows: str                 # the rows / figures that the setting touches
    why: str = ""             # why the active profile may differ (scale, mostly)
    derive: str = ""
    at_paper_scale: str = ""  # non-empty: differs on the `paper` profile too, and why
    rel_tol: float = 0.0      # numbers within this relative tolerance count as the paper's

    def matches(self, ours: Any) -> bool:
        if isinstance(self.paper, (int, float)) and isinstance(ours, (int, float)) and not isinstance(ours, bool):
            return abs(ours - self.paper) <= self.rel_tol * abs(self.paper) if self.rel_tol else ours == self.paper
        return ours == self.paper


@dataclass(frozen=True)
class Deviation:
    """A difference from the paper that is not one config value."""
    kind: str                 # one of KINDS
    what: str                 # what differs, ours vs the paper
    why: str
    rows: str                 # which rows / figures it touches
    source: str = ""          # the paper's or the original code's place


class Gap(NamedTuple):
    item: str
    rendered: str          # one of RENDERED
    missing: str
    why: str
    renders_it: str        # what would render it
    experiments: tuple[str, ...] = ()   # the runs that render it, where they exist (the long profile's rows)


class NotApplicable(NamedTuple):
    item: str
    why: str


class Coverage(NamedTuple):
    not_rendered: tuple[Gap, ...]
    not_applicable: tuple[NotApplicable, ...]


# field -> (type, required); the optional ones default as the classes do
_NUMBER = (int, float)
_PAPER_VALUE = {"experiment": (str, True), "field": (str, True), "paper": (object, True), "source": (str, True),
                "rows": (str, True), "why": (str, False), "derive": (str, False), "at_paper_scale": (str, False),
                "rel_tol": (_NUMBER, False)}
_DEVIATION = {"kind": (str, True), "what": (str, True), "why": (str, True), "rows": (str, True), "source": (str, False)}
_GAP = {"item": (str, True), "rendered": (str, True), "missing": (str, True), "why": (str, True),
        "renders_it": (str, True), "experiments": (list, False)}
_NOT_APPLICABLE = {"item": (str, True), "why": (str, True)}
_PAPER = {"value": (object, True), "source": (str, True)}
_REFERENCE = {"table": (str, True), "row": (dict, True), "column": (str, False), "columns": (list, False)}


def studies_root(root: str | Path | None = None):
    """The folder of study folders: the package's own, or `root`."""
    return resources.files("vlcp.report") / "studies" if root is None else Path(root)


def studies(root: str | Path | None = None) -> tuple[str, ...]:
    """The studies that have a data folder, by name."""
    return tuple(sorted(p.name for p in studies_root(root).iterdir() if p.is_dir() and p.name[0] not in "._"))


def read_yaml(path: Path, label: str) -> Any:
    """The YAML file at `path`; invalid YAML is a one-line error naming `label`."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise VlcpError(f"{label}: not valid YAML ({str(e).splitlines()[0]})") from None


def _read(study: str, name: str, root, empty):
    """(the file's label, its YAML: a list or a mapping as `empty` is; `empty` when the file is absent)."""
    label = f"vlcp/report/studies/{study}/{name}" if root is None else str(Path(root, study, name))
    path = studies_root(root) / study / name
    if not path.is_file():
        return label, empty
    data = read_yaml(path, label)
    data = empty if data is None else data
    if not isinstance(data, type(empty)):
        raise VlcpError(f"{label}: expected a {'list of entries' if isinstance(empty, list) else 'mapping'}, "
                        f"got {type(data).__name__}")
    return label, data


def _checked(label: str, where: str, entry: Any, spec: dict) -> dict:
    if not isinstance(entry, dict):
        raise VlcpError(f"{label}: {where}: expected a mapping of fields, got {type(entry).__name__}")
    for key, (_, required) in spec.items():
        if required and key not in entry:
            raise VlcpError(f"{label}: {where}: missing field {key!r}")
    for key, value in entry.items():
        if key not in spec:
            raise VlcpError(f"{label}: {where}: unknown field {key!r} (fields: {', '.join(spec)})")
        kind = spec[key][0]
        if kind is not object and (not isinstance(value, kind) or isinstance(value, bool)):
            must = "a number" if kind is _NUMBER else {str: "text", list: "a list", dict: "a mapping"}[kind]
            raise VlcpError(f"{label}: {where}: field {key!r} must be {must}, got {value!r}")
    return entry


def _one_of(label: str, where: str, key: str, value: str, known: Collection[str]) -> str:
    if value not in known:
        raise VlcpError(f"{label}: {where}: unknown {key} {value!r} (known: {', '.join(known) or 'none'})")
    return value


def _expanded(label: str, i: int, entry: Any) -> list[tuple[str, Any]]:
    """A paper_values entry as (where, entry) per experiment: it names `experiment` and `rows`, or
    `experiments: {experiment: rows}`."""
    where = lambda e: f"entry {i} ({e} {entry.get('field', '?')})"  # noqa: E731
    if not isinstance(entry, dict):
        return [(f"entry {i}", entry)]
    if "experiments" not in entry:
        return [(where(entry["experiment"]) if "experiment" in entry else f"entry {i}", entry)]
    many = entry["experiments"]
    if "experiment" in entry or "rows" in entry:
        raise VlcpError(f"{label}: entry {i}: give experiment and rows, or experiments, not both")
    if not isinstance(many, dict) or not many or not all(isinstance(x, str) for kv in many.items() for x in kv):
        raise VlcpError(f"{label}: entry {i}: field 'experiments' must map each experiment to the rows it touches")
    rest = {k: v for k, v in entry.items() if k != "experiments"}
    return [(where(e), {"experiment": e, "rows": rows, **rest}) for e, rows in many.items()]


def paper_values(study: str, root: str | Path | None = None,
                 derivations: Collection[str] | None = None) -> tuple[PaperValue, ...]:
    """The settings `study`'s paper states; `derivations`: the names `derive` may take (None: unchecked)."""
    label, data = _read(study, "paper_values.yaml", root, [])
    out = []
    for i, raw in enumerate(data, 1):
        for where, entry in _expanded(label, i, raw):
            entry = _checked(label, where, entry, _PAPER_VALUE)
            if entry.get("derive") and derivations is not None:
                _one_of(label, where, "derivation", entry["derive"], derivations)
            out.append(PaperValue(**entry))
    return tuple(out)


def deviations(study: str, root: str | Path | None = None) -> tuple[Deviation, ...]:
    label, data = _read(study, "deviations.yaml", root, [])
    out = []
    for i, entry in enumerate(data, 1):
        entry = _checked(label, f"entry {i}", entry, _DEVIATION)
        _one_of(label, f"entry {i}", "kind", entry["kind"], KINDS)
        out.append(Deviation(**entry))
    return tuple(out)


def coverage(study: str, root: str | Path | None = None) -> Coverage:
    """The paper items `study`'s report renders in part or not at all, and those that do not apply."""
    label, data = _read(study, "coverage.yaml", root, {})
    for key in data:
        _one_of(label, "top level", "section", key, Coverage._fields)
    for key in Coverage._fields:
        if not isinstance(data.get(key, []), list):
            raise VlcpError(f"{label}: {key}: expected a list of entries, got {type(data[key]).__name__}")
    gaps = []
    for i, entry in enumerate(data.get("not_rendered", []), 1):
        where = f"not_rendered entry {i}"
        entry = _checked(label, where, entry, _GAP)
        _one_of(label, where, "rendered", entry["rendered"], RENDERED)
        if not all(isinstance(e, str) for e in entry.get("experiments", [])):
            raise VlcpError(f"{label}: {where}: field 'experiments' must be a list of experiment names")
        gaps.append(Gap(**{**entry, "experiments": tuple(entry.get("experiments", ()))}))
    na = [NotApplicable(**_checked(label, f"not_applicable entry {i}", entry, _NOT_APPLICABLE))
          for i, entry in enumerate(data.get("not_applicable", []), 1)]
    return Coverage(tuple(gaps), tuple(na))


def not_rendered(paper: str, have: Iterable[str] = ()) -> pd.DataFrame:
    """The paper's items rendered in part or not at all, then those that do not apply here; an item
    whose runs (`Gap.experiments`) are all in `have` (the runs the report loaded) is left out."""
    have, cov = set(have), coverage(paper)
    rows = [g[:5] for g in cov.not_rendered if not (g.experiments and set(g.experiments) <= have)]
    rows += [(item, "does not apply", "all", why, "none") for item, why in cov.not_applicable]
    return pd.DataFrame(rows, columns=["item", "rendered", "missing", "why", "what would render it"])


def paper_data(study: str, root: str | Path | None = None) -> Mapping[str, Any]:
    """`study`'s paper numbers by name, read-only (lists as tuples); a `{table, row, column}` value is
    the cell of the one row whose cells equal `row` (`columns`: a tuple of cells)."""
    label, data = _read(study, "paper.yaml", root, {})
    checked = {k: _checked(label, str(k), e, _PAPER) for k, e in data.items()}
    return MappingProxyType({k: reference_value(label, str(k), e["value"], root) for k, e in checked.items()})


def reference_value(label: str, where: str, value: Any, root=None) -> Any:
    """A paper data value with its table references read from the tables; errors name `label`, `where`."""
    if isinstance(value, dict) and "table" in value:
        return _cells(label, where, _checked(label, where, value, _REFERENCE), root)
    if isinstance(value, dict):
        return MappingProxyType({k: reference_value(label, f"{where}.{k}", v, root) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(reference_value(label, f"{where}[{i}]", v, root) for i, v in enumerate(value))
    return value


def _cells(label: str, where: str, ref: dict, root) -> Any:
    if ("column" in ref) == ("columns" in ref):
        raise VlcpError(f"{label}: {where}: a table reference names one of 'column' or 'columns'")
    try:
        table = paper_table(ref["table"], root)
    except VlcpError as e:
        raise VlcpError(f"{label}: {where}: {e}") from None
    columns = ref["columns"] if "columns" in ref else [ref["column"]]
    if any(isinstance(v, bool) for v in ref["row"].values()):
        raise VlcpError(f"{label}: {where}: field 'row' holds a boolean, {ref['row']!r} (quote yes / no: YAML reads "
                        "them as booleans)")
    if not ref["row"] or not all(isinstance(v, (str, int, float)) for v in ref["row"].values()):
        raise VlcpError(f"{label}: {where}: field 'row' must map columns to the cells that pick one row, "
                        f"got {ref['row']!r}")
    if not columns or not all(isinstance(c, str) for c in columns):
        raise VlcpError(f"{label}: {where}: field 'columns' must list column names, got {columns!r}")
    for c in [*ref["row"], *columns]:
        if c not in table.columns:
            raise VlcpError(f"{label}: {where}: table {ref['table']} has no column {c!r}")
    hit = table
    for c, v in ref["row"].items():
        hit = hit[hit[c] == v]
    if len(hit) != 1:
        raise VlcpError(f"{label}: {where}: row {ref['row']} matches {len(hit)} rows of table {ref['table']}, not one")
    for c in columns:
        if pd.isna(hit.iloc[0][c]):
            raise VlcpError(f"{label}: {where}: table {ref['table']}'s cell {c!r} at row {ref['row']} is empty")
    cells = tuple(cell.item() if hasattr(cell, "item") else cell for cell in (hit.iloc[0][c] for c in columns))
    return cells[0] if "column" in ref else cells


def tables(root: str | Path | None = None) -> tuple[str, ...]:
    """Every transcribed table's name (`<study>_<table>`)."""
    return tuple(sorted(p.name[:-4] for s in studies(root) for p in (studies_root(root) / s).iterdir()
                        if p.name.endswith(".csv")))


def paper_table(name: str, root: str | Path | None = None) -> pd.DataFrame:
    """One transcribed table, e.g. `paper_table("ctp_table1")`; its caption in `.attrs["source"]`."""
    path = studies_root(root) / name.split("_", 1)[0] / f"{name}.csv"
    if not path.is_file():
        raise VlcpError(f"paper table {name!r} not found (known: {', '.join(tables(root))})")
    with path.open(encoding="utf-8") as f:
        source = f.readline().lstrip("# ").strip()
        df = pd.read_csv(f)
    df.attrs["source"] = source
    return df
