"""vlcp's layers (docs/architecture.md, "Layers"): no module imports from a higher layer, and the
subpackages import one another without a cycle. Every import counts: top-level, inside a function
(lazy), under `if TYPE_CHECKING:`, and relative (`from . import x`, resolved)."""
import re

from test_layers import ROOT, cycles, imports, modules, resolve

DOC = ROOT / "docs" / "architecture.md"


def layers() -> list[list[str]]:
    """The layer line of docs/architecture.md, bottom to top: each layer's subpackages (and
    top-level modules)."""
    line = re.search(r"tests/test_imports\.py` reads this line\):\s*`([^`]+)`", DOC.read_text())
    assert line, f"{DOC.relative_to(ROOT)}: no layer line (after \"tests/test_imports.py` reads this line):\")"
    return [layer.split() for layer in line.group(1).split("<")]


def unit(module: str) -> str:
    """The subpackage or top-level module a vlcp module belongs to ("vlcp": the package's __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def cross_imports() -> list[tuple[str, str, str, str]]:
    """(importing unit, imported unit, "file:line", imported module) for every import of one vlcp
    unit from another."""
    known = modules()
    out = []
    for mod, path in sorted(known.items()):
        for base, name, line in imports(path, mod, known):
            target = resolve(f"{base}.{name}" if name else base, known)
            row = (unit(mod), unit(target), f"{path.relative_to(ROOT)}:{line}", target) if target else None
            if row and row[0] != row[1] and row not in out:
                out.append(row)
    return out


def test_every_subpackage_has_one_layer():
    named = [u for layer in layers() for u in layer]
    assert sorted(named) == sorted(set(named)), "a unit named in two layers"
    assert set(named) == {unit(m) for m in modules()}


def test_no_import_from_a_higher_layer():
    rank = {u: i for i, layer in enumerate(layers()) for u in layer}
    upward = [f"{where} imports {target} ({a} is below {b})" for a, b, where, target in cross_imports()
              if rank[b] > rank[a]]
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_cycle_among_subpackages():
    edges = {unit(m): set() for m in modules()}
    for a, b, _, _ in cross_imports():
        edges[a].add(b)
    found = cycles(edges)
    first: dict[tuple[str, str], list[str]] = {}
    for a, b, where, target in cross_imports():
        if any(a in circle and b in circle for circle in found):
            first.setdefault((a, b), []).append(f"{where} imports {target}")
    lines = [f"{a} -> {b}: {rows[0]}" + (f" (and {len(rows) - 1} more)" if len(rows) > 1 else "")
             for (a, b), rows in first.items()]
    assert not found, f"import cycles among {found}:\n" + "\n".join(lines)
