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


# -- what is derived from the catalog ------------------------------------------------------------

def test_each_benchmark_declares_how_the_bootstrap_resamples_it() -> None:
    """stats.bootstrap reads every benchmark's decomposition from the catalog; a stratum the
    catalog names is a field of the benchmark's records; an unknown benchmark is an error."""
    from ltopd.bench.scoring.common import field
    from ltopd.bench.suites import synthetic_records
    from ltopd.stats import bootstrap

    for name, bench in catalog.BENCHMARKS.items():
        assert bench.bootstrap.unit in bootstrap.UNITS and bench.bootstrap.combine in bootstrap.COMBINE, name
        assert bootstrap.rule(name) is bench.bootstrap
        if bench.bootstrap.stratum:
            records = synthetic_records(name, 6, 0, {"image_size": 64})
            assert all(field(r, bench.bootstrap.stratum) is not None for r in records), name
    with pytest.raises(ValueError, match=r"unknown benchmark 'vstar2'; allowed values: \[.*'vstar'"):
        bootstrap.rule("vstar2")


def test_the_schema_and_the_evidence_styles_are_the_catalogs() -> None:
    """The schema's studies and evidence enums are filled from the catalog, and the evidence-first
    styles are exactly the benchmarks the catalog gives an evidence kind."""
    from ltopd import config
    from ltopd.bench.evidence import EVIDENCE, EVIDENCE_KINDS

    schema = config.schema()
    assert list(schema["properties"]["studies"]["properties"]) == catalog.tables_of_kind("study")
    assert schema["$defs"]["evidence_benchmark"]["enum"] == catalog.evidence_benchmarks() == list(EVIDENCE)
    assert {b.evidence for b in catalog.BENCHMARKS.values()} - {None} <= set(EVIDENCE_KINDS)
    raw = yaml.safe_load((ROOT / "src/ltopd/schemas/config.schema.yaml").read_text())
    assert raw["properties"]["studies"]["properties"] == {} and "enum" not in raw["$defs"]["evidence_benchmark"]


def test_each_table_declares_its_files_and_a_profile_builds_what_its_sections_ask() -> None:
    from ltopd import config, grid
    from ltopd.pipeline.study_jobs import STUDIES

    smoke = config.load(ROOT / "config/smoke.yaml")
    for name, table in catalog.TABLES.items():
        files = grid.table_outputs(smoke, name)
        assert list(files) == list(table.outputs) and "csv" in files, name
        assert table.is_figure == name.startswith("figure"), name  # the paper's naming
        if table.kind == "study" and table.is_figure:  # a figure has its own job; a study table may
            assert name in STUDIES, name
    assert grid.table_outputs(smoke, "table2") == {
        "csv": "runs/smoke/results/table2.csv", "md": "runs/smoke/results/table2.md",
        "json": "runs/smoke/results/table2.json", "figure": "runs/smoke/results/figures/table2_retain_vs_budget.png"}
    assert grid.table_outputs(smoke, "figure4") == {"csv": "runs/smoke/results/figure4.csv",
                                                    "figure": "runs/smoke/results/figures/figure4.png"}
    # smoke: Table 2, the one ablation table its grid fills (Table 7), its four studies, and with
    # its efficiency section Table 5, Figure 1 right and the Pareto figure
    assert grid.tables(smoke) == ["table2", "table7", "table4", "table6", "table14", "figure4", "table5",
                                  "figure1_right", "figure_pareto"]
    # without one, none of the measured three; the Pareto figure measures Table 2's backbone itself
    # (rule prefill_costs), whichever backbones Table 5 times
    assert grid.tables({k: v for k, v in smoke.items() if k != "efficiency"})[-1] == "figure4"
    other = {**smoke, "efficiency": {"methods": ["full"], "backbones": ["glm46v-tiny"]}}
    assert grid.tables(other)[-3:] == ["table5", "figure1_right", "figure_pareto"]
    assert grid.pareto_backbone(other) == smoke["grid"]["backbones"][0]
    with pytest.raises(ValueError, match="same outputs"):  # one rule cannot build a table and a figure
        grid.rule_outputs(smoke, ["table3", "figure4"])


# -- the recipe of docs/design.md ("Adding a name"), followed once ---------------------------------
# A fresh interpreter whose catalog has one more benchmark, ablation table, study table and study
# figure (and the figure's job in study_jobs.STUDIES), declared before anything reads the catalog:
# the schema, the bootstrap, the evidence styles, the grid's targets and Snakemake's rules all pick
# them up with no other edit. The new benchmark reuses GQA's generator and scorer (the two files a
# real one adds); the dry run plans the new tables' files through the generic rules.
RECIPE = r'''
import json, sys
from ltopd import catalog
from ltopd.catalog import Benchmark, Bootstrap, Table

catalog.BENCHMARKS["gqa2"] = Benchmark("gqa2", "GQA-2", 16, "gqa:synthetic", "gqa:score_gqa",
                                       Bootstrap(stratum="task", combine="size"), evidence="option")
catalog.TABLES["table99"] = Table("table99", "Table 99", "ablation", ("ltopd_teacher_ema", "ltopd"))
catalog.TABLES["table98"] = Table("table98", "Table 98", "study", ("full", catalog.STUDENT_SELECTOR, "ltopd"))
catalog.TABLES["figure98"] = Table("figure98", "Figure 98", "study", ("full", catalog.STUDENT_SELECTOR, "ltopd"),
                                   outputs=("csv", "figure"))
from ltopd.pipeline import study_jobs
study_jobs.STUDIES["figure98"] = study_jobs.figure4

import jsonschema
import yaml
from ltopd import config, grid
from ltopd.bench.evidence import EVIDENCE
from ltopd.bench.suites import SUITES
from ltopd.stats import bootstrap

profile = sys.argv[1]
cfg = config.load(profile)
bad = yaml.safe_load(open(profile))
bad["backbones"]["qwen35-tiny"]["evidence"] = ["gqa3"]
good = yaml.safe_load(open(profile))
good["backbones"]["qwen35-tiny"]["evidence"] = ["gqa2"]
schema = jsonschema.Draft202012Validator(config.schema())
rows = [{"id": str(i), "task": t, "answer": "red", "prediction": p}
        for i, (t, p) in enumerate([("color", "red"), ("color", "blue"), ("count", "red"), ("count", "red"),
                                    ("count", "red")])]
ci = bootstrap.paired_diff_ci(rows, [{**r, "prediction": "red"} for r in rows], "gqa2", n_boot=50)
print("RECIPE " + json.dumps({
    "evidence_enum": config.schema()["$defs"]["evidence_benchmark"]["enum"],
    "schema_errors_good": [e.message for e in schema.iter_errors(good)],
    "schema_errors_bad": [e.message for e in schema.iter_errors(bad)],
    "studies": grid.studies(cfg),
    "tables": grid.tables(cfg),
    "targets": [t for t in grid.targets(cfg) if "99" in t or "98" in t],
    "rule": list(bootstrap.rule("gqa2").__dict__.values()),
    "strata": int(bootstrap.design("gqa2", rows).strata.max()) + 1,
    "diff": ci.estimate,
    "evidence": "gqa2" in EVIDENCE, "suite": "gqa2" in SUITES,
}))
sys.stdout.flush()
from snakemake.cli import main
main(["-n", "--cores", "1", "--configfile", profile, "--", *sys.argv[2:]])
'''


def test_adding_a_benchmark_a_table_and_a_figure_touches_only_their_declarations(tmp_path: Path) -> None:
    import json
    import os
    import re
    import subprocess
    import sys

    from ltopd import config

    cfg = config.read(ROOT / "config/smoke.yaml")
    cfg["out_root"] = str(tmp_path / "out")
    cfg["mlflow"]["tracking_uri"] = f"sqlite:///{tmp_path / 'mlruns.db'}"
    cfg["studies"] |= {"table98": {}, "figure98": {"benchmarks": ["gqa2"]}}
    cfg["evaluation"]["benchmarks"]["gqa2"] = {"n": 4}
    profile = tmp_path / "recipe.yaml"
    profile.write_text(yaml.safe_dump(cfg))
    results = tmp_path / "out" / "results"
    wanted = [results / "table99.csv", results / "table98.md", results / "figure98.csv",
              results / "figures" / "figure98.png"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-c", RECIPE, str(profile), *map(str, wanted)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    found = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RECIPE "))[7:])
    assert found["evidence_enum"][-1] == "gqa2" and found["evidence"] and found["suite"]
    assert found["schema_errors_good"] == []
    assert found["schema_errors_bad"] == [f"'gqa3' is not one of {found['evidence_enum']}"]
    assert found["studies"] == ["table4", "table6", "table14", "figure4", "table98", "figure98"]
    assert found["tables"][-3:] == ["table99", "table98", "figure98"]
    assert sorted(found["targets"]) == sorted(str(results / f) for f in (
        "table99.csv", "table99.md", "table98.csv", "table98.md", "figure98.csv", "figures/figure98.png"))
    assert found["rule"] == ["row", "task", "size", False] and found["strata"] == 2
    assert found["diff"] == pytest.approx(-20.0)  # 4 of 5 right against 5 of 5: GQA's score in percent
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, re.M))
    assert {jobs.get(r) for r in ("ablation_table", "study_table", "study_figure")} == {"1"}, jobs
