"""Retain vs measured cost and its Pareto front (ltopd.report.pareto), worked out by hand."""

from __future__ import annotations

import csv
import io
import json

from PIL import Image

from ltopd.report import pareto


def test_dominated_by_hand():
    #            A (1, 50)  B (2, 60)  C (2, 55): B same cost, more retain   D (3, 60): B cheaper, same retain
    #            E (0.5, 40): cheapest   F (1, 50): A's twin, neither strictly better
    points = [(1, 50), (2, 60), (2, 55), (3, 60), (0.5, 40), (1, 50)]
    assert pareto.dominated(points) == [False, False, True, True, False, False]
    assert pareto.dominated([]) == [] and pareto.dominated([(1, 1)]) == [False]


RETAIN = {("full", 1.0): 100.0, ("cdpruner", 0.05): 60.0, ("hiprune", 0.05): 55.0, ("fastv", 0.1): 70.0}
MEASURED = {"backbone": "bb", "device": "cpu", "results": [
    {"method": "full", "ratio": 1.0, "latency_ms": 10.0, "kv_bytes": 1000.0},
    {"method": "cdpruner", "ratio": 0.05, "latency_ms": 4.0, "kv_bytes": 100.0},
    {"method": "hiprune", "ratio": 0.05, "latency_ms": 5.0, "kv_bytes": 90.0},
    {"method": "ltopd", "ratio": 0.05, "latency_ms": 4.0, "kv_bytes": 100.0},  # no Table 2 row: not placed
]}


def test_rows_join_table2_and_measurements_by_hand():
    """Latency: HiPrune (5 ms, 55) is dominated by CDPruner (4 ms, 60); full tokens (10 ms, 100)
    and CDPruner are the front. KV: HiPrune's 90 B is the cheapest, so nothing is dominated.
    FastV at 10% has no measurement: listed as missing."""
    placed, missing = pareto.rows(RETAIN, MEASURED)
    got = {(r["method"], r["budget"]): (r["dominated_latency_ms"], r["dominated_kv_bytes"]) for r in placed}
    assert got == {("full", 1.0): (False, False), ("cdpruner", 0.05): (False, False),
                   ("hiprune", 0.05): (True, False)}
    assert missing == ["fastv@0.1"]


def test_files_from_table2_csv_and_a_measurement(tmp_path):
    table2 = tmp_path / "table2.csv"
    lines = ["source,backbone,method,budget,avg_retain"] + [f"ours,bb,{m},{b:g},{v}" for (m, b), v in RETAIN.items()]
    table2.write_text("\n".join(lines + ["paper,q,ltopd,0.05,82.3", "ours,bb,blind,1,"]) + "\n")
    measurement = tmp_path / "bb.json"
    measurement.write_text(json.dumps(MEASURED))
    retain = pareto.read_table2(table2)
    assert retain == RETAIN  # ours only, rows without a retain ratio left out
    placed, missing = pareto.rows(retain, pareto.load_measurement(measurement))
    parsed = list(csv.DictReader(io.StringIO(pareto.to_csv(placed))))
    assert [(r["method"], r["dominated_latency_ms"]) for r in parsed] == [
        ("full", "False"), ("cdpruner", "False"), ("hiprune", "True")]
    pareto.figure(placed, missing, tmp_path / "f.png", "t")
    assert Image.open(tmp_path / "f.png").size == (1320, 624)
