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
import hashlib
import json
import os
import sys
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


def _targets(imp: list, package: str, mods: dict[str, Path]) -> list[str]:
    """The modules one import statement names (``imp``: [level, module, names, is_from])."""
    level, module, names, is_from = imp
    if not is_from:
        return list(names)
    base = module or ""
    if level:
        up = package.split(".")[: len(package.split(".")) - level + 1]
        base = ".".join(up + ([base] if base else []))
    subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in mods]
    return subs if len(subs) == len(names) else [base, *subs]


def _resolves_registry(node: ast.AST) -> bool:
    """A call `resolve(__name__, ...)`: a registry that imports its package's modules by name."""
    return (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "resolve"
            and bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == "__name__")


def _names_a_file(value: str) -> bool:
    """A string constant that may be a data file's path ("schemas/config.schema.yaml")."""
    return "." in value and "\n" not in value and len(value) < 200 and not value.endswith(".py")


def _is_declaration(value: str) -> bool:
    """A "module:function" string (the catalog's declarations)."""
    module, _, function = value.partition(":")
    return value.count(":") == 1 and module.isidentifier() and function.isidentifier()


def _facts(text: str, filename: str) -> dict:
    """What the graph reads of one source file: its import statements, whether it resolves a
    registry, and the string constants that may name a data file or a declaration."""
    facts: dict = {"imports": [], "registry": False, "strings": []}
    for node in ast.walk(ast.parse(text, filename=filename)):
        if isinstance(node, ast.Import):
            facts["imports"].append([0, None, [a.name for a in node.names], False])
        elif isinstance(node, ast.ImportFrom):
            facts["imports"].append([node.level, node.module, [a.name for a in node.names], True])
        elif _resolves_registry(node):
            facts["registry"] = True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                _names_a_file(node.value) or _is_declaration(node.value)):
            facts["strings"].append(node.value)
    return facts


# Parsing every module is ~1 s, paid by every job (its code identity) and every Snakemake
# parse: each file's facts are kept by its content hash in the package's __pycache__ (a cache of
# parsed source, not bytecode: written even where Python writes no .pyc), so only edited files
# are parsed again. The cache names its reader (this file's hash and the Python version), so
# facts read by other rules are not reused; a broken or unwritable cache is parsed around.
CACHE_NAME = "codegraph-facts.json"
_READER = f"{hashlib.sha256(Path(__file__).read_bytes()).hexdigest()} py{sys.version_info[0]}.{sys.version_info[1]}"
_FACT_KEYS = {"imports", "registry", "strings"}


def _read_cache(path: Path) -> dict:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    facts = cache.get("facts") if isinstance(cache, dict) and cache.get("reader") == _READER else None
    if not isinstance(facts, dict):
        return {}
    return {k: v for k, v in facts.items() if isinstance(v, dict) and v.keys() == _FACT_KEYS}


def _write_cache(path: Path, facts: dict) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        tmp.write_text(json.dumps({"reader": _READER, "facts": facts}, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


@functools.cache
def _sources(root: Path) -> dict[str, tuple[Path, dict]]:
    """Module -> (source file, its facts), each file parsed once per content."""
    files = modules(root)
    texts = {name: path.read_bytes() for name, path in files.items()}
    digests = {name: hashlib.sha256(text).hexdigest() for name, text in texts.items()}
    cache_file = root / "__pycache__" / CACHE_NAME
    cached = _read_cache(cache_file)
    facts = {name: cached.get(digests[name]) for name in files}
    missing = [name for name, f in facts.items() if f is None]
    for name in missing:
        facts[name] = _facts(texts[name].decode(), str(files[name]))
    if missing:
        _write_cache(cache_file, {digests[name]: facts[name] for name in files})
    return {name: (files[name], facts[name]) for name in files}


@functools.cache
def _catalog_refs(root: Path) -> set[str]:
    """The module parts of the catalog's "module:function" declarations."""
    strings = _sources(root)[f"{root.name}.catalog"][1]["strings"]
    return {s.partition(":")[0] for s in strings if _is_declaration(s)}


@functools.cache
def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, frozenset[str]]:
    """Module -> the package's modules it imports. `from pkg import sub` counts the submodule
    (not the package's __init__) when sub is a module."""
    sources = _sources(root)
    mods = {name: path for name, (path, _) in sources.items()}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, facts) in sources.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        targets = [t for imp in facts["imports"] for t in _targets(imp, package, mods)]
        if is_package and facts["registry"]:
            targets += [f"{name}.{ref}" for ref in _catalog_refs(root)]
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
    for name, (path, facts) in _sources(root).items():
        found = set()
        for value in facts["strings"]:
            if _names_a_file(value):
                for base in (path.parent, root):
                    candidate = base / value
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
