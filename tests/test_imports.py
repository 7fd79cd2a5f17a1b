"""The package's import graph has no cycles (every import counted, lazy ones too), the catalog sits
at the bottom, library packages never import the orchestration layer (profiles, grid, MLflow,
DVC, the jobs and the CLI), no two packages import each other, and a package imports only its own
floor and the floors below it (docs/design.md's package map), save the arrows named there.

    python -m pytest tests/test_imports.py   # prints the cycle, the pair or the arrow if one appears
"""
from __future__ import annotations

from pathlib import Path

from ltopd.codegraph import import_graph

SRC = Path(__file__).resolve().parents[1] / "src"
ORCHESTRATION = ("ltopd.pipeline", "ltopd.cli", "ltopd.config", "ltopd.layers", "ltopd.grid", "ltopd.tracking",
                 "ltopd.lineage", "ltopd.dvcgen")
LIBRARY = ("ltopd.data", "ltopd.selectors", "ltopd.models", "ltopd.bench", "ltopd.stats", "ltopd.twins",
           "ltopd.train", "ltopd.efficiency", "ltopd.report")
# docs/design.md's floors, from the ground up. A package is the first level under ltopd (a
# top-level module is a package of its own); it imports its own floor and the floors below.
FLOORS = (
    ("ltopd", "ltopd.catalog", "ltopd.atomic", "ltopd.codegraph", "ltopd.job_identity", "ltopd.import_trace",
     "ltopd.jsonl", "ltopd.sections", "ltopd.progress", "ltopd.watchdog", "ltopd.reported", "ltopd.preempt",
     "ltopd.integrity"),
    ("ltopd.data", "ltopd.selectors"),
    ("ltopd.models",),
    ("ltopd.bench",),
    ("ltopd.stats",),
    ("ltopd.twins", "ltopd.train", "ltopd.efficiency"),
    ("ltopd.report",),
    ORCHESTRATION,
)
# Arrows that run back up (a package importing one on a higher floor): at most one, each named in
# docs/design.md ("Arrows that run back up") with why.
BACK_UP = frozenset[tuple[str, str]]()


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


def package(module: str) -> str:
    """ltopd.models.hook -> ltopd.models; ltopd.catalog -> ltopd.catalog (its own package)."""
    return ".".join(module.split(".")[:2])


def package_arrows() -> dict[tuple[str, str], list[str]]:
    """(package, package it imports) -> the module imports that make the arrow."""
    out: dict[tuple[str, str], list[str]] = {}
    for m, deps in import_graph().items():
        for d in deps:
            if package(m) != package(d):
                out.setdefault((package(m), package(d)), []).append(f"{m} -> {d}")
    return {k: sorted(v) for k, v in out.items()}


def test_no_two_packages_import_each_other():
    arrows = package_arrows()
    pairs = {(a, b): arrows[(a, b)] + arrows[(b, a)] for a, b in arrows if a < b and (b, a) in arrows}
    assert pairs == {}
    graph: dict[str, set[str]] = {}
    for a, b in arrows:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    assert cycles(graph) == []  # nor three or more in a circle


def test_every_package_stands_on_one_floor():
    placed = [p for floor in FLOORS for p in floor]
    assert len(placed) == len(set(placed)), sorted(p for p in placed if placed.count(p) > 1)
    assert {package(m) for m in import_graph()} == set(placed)


def back_up(arrows: dict[tuple[str, str], list[str]], floors: tuple[tuple[str, ...], ...]) -> dict:
    """The arrows from a package to one on a higher floor."""
    floor = {p: i for i, f in enumerate(floors) for p in f}
    return {k: v for k, v in arrows.items() if floor[k[1]] > floor[k[0]]}


def test_the_floor_check_finds_a_hand_made_arrow_back_up():
    arrows = {("a.x", "a.y"): ["a.x.m -> a.y.n"], ("a.y", "a.z"): ["a.y.n -> a.z"], ("a.z", "a.x"): ["a.z -> a.x"]}
    assert back_up(arrows, (("a.z",), ("a.x", "a.y"))) == {("a.z", "a.x"): ["a.z -> a.x"]}
    assert package("ltopd.models.hook") == "ltopd.models" and package("ltopd.catalog") == "ltopd.catalog"


def test_arrows_run_down_save_the_named_ones():
    up = back_up(package_arrows(), FLOORS)
    assert set(up) <= BACK_UP, {k: v for k, v in up.items() if k not in BACK_UP}
    assert len(BACK_UP) <= 1
    design = (SRC.parent / "docs" / "design.md").read_text()
    section = design.split("### Arrows that run back up", 1)[1].split("\n#", 1)[0]
    assert all(f"{a} -> {b}" in section for a, b in BACK_UP)
