"""The imports a job really executes, recorded at run time: the check on ltopd.codegraph.

With ``LTOPD_TRACE_IMPORTS=<folder>`` in the environment, the `ltopd` CLI records every import
statement the package executes (importer -> imported module, lazy imports and registry lookups
through importlib included, cached modules too) and writes them to ``<folder>/<pid>.json`` at exit,
with the module of the subcommand that ran. The tests follow those edges from the job's module
and check that every module reached is among its rule's code inputs.
"""

from __future__ import annotations

import atexit
import builtins
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from ltopd.codegraph import reachable

ENV = "LTOPD_TRACE_IMPORTS"
PACKAGE = "ltopd"


def _ours(name: str | None) -> bool:
    return bool(name) and (name == PACKAGE or name.startswith(f"{PACKAGE}."))


def _absolute(name: str, importer_package: str | None, level: int) -> str:
    if not level:
        return name
    base = (importer_package or "").split(".")
    base = base[: len(base) - level + 1]
    return ".".join(base + ([name] if name else []))


def install(folder: str | Path, job: dict[str, str]) -> None:
    """Record the package's executed imports from now on; ``job["module"]`` (filled in by the
    caller once the subcommand is known) is written with them at exit."""
    edges: set[tuple[str, str]] = set()
    real_import, real_import_module = builtins.__import__, importlib.import_module

    def traced_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),  # noqa: A002
                      level: int = 0) -> Any:
        module = real_import(name, globals, locals, fromlist, level)
        importer = (globals or {}).get("__name__")
        if _ours(importer):
            target = _absolute(name, (globals or {}).get("__package__"), level)
            if _ours(target):
                edges.add((importer, target))
                for item in fromlist or ():
                    if f"{target}.{item}" in sys.modules:
                        edges.add((importer, f"{target}.{item}"))
        return module

    def traced_import_module(name: str, package: str | None = None) -> Any:
        module = real_import_module(name, package)
        importer = sys._getframe(1).f_globals.get("__name__")
        if _ours(importer) and _ours(module.__name__):
            edges.add((importer, module.__name__))
        return module

    builtins.__import__ = traced_import
    importlib.import_module = traced_import_module

    def write() -> None:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{os.getpid()}.json").write_text(json.dumps({**job, "edges": sorted(edges)}))

    atexit.register(write)


def reached(job_module: str, edges: list[list[str]] | list[tuple[str, str]]) -> set[str]:
    """The modules reachable from ``job_module`` along executed import edges (and the packages
    importing a module runs)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    return reachable(graph, [job_module])
