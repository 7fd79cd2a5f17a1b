"""The catalog (ltopd.catalog) is the one place names are declared: every name a profile uses
resolves in it, and every registry of implementations covers exactly its names."""
from __future__ import annotations

import ast
import inspect
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ltopd import catalog
from ltopd.bench.scoring import SCORERS
from ltopd.bench.suites import SUITES
from ltopd.selectors import SELECTORS
from ltopd.train.methods import TRAINED

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "config").glob("*.yaml"))


def profile_names(cfg: dict) -> dict[str, set[str]]:
    """Every method, benchmark and table name a profile mentions, by kind."""
    grid = cfg.get("grid") or {}
    methods = set(grid.get("methods", [])) | set(grid.get("seeded_methods") or [])
    methods |= set((cfg.get("efficiency") or {}).get("methods", []))
    benchmarks = set(grid.get("benchmarks", [])) | set((cfg.get("evaluation") or {}).get("benchmarks", {}))
    stages = list((cfg.get("pretrain") or {}).get("stages", []))
    stages += [s for bb in (cfg.get("backbones") or {}).values() for s in bb.get("pretrain_stages") or []]
    benchmarks |= {b for s in stages for b in s.get("bench", [])}
    tables = set(cfg.get("studies") or {})
    for study in (cfg.get("studies") or {}).values():
        benchmarks |= set((study or {}).get("benchmarks") or [])
    return {"methods": methods, "benchmarks": benchmarks, "tables": tables}


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_every_name_a_profile_uses_resolves_in_the_catalog(path: Path) -> None:
    names = profile_names(yaml.safe_load(path.read_text()))
    assert names["methods"] and names["benchmarks"]
    assert names["methods"] <= set(catalog.METHODS), names["methods"] - set(catalog.METHODS)
    assert names["benchmarks"] <= set(catalog.BENCHMARKS), names["benchmarks"] - set(catalog.BENCHMARKS)
    assert names["tables"] <= set(catalog.tables_of_kind("study"))


def test_registries_cover_exactly_the_catalog() -> None:
    assert set(SELECTORS) == set(catalog.methods_of_kind("selector"))
    assert set(TRAINED) == set(catalog.methods_of_kind("trained"))
    assert catalog.methods_of_kind("reference") == ["full", "blind"]  # every token; no image at all
    assert [m for m, spec in catalog.METHODS.items() if not spec.images] == ["blind"]
    assert list(SUITES) == list(SCORERS) == list(catalog.BENCHMARKS)
    for name, bench in catalog.BENCHMARKS.items():
        assert SUITES[name].generation_cap == bench.generation_cap
        assert SCORERS[name] is catalog.resolve("ltopd.bench.scoring", bench.scorer)


def test_studies_and_ablations_compare_known_methods_and_the_schema_lists_the_studies() -> None:
    for table in catalog.TABLES.values():
        assert bool(table.methods) == (table.kind in ("ablation", "study")), table.name
        if table.kind == "study":  # each compares against the untrained student: the profile's selector
            assert table.methods.count(catalog.STUDENT_SELECTOR) == 1, table.name
            assert set(catalog.study_methods(table.name, "divprune")) <= set(catalog.METHODS), table.name
            assert "divprune" in catalog.study_methods(table.name, "divprune"), table.name
        else:
            assert set(table.methods) <= set(catalog.METHODS), table.name
    with pytest.raises(ValueError, match="training.selector"):
        catalog.study_methods("figure4", None)
    from ltopd import config

    assert list(config.schema()["properties"]["studies"]["properties"]) == catalog.tables_of_kind("study")


def test_lookups_name_the_allowed_values() -> None:
    assert catalog.method("ltopd").label == "LT-OPD"
    with pytest.raises(ValueError, match="allowed values: .*'ltopd'"):
        catalog.method("lt-opd")
    with pytest.raises(ValueError, match="allowed values: .*'gqa'"):
        catalog.benchmark("GQA")
    with pytest.raises(ValueError, match="declared twice"):
        catalog._index(catalog.METHODS["full"], catalog.METHODS["full"])


# -- one source for the reduction defaults ------------------------------------------------------
# The selector (training.selector), the target budget (the grid's smallest) and the floor
# (reduction.floor) come from the profile through ltopd.grid.reduction_defaults; the selectors are
# named in the catalog (and registered under those names by ltopd.selectors).

SELECTOR_NAMES = frozenset(catalog.methods_of_kind("selector")) | {"cdpruner_dense"}
PAPER_BUDGET = 0.05
DECLARED = ("src/ltopd/catalog.py", "src/ltopd/selectors/")
# Spelt like a selector or the budget, but neither: POPE's "random" split, the EMA teacher's rate,
# the MLflow retry's back-off. (file, the literal or the name it is assigned to / the function it is in)
HOMONYMS = {("src/ltopd/bench/scoring/pope.py", "random"), ("src/ltopd/bench/suites/mme.py", "random"),
            ("src/ltopd/bench/suites/real.py", "random"), ("src/ltopd/data/world/tasks.py", "random"),
            ("src/ltopd/train/trainer.py", "ema_rate"), ("src/ltopd/tracking.py", "_retry")}


def _python_literals(source: str) -> Iterator[tuple[Any, str, int]]:
    """(value, owner, line) of every string and float constant: ``owner`` the name it is assigned
    to or passed as, else the function or class it is in."""
    def walk(node: ast.AST, owner: str) -> Iterator[tuple[Any, str, int]]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            owner = node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else t.attr for t in targets
                     if isinstance(t, (ast.Name, ast.Attribute))]
            owner = names[0] if names else owner
        elif isinstance(node, ast.keyword) and node.arg:
            owner = node.arg
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, float)):
            yield node.value, owner, node.lineno
        for child in ast.iter_child_nodes(node):
            yield from walk(child, owner)

    yield from walk(ast.parse(source), "<module>")


def _snakemake_literals(source: str) -> Iterator[tuple[Any, str, int]]:
    """(value, "", line) of the strings and numbers of a Snakefile (not Python: tokenised)."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NUMBER:
            yield ast.literal_eval(tok.string), "", tok.start[0]
        elif tok.type == tokenize.STRING and not tok.string.lstrip("rbRB").lower().startswith("f"):
            yield ast.literal_eval(tok.string), "", tok.start[0]


def test_no_selector_or_budget_is_written_outside_the_catalog_and_the_profiles() -> None:
    files = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "workflow").rglob("*.smk")) + [ROOT / "Snakefile"]
    found = []
    for path in files:
        rel = str(path.relative_to(ROOT))
        if rel.startswith(DECLARED):
            continue
        text = path.read_text()
        literals = _python_literals(text) if path.suffix == ".py" else _snakemake_literals(text)
        for value, owner, line in literals:
            selector = isinstance(value, str) and value in SELECTOR_NAMES and (rel, value) not in HOMONYMS
            budget = isinstance(value, float) and value == PAPER_BUDGET and (rel, owner) not in HOMONYMS
            if selector or budget:
                found.append(f"{rel}:{line}: {value!r}")
    assert not found, "read these from the profile (ltopd.grid.reduction_defaults):\n" + "\n".join(found)


def test_the_scan_sees_what_it_looks_for() -> None:
    src = 'def f(x, selector="cdpruner", budget=0.05):\n    ema_rate = 0.05\n    return {"s": "random"}\n'
    assert [(v, o) for v, o, _ in _python_literals(src)] == [
        ("cdpruner", "f"), (0.05, "f"), (0.05, "ema_rate"), ("s", "f"), ("random", "f")]
    rule = 'rule a:\n    params:\n        s={"selector": "divprune"},\n        b=0.05,\n    shell: f"x {y}"\n'
    assert {v for v, _, _ in _snakemake_literals(rule)} >= {"divprune", 0.05}


def test_library_functions_take_the_selector_budget_and_floor_from_their_callers() -> None:
    """No default for them anywhere below the profile: a caller that forgets one fails at once
    instead of running the paper's CDPruner, 5% or 32 tokens silently."""
    from ltopd.bench.evaluate import evaluate, evaluate_settings
    from ltopd.efficiency.analytic import tokens_from_kv
    from ltopd.efficiency.latency import Method, measure
    from ltopd.efficiency.table5 import analytic_methods, analytic_rows
    from ltopd.models.backbone import Backbone
    from ltopd.models.hook import choose
    from ltopd.models.inference import predict, predict_settings
    from ltopd.pipeline.efficiency_jobs import methods
    from ltopd.report.grid_tables import build, seed_comparisons
    from ltopd.report.studies import build_study, recovery
    from ltopd.train.curriculum import keep_ratio, kept_tokens, schedule
    from ltopd.train.trainer import TrainConfig

    names = {"selector", "train_selector", "budget", "beta", "ratio", "floor", "pruned", "reference"}
    checked = set()
    for fn in (evaluate, evaluate_settings, tokens_from_kv, Method, measure, analytic_methods, analytic_rows,
               Backbone.select, choose, predict, predict_settings, methods, build_study, recovery, build,
               seed_comparisons, keep_ratio, kept_tokens, schedule, TrainConfig):
        for name, param in inspect.signature(fn).parameters.items():
            if name in names and not (fn is analytic_rows and name in ("budget", "floor")):  # the paper's protocol
                assert param.default is inspect.Parameter.empty, f"{fn.__qualname__}({name}=...)"
                checked.add(name)
    assert checked == names
    assert not hasattr(catalog, "DEFAULT_FLOOR")
