"""The package's import graph: no cycles, no private name used across modules, and the config
loads no method (vlcp.registry names them without importing)."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "vlcp"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def resolve(name: str, known: dict) -> str | None:
    """The vlcp module an imported dotted name refers to (a submodule if it is one, else the module
    or package that defines the name)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path, mod: str, known: dict) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import statement, at any depth."""
    out = []
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.startswith("vlcp")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.startswith("vlcp"):
                out += [(base, a.name, node.lineno) for a in node.names]
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    edges = {m: set() for m in known}
    for mod, path in known.items():
        for base, name, _ in imports(path, mod, known):
            target = resolve(f"{base}.{name}" if name else base, known)
            if target and target != mod and not (known[mod].name == "__init__.py" and target.startswith(mod + ".")):
                edges[mod].add(target)   # (a package's __init__ importing its own submodules is not a cycle edge)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v), on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_no_private_name_imported_across_modules():
    known = modules()
    bad = [f"{path.relative_to(ROOT)}:{line} imports {name} from {base}"
           for mod, path in known.items() for base, name, line in imports(path, mod, known)
           if name and name.startswith("_") and not name.startswith("__")]
    assert bad == []


def test_config_imports_no_method():
    code = "import sys, vlcp.config; print(sorted(m for m in sys.modules if m.startswith('vlcp.methods')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_registry_names_every_method_module_and_class():
    from vlcp.methods import Method
    from vlcp.registry import METHODS, load_method

    defined = set()
    for path in (PKG / "methods").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list):
                defined.add(f"vlcp.methods.{path.stem}:{node.name}")
    assert set(METHODS.values()) >= defined and len(defined) == len(METHODS)
    for name in METHODS:
        cls = load_method(name)
        assert issubclass(cls, Method) and cls.name == name


def test_config_validates_methods_through_the_registry_only():
    """config stands below everything that uses it: it reaches a method's class through
    vlcp.registry (which imports the one module named), never through vlcp.methods."""
    known = modules()
    assert [base for base, _, _ in imports(known["vlcp.config"], "vlcp.config", known)
            if base.startswith("vlcp.methods")] == []


def test_start_up_imports_no_model_library():
    """`import vlcp.run` (what every `vlcp run` stage starts with) and the CLI load neither open_clip,
    torchvision nor transformers: those ~3 s are paid where a model is built or an image augmented."""
    code = ("import sys, vlcp.run, vlcp.cli, vlcp.data.augment, vlcp.train.loop; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'open_clip', 'torchvision', 'transformers'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_clip_normalisation_constants_are_open_clips():
    import open_clip

    from vlcp.models.clip import OPENAI_MEAN, OPENAI_STD

    assert OPENAI_MEAN == tuple(open_clip.OPENAI_DATASET_MEAN) and OPENAI_STD == tuple(open_clip.OPENAI_DATASET_STD)
