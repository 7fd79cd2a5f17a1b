"""The package's import graph, read from the source: which `ltopd` modules a job runs.

Snakemake's code trigger sees a rule's shell command, not the modules it imports, and DVC and
the released twins' manifests need the same answer: the files whose edit can change a job's
output. Every import statement counts, lazy ones inside functions too, and a registry that
resolves "module:function" names from the catalog (`catalog.resolve(__name__, ...)`) counts as
importing every module of its package that the catalog names. Importing `a.b.c` runs `a/__init__.py` and
`a/b/__init__.py`, so a module's packages belong to its dependencies.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent  # src/ltopd


def modules(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """Module name -> source file, for every module of the package under ``root``."""
    out = {}
    for f in root.rglob("*.py"):
        parts = (root.name, *f.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _targets(node: ast.Import | ast.ImportFrom, package: str, mods: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(up + ([base] if base else []))
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
    return subs if len(subs) == len(node.names) else [base, *subs]


def _resolves_registry(node: ast.AST) -> bool:
    """A call `resolve(__name__, ...)`: a registry that imports its package's modules by name."""
    return (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "resolve"
            and bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == "__name__")


@functools.cache
def _sources(root: Path) -> dict[str, tuple[Path, ast.Module]]:
    """Module -> (source file, its syntax tree), each file parsed once."""
    return {name: (path, ast.parse(path.read_text(), filename=str(path))) for name, path in modules(root).items()}


@functools.cache
def _catalog_refs(root: Path) -> set[str]:
    """The module parts of the catalog's "module:function" declarations."""
    tree = _sources(root)[f"{root.name}.catalog"][1]
    return {n.value.partition(":")[0] for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and n.value.count(":") == 1 and n.value.partition(":")[0].isidentifier()
            and n.value.partition(":")[2].isidentifier()}


@functools.cache
def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, frozenset[str]]:
    """Module -> the package's modules it imports. `from pkg import sub` counts the submodule
    (not the package's __init__) when sub is a module."""
    sources = _sources(root)
    mods = {name: path for name, (path, _) in sources.items()}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, tree) in sources.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                targets = _targets(node, package, mods)
            elif is_package and _resolves_registry(node):
                targets = [f"{name}.{ref}" for ref in _catalog_refs(root)]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t.startswith(root.name) and t != name:
                    graph[name].add(t)
    return {m: frozenset(d) for m, d in graph.items()}


@functools.cache
def data_files(root: Path = PACKAGE_ROOT) -> dict[str, frozenset[Path]]:
    """Module -> the package's non-Python files it names (a string literal that is a path from
    the module's folder or from the package root, e.g. "schemas/config.schema.yaml"): data the
    code reads, such as the paper's reported numbers."""
    out = {}
    for name, (path, tree) in _sources(root).items():
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value \
                    and "\n" not in node.value and len(node.value) < 200 and not node.value.endswith(".py"):
                for base in (path.parent, root):
                    candidate = base / node.value
                    if candidate.is_file():
                        found.add(candidate)
        out[name] = frozenset(found)
    return out


def reachable(graph: Mapping[str, Iterable[str]], roots: Iterable[str]) -> set[str]:
    """The modules importing ``roots`` runs along ``graph``'s edges: importing `a.b.c` also runs
    its packages `a` and `a.b`."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo.extend(graph.get(m, ()))
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
    return seen


def closure(roots: list[str] | tuple[str, ...], root: Path = PACKAGE_ROOT) -> set[str]:
    """The modules that importing ``roots`` (and running everything they import) can execute."""
    graph = import_graph(root)
    unknown = [r for r in roots if r not in graph]
    if unknown:
        raise ValueError(f"no module(s) {unknown} under {root}")
    return reachable(graph, roots) & set(graph)


def code_files(roots: list[str] | tuple[str, ...], root: Path = PACKAGE_ROOT) -> list[Path]:
    """The source files of ``closure(roots)`` and the data files they name, sorted."""
    mods, data = {name: path for name, (path, _) in _sources(root).items()}, data_files(root)
    found = closure(roots, root)
    return sorted({mods[m] for m in found} | {f for m in found for f in data[m]})


def relative_code_files(roots: list[str] | tuple[str, ...], start: Path, root: Path = PACKAGE_ROOT) -> list[str]:
    """``code_files`` as paths relative to ``start`` (the repository, for Snakemake and DVC)."""
    return [str(p.relative_to(start.resolve())) for p in code_files(roots, root)]
