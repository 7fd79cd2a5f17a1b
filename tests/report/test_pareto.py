"""Retain vs measured cost and its Pareto front (ltopd.report.pareto), worked out by hand and
against a brute-force reference."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest
from PIL import Image

from ltopd.report import pareto


def test_dominated_by_hand():
    #            A (1, 50)  B (2, 60)  C (2, 55): B same cost, more retain   D (3, 60): B cheaper, same retain
    #            E (0.5, 40): cheapest   F (1, 50): A's twin, neither strictly better
    points = [(1, 50), (2, 60), (2, 55), (3, 60), (0.5, 40), (1, 50)]
    assert pareto.dominated(points) == [False, False, True, True, False, False]
    assert pareto.dominated([]) == [] and pareto.dominated([(1, 1)]) == [False]


def _brute_force(points):
    """The definition, pair by pair."""
    return [any(c2 <= c and r2 >= r and (c2 < c or r2 > r) for j, (c2, r2) in enumerate(points) if j != i)
            for i, (c, r) in enumerate(points)]


@pytest.mark.parametrize("seed", range(200))
def test_dominated_equals_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randint(0, 30)
    # few distinct values so that ties in cost, in retain and in both occur often
    points = [(rng.choice([0.5, 1, 2, 2.5, 3]), rng.choice([40, 50.5, 60, 70])) for _ in range(n)]
    if seed % 2:
        points = [(rng.uniform(0, 10), rng.uniform(0, 100)) for _ in range(n)]
    assert pareto.dominated(points) == _brute_force(points)


RETAIN = {("full", 1.0): 100.0, ("cdpruner", 0.05): 60.0, ("hiprune", 0.05): 55.0, ("fastv", 0.1): 70.0,
          ("ltopd", 0.05): 80.0}
MEASURED = {"backbone": "bb", "device": "cpu", "clock": "cpu", "repeats": 3, "rows": [
    {"method": "full", "budget": 1.0, "computation": "all tokens", "prefill_ms": 10.0, "kv_bytes": 1000.0},
    {"method": "cdpruner", "budget": 0.05, "computation": "cdpruner keeps 0.05", "prefill_ms": 4.0, "kv_bytes": 100.0},
    {"method": "hiprune", "budget": 0.05, "computation": "hiprune keeps 0.05", "prefill_ms": 5.0, "kv_bytes": 90.0},
    {"method": "ltopd", "budget": 0.05, "computation": "cdpruner keeps 0.05", "prefill_ms": 4.0, "kv_bytes": 100.0},
    {"method": "random", "budget": 0.05, "computation": "random keeps 0.05", "prefill_ms": 1.0, "kv_bytes": 1.0},
]}  # random has no Table 2 row here: not placed


def test_rows_join_table2_and_measurements_by_hand():
    """Prefill: LT-OPD (4 ms, 80) shares CDPruner's cost and retains more, so CDPruner (4 ms, 60)
    and HiPrune (5 ms, 55) are dominated; full tokens (10 ms, 100) and LT-OPD are the front. KV:
    HiPrune's 90 B is the cheapest, so it is on the front there; CDPruner still is not. FastV at
    10% has no measurement: listed as missing."""
    placed, missing = pareto.rows(RETAIN, MEASURED)
    got = {(r["method"], r["budget"]): (r["dominated_prefill_ms"], r["dominated_kv_bytes"]) for r in placed}
    assert got == {("full", 1.0): (False, False), ("cdpruner", 0.05): (True, True),
                   ("hiprune", 0.05): (True, False), ("ltopd", 0.05): (False, False)}
    assert missing == ["fastv@0.1"]
    assert pareto.shared_costs(placed) == ["CDPruner 5%, LT-OPD 5%: cdpruner keeps 0.05"]


def test_files_from_table2_csv_and_a_measurement(tmp_path):
    table2 = tmp_path / "table2.csv"
    lines = ["source,backbone,method,budget,avg_retain"] + [f"ours,bb,{m},{b:g},{v}" for (m, b), v in RETAIN.items()]
    table2.write_text("\n".join(lines + ["paper,q,ltopd,0.05,82.3", "ours,bb,blind,1,"]) + "\n")
    measurement = tmp_path / "bb.json"
    measurement.write_text(json.dumps(MEASURED))
    retain = pareto.read_retain(table2)
    assert retain == RETAIN  # ours only, rows without a retain ratio left out
    placed, missing = pareto.rows(retain, pareto.load_measurement(measurement))
    parsed = list(csv.DictReader(io.StringIO(pareto.to_csv(placed))))
    assert [(r["method"], r["computation"], r["dominated_prefill_ms"]) for r in parsed] == [
        ("full", "all tokens", "False"), ("cdpruner", "cdpruner keeps 0.05", "True"),
        ("hiprune", "hiprune keeps 0.05", "True"), ("ltopd", "cdpruner keeps 0.05", "False")]
    pareto.figure(placed, missing, tmp_path / "f.png", "t")
    assert Image.open(tmp_path / "f.png").size == (1430, 616)
    # rows at one point (same cost, same retain) are both on the front, and drawn
    tied, _ = pareto.rows({k: 100.0 for k in RETAIN}, MEASURED)
    assert [r["dominated_prefill_ms"] for r in tied if r["method"] in ("cdpruner", "ltopd")] == [False, False]
    pareto.figure(tied, [], tmp_path / "tied.png", "t")
    assert Image.open(tmp_path / "tied.png").size == (1430, 616)
    (tmp_path / "old.json").write_text(json.dumps({"backbone": "bb", "results": []}))
    with pytest.raises(ValueError, match="not a `ltopd prefill-costs` output"):
        pareto.load_measurement(tmp_path / "old.json")
