"""Tables 3/4/6/14, Figure 4's recovery and Figure 1 right against hand-worked numbers, a
brute-force FLOPs count from the raw Qwen3.5-4B config, and the `ltopd study|figure1-right`
commands end to end on made-up metrics files."""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
from pathlib import Path

import pytest

from ltopd import grid
from ltopd.efficiency import table5
from ltopd.efficiency.analytic import TextArch
from ltopd.report import figures, grid_tables, studies

ROOT = Path(__file__).resolve().parents[2]
QWEN4B = ROOT / "config" / "models" / "qwen3_5_4b.json"
PNG = b"\x89PNG\r\n\x1a\n"


def _r(bb: str, method: str, budget: float, bench: str, seed: int, score: float) -> dict:
    return {"backbone": bb, "method": method, "budget": budget, "benchmark": bench, "seed": seed, "score": score}


def _cfg(**studies_section) -> dict:
    return {"profile": "test", "grid": {"backbones": ["b1"], "benchmarks": ["x", "y"], "budgets": [0.1, 0.05]},
            "seeds": [0, 1], "studies": studies_section, "training": {"selector": "cdpruner"}}


# -- Figure 4 -----------------------------------------------------------------------------------

def _recovery_results() -> list[dict]:
    res = [
        # a, seed 0: full 60, pruned 40: ltopd 50 -> 100*10/20 = 50; grpo 40 -> 0
        _r("b1", "full", 1.0, "a", 0, 60), _r("b1", "cdpruner", 0.05, "a", 0, 40),
        _r("b1", "ltopd", 0.05, "a", 0, 50), _r("b1", "grpo", 0.05, "a", 0, 40),
        # b, seed 0: full == pruned -> no gap, undefined
        _r("b1", "full", 1.0, "b", 0, 30), _r("b1", "cdpruner", 0.05, "b", 0, 30),
        _r("b1", "ltopd", 0.05, "b", 0, 35), _r("b1", "grpo", 0.05, "b", 0, 20),
        # c, two seeds: seed 0 100*(70-40)/(80-40) = 75; seed 1 100*(58-50)/(60-50) = 80
        _r("b1", "full", 1.0, "c", 0, 80), _r("b1", "cdpruner", 0.05, "c", 0, 40), _r("b1", "ltopd", 0.05, "c", 0, 70),
        _r("b1", "full", 1.0, "c", 1, 60), _r("b1", "cdpruner", 0.05, "c", 1, 50), _r("b1", "ltopd", 0.05, "c", 1, 58),
    ]
    # not the smallest budget: S_pruned and S_method are read at 5% only
    res += [_r("b1", "cdpruner", 0.1, "a", 0, 55), _r("b1", "ltopd", 0.1, "a", 0, 0)]
    res += [_r("other", "full", 1.0, "a", 0, 1)]  # a backbone outside the study
    return res


def test_recovery_hand_worked() -> None:
    cfg = _cfg(figure4={"benchmarks": ["a", "b", "c"]})
    rows, notes = studies.recovery(_recovery_results(), *grid.study_scope(cfg, "figure4"))
    cell = {(r["method"], r["benchmark"]): r for r in rows}
    assert sorted(cell) == [("grpo", "a"), ("grpo", "b"), ("ltopd", "a"), ("ltopd", "b"), ("ltopd", "c")]
    assert cell[("ltopd", "a")]["recovery"] == pytest.approx(50.0)
    assert cell[("grpo", "a")]["recovery"] == pytest.approx(0.0)
    assert (cell[("ltopd", "a")]["s_full"], cell[("ltopd", "a")]["s_pruned"], cell[("ltopd", "a")]["s_method"]) \
        == (60, 40, 50)
    c = cell[("ltopd", "c")]
    # mean (75 + 80) / 2 = 77.5; sample sd sqrt((2.5^2 + 2.5^2) / 1) = sqrt(12.5)
    assert c["recovery"] == pytest.approx(77.5) and c["recovery_sd"] == pytest.approx(math.sqrt(12.5))
    assert c["seeds"] == 2 and c["s_full"] == 70 and c["s_pruned"] == 45
    for m in ("ltopd", "grpo"):
        assert math.isnan(cell[(m, "b")]["recovery"]) and cell[(m, "b")]["seeds"] == 0
        assert "no gap to recover" in cell[(m, "b")]["note"]
    assert any("no gap to recover: pruning did not lower the score" in n and "b1 b (seeds [0])" in n for n in notes)
    assert not any(" a (" in n or " c (" in n for n in notes)  # only the gap-less benchmark is named

    parsed = list(csv.DictReader(io.StringIO(studies.recovery_csv(rows))))
    assert list(parsed[0]) == ["backbone", "method", "benchmark", "s_full", "s_pruned", "s_method", "recovery",
                               "recovery_sd", "seeds", "note"]
    undefined = next(p for p in parsed if p["method"] == "ltopd" and p["benchmark"] == "b")
    assert undefined["recovery"] == "" and undefined["recovery_sd"] == ""
    assert next(p for p in parsed if p["benchmark"] == "c")["recovery"] == "77.50"


def test_recovery_negative_gap_is_undefined_too() -> None:
    res = [_r("b1", "full", 1.0, "a", 0, 30), _r("b1", "cdpruner", 0.05, "a", 0, 35),
           _r("b1", "dapo", 0.05, "a", 0, 40)]
    rows, notes = studies.recovery(res, *grid.study_scope(_cfg(figure4={"benchmarks": ["a"]}), "figure4"))
    assert len(rows) == 1 and math.isnan(rows[0]["recovery"]) and len(notes) == 2


def test_recovery_figure_written(tmp_path) -> None:
    cfg = _cfg(figure4={"benchmarks": ["a", "b", "c"]})
    rows, notes = studies.recovery(_recovery_results(), *grid.study_scope(cfg, "figure4"))
    figures.recovery_bars(rows, tmp_path / "f4.png", "Figure 4\npaper: ...", notes)
    assert (tmp_path / "f4.png").read_bytes()[:8] == PNG
    figures.recovery_bars([], tmp_path / "empty.png", "no rows")  # a grid without results still plots
    assert (tmp_path / "empty.png").stat().st_size > 0


# -- Tables 3, 4, 6, 14 -------------------------------------------------------------------------

def _two_backbones() -> list[dict]:
    scores = {  # (backbone, method, budget): (x, y)
        ("b1", "full", 1.0): (80, 40), ("b1", "cdpruner", 0.05): (40, 20), ("b1", "ltopd", 0.05): (60, 40),
        ("b2", "full", 1.0): (50, 100), ("b2", "cdpruner", 0.05): (25, 100), ("b2", "ltopd", 0.05): (45, 90),
        ("b1", "grpo", 0.05): (80, 40),       # not a method of Table 3
        ("b1", "cdpruner", 0.1): (80, 40),    # not the table's budget
    }
    return [_r(bb, m, b, bench, 0, s[i]) for (bb, m, b), s in scores.items() for i, bench in enumerate(("x", "y"))]


def test_study_rows_each_backbone_against_its_own_full() -> None:
    cfg = _cfg(table3={"backbones": ["b1", "b2"]})
    rows, notes = studies.build_study(_two_backbones(), "table3", *grid.study_scope(cfg, "table3"))
    ours = [(r["backbone"], r["method"], r["budget"], r["avg_retain"].mean) for r in rows if r["source"] == "ours"]
    # b1: cdpruner (40/80 + 20/40)/2 = 50, ltopd (60/80 + 40/40)/2 = 87.5
    # b2: cdpruner (25/50 + 100/100)/2 = 75, ltopd (45/50 + 90/100)/2 = 90 (against b1's full: 78.1)
    assert ours == [("b1", "full", 1.0, 100.0), ("b1", "cdpruner", 0.05, 50.0), ("b1", "ltopd", 0.05, 87.5),
                    ("b2", "full", 1.0, 100.0), ("b2", "cdpruner", 0.05, 75.0), ("b2", "ltopd", 0.05, 90.0)]
    paper = [(r["backbone"], r["method"], r["avg_retain"].mean) for r in rows if r["source"] == "paper"]
    assert paper == [("Qwen3.5-4B", "cdpruner", 68.6), ("Qwen3.5-4B", "ltopd", 82.3),
                     ("Qwen3.5-9B", "cdpruner", 71.1), ("Qwen3.5-9B", "ltopd", 81.4)]
    assert notes[0].startswith("ours: backbone b1, seeds [0]") and notes[-1].startswith("paper: Qwen3.5-4B, Qwen3.5-9B")

    md = studies.study_markdown(rows, ["x", "y"], notes)
    assert md.splitlines()[0] == "|  | Backbone | Method | Budget | x | y | Avg. retain (%) |"
    assert "| ours | b2 | LT-OPD | 5% | 45.0 | 90.0 | 90.0 |" in md
    assert "| paper | Qwen3.5-9B | CDPruner | 5% |  |  | 71.1 |" in md
    parsed = list(csv.DictReader(io.StringIO(grid_tables.to_csv(rows, ["x", "y"]))))
    assert [(p["backbone"], p["method"], p["avg_retain"]) for p in parsed][4:6] == [
        ("b2", "cdpruner", "75.00"), ("b2", "ltopd", "90.00")]


def test_study_defaults_order_and_missing_methods() -> None:
    # table6 on the grid's first backbone: rows in the paper's order; gspo/dapo missing -> noted
    res = [dict(r, method=m) for r in _two_backbones() if r["backbone"] == "b1" and r["method"] == "cdpruner"
           and r["budget"] == 0.05 for m in ("cdpruner", "dapo", "grpo", "ltopd")]
    res += [r for r in _two_backbones() if r["backbone"] == "b1" and r["method"] == "full"]
    rows, notes = studies.build_study(res, "table6", *grid.study_scope(_cfg(table6={}), "table6"))
    assert [r["method"] for r in rows if r["source"] == "ours"] == ["full", "cdpruner", "grpo", "dapo", "ltopd"]
    assert [(r["method"], r["avg_retain"].mean) for r in rows if r["source"] == "paper"] == [
        ("cdpruner", 68.6), ("grpo", 75.8), ("gspo", 76.8), ("dapo", 78.2), ("ltopd", 82.3)]
    assert any("no results for ['gspo']" in n for n in notes)
    assert "| ours | b1 | GRPO | 5% |" in studies.study_markdown(rows, ["x", "y"], notes)


def test_table14_uses_the_study_benchmarks_and_needs_full() -> None:
    res = [_r("b1", m, b, bench, 0, s) for m, b, s in (("full", 1.0, 50), ("cdpruner", 0.05, 20), ("epic", 0.05, 30),
                                                          ("ltopd", 0.05, 40)) for bench in ("muirbench", "mvbench")]
    cfg = _cfg(table14={"benchmarks": ["muirbench", "mvbench"]})
    rows, _ = studies.build_study(res, "table14", *grid.study_scope(cfg, "table14"))
    assert [(r["method"], r["avg_retain"].mean) for r in rows if r["source"] == "ours"] == [
        ("full", 100.0), ("cdpruner", 40.0), ("epic", 60.0), ("ltopd", 80.0)]
    lt = next(r for r in rows if r["source"] == "paper" and r["method"] == "ltopd")
    assert (lt["bench"]["muirbench"].mean, lt["bench"]["mvbench"].mean, lt["avg_retain"].mean) == (52.0, 55.6, 78.3)
    with pytest.raises(ValueError, match="no full-token results for backbone 'b1'"):
        studies.build_study([r for r in res if r["method"] != "full"], "table14", *grid.study_scope(cfg, "table14"))


# -- Figure 1 right -----------------------------------------------------------------------------

def _brute_force_flops(tokens: float) -> float:
    """Prefill FLOPs of Qwen3.5-4B straight from its config's numbers (analytic.py's counting
    conventions: 2 FLOPs per MAC, causal attention, lm_head on the last position)."""
    t = json.loads(QWEN4B.read_text())["text_config"]
    H, inter, vocab = t["hidden_size"], t["intermediate_size"], t["vocab_size"]
    heads, kv, hd = t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
    kh, vh, kd, vd, kern = (t["linear_num_key_heads"], t["linear_num_value_heads"], t["linear_key_head_dim"],
                            t["linear_value_head_dim"], t["linear_conv_kernel_dim"])
    macs = 0.0
    for kind in t["layer_types"]:
        macs += tokens * 3 * H * inter  # gate, up, down
        if kind == "full_attention":
            macs += tokens * (H * 2 * heads * hd + H * 2 * kv * hd + heads * hd * H)  # gated q, k, v, o
            macs += 2 * heads * hd * tokens * (tokens + 1) / 2  # causal scores + weighted values
        else:
            conv = 2 * kh * kd + vh * vd
            macs += tokens * (H * (conv + vh * vd + 2 * vh) + vh * vd * H + conv * kern)  # qkv, z, b, a, out, conv
            macs += tokens * 3.5 * vh * kd * vd  # gated delta rule
    return 2 * (macs + H * vocab)


def test_flops_vs_retain_matches_brute_force_and_table5() -> None:
    arch = TextArch.from_file(QWEN4B)
    n_text, n_visual, floor = studies.protocol_tokens(arch)
    assert floor == 32 and n_text + n_visual == pytest.approx(
        next(r for r in table5.analytic_rows(arch, "cdpruner") if r["method"] == "full")["prefill_tokens"])
    t2, _ = grid_tables.build([
        _r("bb", "full", 1.0, "x", 0, 80), _r("bb", "cdpruner", 0.05, "x", 0, 40),
        _r("bb", "cdpruner", 0.1, "x", 0, 60), _r("bb", "epic", 0.05, "x", 0, 70),
        _r("bb", "blind", 1.0, "x", 0, 20)], "bb", ["x"], pruned="cdpruner")
    rows = studies.flops_vs_retain(t2, arch, floor, n_visual, n_text)
    ours = {(r["method"], r["budget"]): r for r in rows if r["source"] == "ours"}
    assert ("blind", 1.0) not in ours  # no image tokens: a baseline, not a point of the trade
    assert ours[("full", 1.0)]["flops_ratio"] == 1.0 and ours[("full", 1.0)]["avg_retain"] == 100.0
    full = _brute_force_flops(n_text + n_visual)
    # keep = min(n, max(32, ceil(n * budget))) of n = round(728.53) = 729 visual tokens: 37 at 5%, 73 at 10%
    for budget, kept in ((0.05, 37), (0.1, 73)):
        r = ours[("cdpruner", budget)]
        assert r["kept_tokens"] == kept
        assert r["flops_ratio"] == pytest.approx(_brute_force_flops(n_text + kept) / full, rel=1e-12)
    assert ours[("cdpruner", 0.05)]["avg_retain"] == 50.0 and ours[("cdpruner", 0.1)]["avg_retain"] == 75.0
    ana = next(r for r in table5.analytic_rows(arch, "cdpruner") if r["method"] == "ltopd")
    assert ours[("cdpruner", 0.05)]["flops_ratio"] == pytest.approx(ana["flops_ratio"], rel=1e-12)
    assert ours[("cdpruner", 0.05)]["flops_ratio"] == pytest.approx(0.146, abs=0.002)  # the paper's 0.146x
    # our EPIC prunes before the LM: the same ratio as every method at 5%, with a note saying so
    assert ours[("epic", 0.05)]["flops_ratio"] == ours[("cdpruner", 0.05)]["flops_ratio"]
    assert "prunes at LM layer 2" in ours[("epic", 0.05)]["note"] and ours[("cdpruner", 0.05)]["note"] == ""
    paper = [(r["method"], r["flops_ratio"], r["avg_retain"]) for r in rows if r["source"] == "paper"]
    assert paper == [("ltopd", 0.146, 82.3), ("hiprune", 0.146, 60.4), ("epic", 0.2, 73.7)]
    parsed = list(csv.DictReader(io.StringIO(studies.flops_csv(rows))))
    assert list(parsed[0]) == list(studies.FLOPS_COLUMNS)
    assert [p["source"] for p in parsed].count("paper") == 3 and parsed[0]["flops_ratio"] == "1.0000"


def test_flops_figure_written(tmp_path) -> None:
    arch = TextArch.from_file(QWEN4B)
    n_text, n_visual, floor = studies.protocol_tokens(arch)
    t2, _ = grid_tables.build([_r("bb", m, b, "x", s, v) for m, b, v in (("full", 1.0, 80), ("cdpruner", 0.05, 40))
                               for s in (0, 1)], "bb", ["x"], pruned="cdpruner")
    rows = studies.flops_vs_retain(t2, arch, floor, n_visual, n_text)
    figures.flops_retain_scatter(rows, tmp_path / "f1.png", "Figure 1 right", "a note")
    assert (tmp_path / "f1.png").read_bytes()[:8] == PNG


# -- CLI ----------------------------------------------------------------------------------------

def _parse(argv: list[str]) -> argparse.Namespace:
    from ltopd.pipeline import study_jobs as report_cli

    p = argparse.ArgumentParser()
    report_cli.add_parser(p.add_subparsers(dest="cmd", required=True))
    return p.parse_args(argv)


def _write_metrics(folder: Path, results: list[dict]) -> list[str]:
    files = []
    for i, r in enumerate(results):
        f = folder / f"m{i}" / "metrics.json"
        f.parent.mkdir(parents=True)
        f.write_text(json.dumps({**r, "n": 10}))
        files.append(str(f))
    return files


@pytest.fixture
def mlflow_env(tmp_path, monkeypatch) -> None:
    """What the Snakefile exports to jobs (tracking.Settings.export)."""
    env = {"TRACKING_URI": f"sqlite:///{tmp_path / 'mlruns.db'}", "EXPERIMENT": "t",
           "ARTIFACT_ROOT": str(tmp_path / "artifacts"), "PARENT_FILE": str(tmp_path / "none.json"), "PROFILE": "test"}
    for k, v in env.items():
        monkeypatch.setenv(f"LTOPD_MLFLOW_{k}", v)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env["TRACKING_URI"])


def test_cli_study_figure4_figure1_right(tmp_path, mlflow_env, capsys) -> None:
    from ltopd.pipeline import study_jobs as report_cli

    spec = {"profile": "test", "grid": {"backbones": ["b1"], "benchmarks": ["x", "y"], "budgets": [0.1, 0.05]},
            "seeds": [0], "studies": {"table3": {"backbones": ["b1", "b2"]},
                                      "figure4": {"benchmarks": ["a", "b", "c"]}},
            "efficiency": {"analytic_config": str(QWEN4B)}, "training": {"selector": "cdpruner"}}
    files = _write_metrics(tmp_path / "t3", _two_backbones())
    out, md = tmp_path / "res" / "table3.csv", tmp_path / "res" / "table3.md"
    args = _parse(["study", "--study", "table3", "--spec", json.dumps(spec), "--results", *files,
                   "--out", str(out), "--markdown", str(md), "--rule", "study"])
    assert report_cli.run(args) == 0
    text = md.read_text()
    assert text.startswith("# Table 3: model scales (test profile)\n\n|  | Backbone | Method |")
    assert "| ours | b1 | LT-OPD | 5% | 60.0 | 40.0 | 87.5 |" in text
    rows = list(csv.DictReader(out.open()))
    assert [(r["source"], r["backbone"], r["method"]) for r in rows][:3] == [
        ("ours", "b1", "full"), ("ours", "b1", "cdpruner"), ("ours", "b1", "ltopd")]

    files = _write_metrics(tmp_path / "f4", _recovery_results())
    out, png = tmp_path / "res" / "figure4.csv", tmp_path / "res" / "figures" / "figure4.png"
    with pytest.raises(SystemExit, match="give --figure"):  # a study figure writes its plot
        report_cli.run(_parse(["study", "--study", "figure4", "--spec", json.dumps(spec), "--results", *files,
                               "--out", str(out)]))
    assert report_cli.run(_parse(["study", "--study", "figure4", "--spec", json.dumps(spec), "--results", *files,
                                  "--out", str(out), "--figure", str(png)])) == 0
    rec = {(r["method"], r["benchmark"]): r for r in csv.DictReader(out.open())}
    assert rec[("ltopd", "a")]["recovery"] == "50.00" and rec[("ltopd", "b")]["recovery"] == ""
    assert png.read_bytes()[:8] == PNG
    assert "no gap to recover" in capsys.readouterr().out

    files = _write_metrics(tmp_path / "f1", [r for r in _two_backbones() if r["backbone"] == "b1"])
    out, png = tmp_path / "res" / "figure1_right.csv", tmp_path / "res" / "figures" / "figure1_right.png"
    assert report_cli.run(_parse(["figure1-right", "--spec", json.dumps(spec), "--results", *files,
                                  "--out", str(out), "--figure", str(png)])) == 0
    pts = {(r["source"], r["method"], r["budget"]): r for r in csv.DictReader(out.open())}
    # Table 2's rows of b1: every method and budget, grpo included (ours), then the paper's three
    assert sorted(k for k in pts if k[0] == "ours") == [
        ("ours", "cdpruner", "0.05"), ("ours", "cdpruner", "0.1"), ("ours", "full", "1"),
        ("ours", "grpo", "0.05"), ("ours", "ltopd", "0.05")]
    assert float(pts[("ours", "ltopd", "0.05")]["flops_ratio"]) == pytest.approx(0.1471, abs=1e-4)
    assert pts[("ours", "ltopd", "0.05")]["avg_retain"] == "87.50"
    assert pts[("paper", "epic", "0.05")]["flops_ratio"] == "0.2000" and png.stat().st_size > 0


def test_figure4_and_the_studies_of_a_profile_training_with_divprune_compare_against_divprune(
        tmp_path, mlflow_env) -> None:
    """S_pruned (Figure 4) and the studies' untrained-student row are training.selector's
    evaluations: DivPrune's here, CDPruner's only where the profile trains with CDPruner."""
    from conftest import local_profile
    from ltopd.cli import main

    profile, _ = local_profile(tmp_path, selector="divprune")
    # vstar, seed 0: recovery 100 (50 - 40) / (60 - 40) = 50 against DivPrune (75 against CDPruner)
    res = [_r("qwen35-tiny", m, b, bench, 0, s) for m, b, s in (
        ("full", 1.0, 60), ("cdpruner", 0.05, 20), ("divprune", 0.05, 40), ("ltopd", 0.05, 50))
        for bench in ("vstar", "pope")]
    files = _write_metrics(tmp_path / "m", res)
    out = tmp_path / "figure4.csv"
    assert main(["study", "--study", "figure4", "--config", str(profile), "--results", *files, "--out", str(out),
                 "--figure", str(tmp_path / "figure4.png")]) == 0
    rec = {(r["method"], r["benchmark"]): r for r in csv.DictReader(out.open())}
    assert (rec[("ltopd", "vstar")]["s_pruned"], rec[("ltopd", "vstar")]["recovery"]) == ("40.00", "50.00")
    out = tmp_path / "table6.csv"
    assert main(["study", "--study", "table6", "--config", str(profile), "--results", *files, "--out", str(out),
                 "--markdown", str(tmp_path / "table6.md")]) == 0
    assert [r["method"] for r in csv.DictReader(out.open()) if r["source"] == "ours"] == ["full", "divprune", "ltopd"]
    assert "DivPrune" in (tmp_path / "table6.md").read_text()
