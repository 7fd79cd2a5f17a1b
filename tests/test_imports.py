"""The package's import graph has no cycles (every import counted, lazy ones too), the catalog sits
at the bottom, and library packages never import the orchestration layer (profiles, grid, MLflow,
DVC, the jobs and the CLI).

    python -m pytest tests/test_imports.py   # prints the cycle if one appears
"""
from __future__ import annotations

from pathlib import Path

from ltopd.codegraph import import_graph

SRC = Path(__file__).resolve().parents[1] / "src"
ORCHESTRATION = ("ltopd.pipeline", "ltopd.cli", "ltopd.config", "ltopd.grid", "ltopd.tracking", "ltopd.dvcgen")
LIBRARY = ("ltopd.data", "ltopd.selectors", "ltopd.models", "ltopd.bench", "ltopd.train", "ltopd.report",
           "ltopd.efficiency")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_cycle_finder_finds_a_hand_made_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_library_never_imports_the_orchestration_layer():
    graph = import_graph()
    offenders = {m: sorted(d for d in deps if d.startswith(ORCHESTRATION))
                 for m, deps in graph.items() if m.startswith(LIBRARY)}
    assert {m: d for m, d in offenders.items() if d} == {}


def test_the_catalog_imports_nothing_of_the_package():
    assert import_graph()["ltopd.catalog"] == set()


def test_tests_mirror_the_package_layout():
    """tests/<package>/ holds the tests of src/ltopd/<package>/; the top level those of top-level
    modules (test_<module>.py) and the package-wide checks (imports, lint)."""
    tests = SRC.parent / "tests"
    packages = {p.name for p in (SRC / "ltopd").iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders <= packages, folders - packages
    modules = {p.stem for p in (SRC / "ltopd").glob("*.py")}
    top = {p.stem.removeprefix("test_") for p in tests.glob("test_*.py")}
    assert top - {"imports", "lint"} <= modules, top - modules
