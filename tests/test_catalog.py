"""The catalog (ltopd.catalog) is the one place names are declared: every name a profile uses
resolves in it, and every registry of implementations covers exactly its names."""
from __future__ import annotations

from pathlib import Path

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
        assert set(table.methods) <= set(catalog.METHODS), table.name
        assert bool(table.methods) == (table.kind in ("ablation", "study")), table.name
    schema = yaml.safe_load((ROOT / "src/ltopd/schemas/config.schema.yaml").read_text())
    assert list(schema["properties"]["studies"]["properties"]) == catalog.tables_of_kind("study")


def test_lookups_name_the_allowed_values() -> None:
    assert catalog.method("ltopd").label == "LT-OPD"
    with pytest.raises(ValueError, match="allowed values: .*'ltopd'"):
        catalog.method("lt-opd")
    with pytest.raises(ValueError, match="allowed values: .*'gqa'"):
        catalog.benchmark("GQA")
    with pytest.raises(ValueError, match="declared twice"):
        catalog._index(catalog.METHODS["full"], catalog.METHODS["full"])
