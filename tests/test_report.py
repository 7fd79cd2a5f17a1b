"""Table 2's arithmetic (retain ratios, seeds) against hand-worked numbers, its files, and the
transcribed paper numbers against ../shared/paper/reported-numbers.md."""
from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import pytest

from ltopd.report import figures, table2
from ltopd.report.reported import paper_rows
from ltopd.report.retain import Stat, retain_ratio

ROOT = Path(__file__).resolve().parents[1]
REPORTED = ROOT.parent / "shared" / "paper" / "reported-numbers.md"
PAPER = REPORTED.parent / "paper.txt"


def test_retain_ratio_hand_worked() -> None:
    # (50/100 + 30/60 + 90/60) / 3 * 100 = (0.5 + 0.5 + 1.5) / 3 * 100 = 83.33
    value, used = retain_ratio({"a": 50, "b": 30, "c": 90}, {"a": 100, "b": 60, "c": 60}, ["a", "b", "c"])
    assert value == pytest.approx(250 / 3) and used == ["a", "b", "c"]


def test_retain_ratio_leaves_out_zero_full_scores() -> None:
    value, used = retain_ratio({"a": 50, "b": 0}, {"a": 100, "b": 0}, ["a", "b"])
    assert value == 50 and used == ["a"]
    value, used = retain_ratio({"a": 1}, {"a": 0}, ["a"])
    assert math.isnan(value) and used == []


def test_stat_mean_and_sample_sd() -> None:
    s = Stat.of([1.0, 2.0, 4.0])  # mean 7/3; sample var = ((4/3)^2 + (1/3)^2 + (5/3)^2) / 2 = 7/3
    assert s.mean == pytest.approx(7 / 3) and s.sd == pytest.approx(math.sqrt(7 / 3)) and s.n == 3
    assert Stat.of([5.0]) == Stat(5.0, 0.0, 1)
    assert Stat.of([]).n == 0


def _results() -> list[dict]:
    """Two seeds, two benchmarks; full scores differ per seed so retain uses each seed's own full."""
    full = {0: {"x": 80.0, "y": 40.0}, 1: {"x": 60.0, "y": 50.0}}
    pruned = {0: {"x": 40.0, "y": 40.0}, 1: {"x": 30.0, "y": 25.0}}
    out = []
    for seed in (0, 1):
        for b in ("x", "y"):
            out.append({"backbone": "bb", "method": "full", "budget": 1.0, "benchmark": b, "seed": seed,
                        "score": full[seed][b]})
            out.append({"backbone": "bb", "method": "cdpruner", "budget": 0.05, "benchmark": b, "seed": seed,
                        "score": pruned[seed][b]})
            out.append({"backbone": "bb", "method": "fastv", "budget": 0.1, "benchmark": b, "seed": seed,
                        "score": full[seed][b]})
    out.append({"backbone": "other", "method": "full", "budget": 1.0, "benchmark": "x", "seed": 0, "score": 1.0})
    return out


def test_rows_retain_per_seed_then_mean_and_sd() -> None:
    rows = table2.our_rows(_results(), "bb", ["x", "y"])
    assert [(r["method"], r["budget"]) for r in rows] == [("full", 1.0), ("fastv", 0.1), ("cdpruner", 0.05)]
    cdp = rows[2]
    # seed 0: (40/80 + 40/40) / 2 = 75; seed 1: (30/60 + 25/50) / 2 = 50 -> mean 62.5, sd 17.68
    assert cdp["avg_retain"].mean == pytest.approx(62.5)
    assert cdp["avg_retain"].sd == pytest.approx(math.sqrt(2 * 12.5**2))
    assert cdp["bench"]["x"].mean == 35.0 and rows[0]["avg_retain"].mean == 100.0


def test_build_marks_paper_rows_and_needs_full() -> None:
    rows, notes = table2.build(_results(), "bb", ["x", "y"])
    assert {r["source"] for r in rows} == {"ours", "paper"}
    assert any(r["source"] == "paper" and r["method"] == "ltopd" and r["avg_retain"].mean == 82.3 for r in rows)
    assert "seeds [0, 1]" in notes[0]
    with pytest.raises(ValueError, match="no full-token results for backbone 'nobody'"):
        table2.build(_results(), "nobody", ["x"])


def test_csv_markdown_and_figure(tmp_path) -> None:
    rows, notes = table2.build(_results(), "bb", ["x", "y"])
    parsed = list(csv.DictReader(io.StringIO(table2.to_csv(rows, ["x", "y"]))))
    ours = [r for r in parsed if r["source"] == "ours"]
    assert ours[2]["method"] == "cdpruner" and float(ours[2]["avg_retain"]) == 62.5
    assert float(ours[2]["avg_retain_sd"]) == pytest.approx(17.68, abs=0.01) and ours[2]["seeds"] == "2"
    assert ours[2]["retain_over"] == "x y"
    md = table2.to_markdown(rows, ["x", "y"], notes)
    assert "| ours | CDPruner | 5% | 35.0 ± 7.1 | 32.5 ± 10.6 | 62.5 ± 17.7 |" in md
    assert "| paper | LT-OPD | 5% |" in md
    figures.retain_vs_budget(rows, tmp_path / "f.png", "t")
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_zero_full_score_is_noted() -> None:
    res = [r for r in _results() if r["backbone"] == "bb"]
    for r in res:
        if r["benchmark"] == "y":
            r["score"] = 0.0
    rows, notes = table2.build(res, "bb", ["x", "y"])
    assert any("full-token score 0 on ['y']" in n for n in notes)
    assert next(r for r in rows if r["method"] == "cdpruner")["retain_over"] == ["x"]


def test_load_results_names_a_bad_file(tmp_path) -> None:
    (tmp_path / "m.json").write_text('{"score": 1}')
    with pytest.raises(ValueError, match=r"m\.json: not an evaluation metrics file"):
        table2.load_results([tmp_path / "m.json"])


def _reported_text(table: str) -> str:
    """The part of reported-numbers.md that quotes ``table``'s numbers."""
    text = REPORTED.read_text()
    lines = text.splitlines()
    if table == "table2":  # its section, plus the Appendix H line (the no-plateau ablation row)
        return text.split("## Table 2", 1)[1].split("## Other tables", 1)[0] + \
            next(l for l in lines if "Appendix H" in l)
    tag = {"table7": "- Table 7 ", "table12": "- Table 12 "}[table]
    i = next(i for i, l in enumerate(lines) if l.startswith(tag))
    return "\n".join([lines[i]] + [l for l in lines[i + 1:i + 3] if l.startswith("  ")])


@pytest.mark.skipif(not REPORTED.is_file(), reason="needs ../shared/paper/reported-numbers.md beside the repo")
@pytest.mark.parametrize("table", ["table2", "table7", "table12"])
def test_transcribed_paper_numbers_appear_in_reported_numbers(table) -> None:
    quoted = {float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*", _reported_text(table))}
    for row in paper_rows(table):
        for k, v in row.items():
            if k not in ("method", "budget", "backbone"):
                assert float(v) in quoted, f"{row['method']} {k}={v} not in reported-numbers.md {table}"


def test_ablation_table_keeps_full_and_its_methods() -> None:
    results = [dict(r, method=m) for r in _results() if r["method"] == "cdpruner"
               for m in ("ltopd", "ltopd_teacher_ema", "sft")] + [r for r in _results() if r["method"] == "full"]
    rows, _ = table2.build(results, "bb", ["x", "y"], table="table7",
                           methods=["ltopd", "ltopd_trust_region", "ltopd_teacher_ema"])
    assert [(r["source"], r["method"]) for r in rows] == [
        ("ours", "full"), ("ours", "ltopd"), ("ours", "ltopd_teacher_ema"),
        ("paper", "ltopd"), ("paper", "ltopd_trust_region"), ("paper", "ltopd_teacher_ema")]
    assert rows[1]["avg_retain"].mean == pytest.approx(62.5)  # the same arithmetic as Table 2's rows
    assert [r["avg_retain"].mean for r in rows[3:]] == [82.3, 81.5, 81.3]


NUM = r"(\d+(?:\.\d+)?)"


def _study_quotes() -> dict[tuple[str, str | None, str, str], float]:
    """{(table, backbone or None, method, key): value} read off the line of reported-numbers.md
    that quotes each number (Table 6's CDPruner from paper.txt Section 4.6, the only place it is
    stated for that table), so a number copied from the wrong line or model is caught."""
    lines = REPORTED.read_text().splitlines()

    def line(tag: str) -> str:
        i = next(i for i, l in enumerate(lines) if l.startswith(tag))
        return " ".join([lines[i]] + [l.strip() for l in lines[i + 1:i + 3] if l.startswith("  ")])

    def after(text: str, pattern: str) -> tuple[float, ...]:
        m = re.search(pattern, text)
        assert m, f"{pattern!r} not in {text!r}"
        return tuple(float(g) for g in m.groups())

    q: dict[tuple[str, str | None, str, str], float] = {}
    for table, tag, backbones in (("table3", "- Table 3 ", ("Qwen3.5-4B", "Qwen3.5-9B")),
                                  ("table4", "- Table 4 ", ("GLM-4.6V-9B", "LLaVA-OV-1.5-4B"))):
        for bb in backbones:  # "<backbone> <CDPruner> -> <LT-OPD>"
            cdp, lt = after(line(tag), re.escape(bb) + rf" {NUM} -> {NUM}")
            q[(table, bb, "cdpruner", "avg_retain")], q[(table, bb, "ltopd", "avg_retain")] = cdp, lt
    t6 = line("- Table 6 ")
    for label, method in (("GRPO", "grpo"), ("GSPO", "gspo"), ("DAPO", "dapo"), ("LT-OPD", "ltopd")):
        q[("table6", None, method, "avg_retain")], = after(t6, rf"\b{label} {NUM}")
    sec46 = next(p for p in PAPER.read_text().splitlines() if "As shown in Table 6" in p)
    q[("table6", None, "cdpruner", "avg_retain")], = after(sec46, rf"from {NUM}%")
    t14 = line("- Table 14 ")
    assert "(MuirBench, MVBench)" in t14  # the order of LT-OPD's two scores
    mb, mv, avg = after(t14, rf"LT-OPD {NUM} / {NUM}, Avg {NUM}")
    q.update({("table14", None, "ltopd", "muirbench"): mb, ("table14", None, "ltopd", "mvbench"): mv,
              ("table14", None, "ltopd", "avg_retain"): avg})
    q[("table14", None, "cdpruner", "avg_retain")], = after(t14, rf"CDPruner {NUM}")
    q[("table14", None, "epic", "avg_retain")], = after(t14, rf"EPIC {NUM}")
    t5 = line("- Table 5 ")
    for label, method, pattern in (("LT-OPD", "ltopd", rf"TFLOPs -> {NUM}x"),
                                   ("HiPrune", "hiprune", rf"HiPrune {NUM}x"), ("EPIC", "epic", rf"EPIC {NUM}x")):
        q[("figure1_right", None, method, "flops_ratio")], = after(t5, pattern)
        row = next(l for l in lines if re.match(rf"\| {re.escape(label)}[ (|]", l))  # Table 2's row
        q[("figure1_right", None, method, "avg_retain")], = after(row, rf"\| 5% \| {NUM} \|$")
    return q


@pytest.mark.skipif(not (REPORTED.is_file() and PAPER.is_file()), reason="needs ../shared/paper/ beside the repo")
def test_study_numbers_are_quoted_on_their_own_lines() -> None:
    quotes = _study_quotes()
    transcribed = {}
    for table in ("table3", "table4", "table6", "table14", "figure1_right"):
        for row in paper_rows(table):
            assert row["budget"] == 0.05, f"{table} {row}: every number quoted is at 5%"
            for k, v in row.items():
                if k not in ("method", "budget", "backbone"):
                    transcribed[(table, row.get("backbone"), row["method"], k)] = float(v)
    assert transcribed == quotes  # every quoted number transcribed, each from its own line and model


def test_reported_rows_honour_a_rows_own_backbone() -> None:
    rows = table2.reported_rows(["x"], "table4")
    assert [r["backbone"] for r in rows] == ["GLM-4.6V-9B"] * 2 + ["LLaVA-OV-1.5-4B"] * 2
    assert {r["backbone"] for r in table2.reported_rows(["x"], "table6")} == {"Qwen3.5-4B"}  # the table's
    assert {r["backbone"] for r in table2.reported_rows(["x"], "table14")} == {"Qwen3.5-4B"}  # the default
