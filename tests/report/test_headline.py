"""Table 2's headline: gates, the order at the smallest budget, LT-OPD - CDPruner, the paper's
contradicted ranks, in at most twelve lines (issue 55: the headline was the 11th note)."""
from __future__ import annotations

import json
import math

from ltopd.report.headline import MAX_LINES, against_paper, dvc_numbers, headline, lines, markdown, summary_lines
from ltopd.report.retain import Stat
from ltopd.stats.bootstrap import Interval


def _ours(method, budget, retain, lo=None, hi=None):
    ci = Interval(retain, lo, hi, 1.0) if lo is not None else None
    return {"source": "ours", "method": method, "budget": budget, "avg_retain": Stat(retain, 0.0, 1),
            "avg_retain_ci": ci, "bench": {}}


def _paper(method, retain):
    return {"source": "paper", "method": method, "budget": 0.05, "avg_retain": Stat(retain, math.nan, 1), "bench": {}}


ROWS = [
    _ours("full", 1.0, 100.0),
    {"source": "gate", "method": "gate", "budget": None, "avg_retain": None, "retain_over": ["vstar", "pope"],
     "bench": {"vstar": Stat(10.2, math.nan, 1), "pope": Stat(5.4, math.nan, 1), "mme": Stat(-2.0, math.nan, 1)},
     "differences": {"LT-OPD - CDPruner": {"estimate": 1.3, "lo": -0.5, "hi": 2.9, "seeds": [0, 1, 2],
                                           "capped": 1.0, "capped_lo": -0.7, "capped_hi": 2.5}}},
    _ours("fastv", 0.05, 80.3, 77.0, 83.1), _ours("ltopd", 0.05, 63.0, 61.0, 65.0),
    _ours("cdpruner", 0.05, 61.7, 59.6, 64.2), _ours("divprune", 0.05, 55.0, 52.0, 58.0),
    _ours("cdpruner", 0.1, 70.0, 68.0, 72.0),
    _paper("fastv", 59.0), _paper("cdpruner", 68.6), _paper("divprune", 77.6), _paper("ltopd", 82.3),
]


def test_the_headline_by_hand():
    h = headline(ROWS)
    assert h["budget"] == 0.05 and h["passed"] == ["vstar", "pope"] and h["failed"] == ["mme"]
    assert [e["method"] for e in h["order"]] == ["fastv", "ltopd", "cdpruner", "divprune"]
    # ranks among the four both report: ours fastv 1, ltopd 2, cdpruner 3, divprune 4; the paper's
    # ltopd 1, divprune 2, cdpruner 3, fastv 4: fastv 3 apart (>= 4 / 2) and divprune 2 apart (>= 2)
    assert [(f["method"], f["rank"], f["paper_rank"], f["of"]) for f in h["flagged"]] == [
        ("fastv", 1, 4, 4), ("divprune", 4, 2, 4)]
    text = lines(h, {"Table": "results/table2.md"})
    assert text[0] == "Gates: 2 of 3 benchmarks pass (V*Bench, POPE); fail: MME."
    assert text[1].startswith("At 5% (average retain, 95% CI): FastV 80.3 [77.0, 83.1]; LT-OPD 63.0 [61.0, 65.0]")
    assert text[2] == ("LT-OPD - CDPruner at 5%: +1.3 retain points [-0.5, 2.9], not resolved: the interval holds 0; "
                       "each benchmark capped at 100%: +1.0 [-0.7, 2.5].")
    assert text[3] == "Contradicts the paper: FastV ranks 1st of 4 here (80.3) but 4th in the paper (59.0)."
    assert text[-1] == "Table: results/table2.md" and len(text) <= MAX_LINES
    assert markdown(text).startswith("**Headline**\n\n- Gates: 2 of 3")
    assert dvc_numbers(h) == {"gates_passed": 2, "gates_of": 3, "ltopd_minus_pruned": 1.3, "ci_lo": -0.5,
                              "ci_hi": 2.9, "contradicted": 2}


def test_no_flags_when_the_order_agrees_or_too_few_methods_are_shared():
    same = [{"method": m, "retain": r} for m, r in (("ltopd", 80.0), ("divprune", 70.0), ("cdpruner", 60.0))]
    paper = [_paper("ltopd", 82.3), _paper("divprune", 77.6), _paper("cdpruner", 68.6)]
    assert against_paper(same, paper) == []
    assert against_paper(same[:2], paper) == []  # two shared methods: no field to rank in


def test_the_plugin_reads_the_lines_back(tmp_path):
    path = tmp_path / "table2.json"
    path.write_text(json.dumps({"headline": {"gates_passed": 2, "summary": ["a", "b"]}}))
    assert summary_lines(path) == ["a", "b"]
    assert summary_lines(tmp_path / "missing.json") == []


def test_a_tie_within_the_intervals_contradicts_nothing():
    """Three methods at 100.0 [100.0, 100.0] can hold any rank: none is flagged, whatever the paper's order."""
    tied = [{"method": m, "retain": 100.0, "lo": 100.0, "hi": 100.0} for m in ("cdpruner", "llava_mini", "ltopd")]
    assert against_paper(tied, [_paper("ltopd", 82.3), _paper("llava_mini", 72.9), _paper("cdpruner", 68.6)]) == []


def test_a_retain_is_printed_as_the_table_prints_it():
    """Rounded once: 62.949 is the table's 62.9, not 62.95 printed as 63.0 (the default run's
    'LT-OPD + merge 63.0' beside the table's 62.9)."""
    rows = [_ours("full", 1.0, 100.0), _ours("learnable_merge", 0.05, 62.949, 60.8, 65.449)]
    (text,) = [line for line in lines(headline(rows)) if line.startswith("At 5%")]
    assert text == f"At 5% (average retain, 95% CI): LT-OPD + merge {62.949:.1f} [60.8, {65.449:.1f}]."
    assert text == "At 5% (average retain, 95% CI): LT-OPD + merge 62.9 [60.8, 65.4]."
