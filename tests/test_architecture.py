"""The shape of the code: no import circle anywhere in the package, and data flowing one way
(capture -> parsers -> store -> model -> analyses -> outputs -> cli; docs/architecture.md).

Imports are read from the source (module level and inside functions: a late import is still a
dependency), so a circle hidden behind a function-level import fails here too.
"""
import ast
from pathlib import Path

import pytest
from profdata import ROOT

# source folder -> package name it ships as
PACKAGES = {"profkit": "profkit", "parsers": "profkit.parsers", "kernels": "profkit.kernels"}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, pkg in PACKAGES.items():
        for f in sorted((ROOT / folder).rglob("*.py")):
            rel = f.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = f
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules `name` imports (resolved to the most specific known module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if _is_package(path) else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {n: _imports(n, p, known) for n, p in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_anywhere():
    graph = _graph()
    assert len(graph) > 40  # the walk found the package
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# lower layers never import higher ones (docs/architecture.md); the lab (profkit.kernels) sits
# above the model (it may use the operator formulas) and below capture and the CLI, which run it
LAYERS = [
    ("core", {"profkit.core"}),
    ("parsers", {"profkit.parsers"}),
    ("store", {"profkit.store"}),
    ("model", {"profkit.model"}),
    ("analyses", {"profkit.analyses"}),
    ("outputs", {"profkit.outputs"}),
    ("lab", {"profkit.kernels"}),
    ("capture", {"profkit.capture"}),
    ("cli", {"profkit.cli", "profkit.__main__"}),
]


def test_every_module_has_a_layer():
    assert sorted(m for m in _modules() if m != "profkit" and _layer(m) is None) == []


def _layer(module: str) -> int | None:
    for i, (_, members) in enumerate(LAYERS):
        if any(module == m or module.startswith(m + ".") for m in members):
            return i
    return None


@pytest.mark.parametrize("layer", [name for name, _ in LAYERS])
def test_data_flows_one_way(layer):
    graph = _graph()
    mine = LAYERS[[n for n, _ in LAYERS].index(layer)]
    bad = []
    for mod, deps in graph.items():
        here = _layer(mod)
        if here is None or LAYERS[here] is not mine:
            continue
        for d in deps:
            there = _layer(d)
            if there is not None and there > here:
                bad.append(f"{mod} imports {d}")
    assert bad == []
