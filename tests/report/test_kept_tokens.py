"""The downsampling control's rows name the tokens they keep; equal rows say so (issue 55)."""
from __future__ import annotations

from ltopd.report.kept_tokens import annotate, resize_notes


def _m(budget, bench, seed, kept, n=10, method="downsample"):
    return {"backbone": "b", "method": method, "budget": budget, "benchmark": bench, "seed": seed,
            "kept_tokens": kept, "visual_tokens": kept, "n": n, "score": 1.0}


def test_equal_budgets_are_marked_by_hand():
    # 20% and 15% keep 640 tokens over 10 items on both benchmarks (64 per item); 10% 250 (25); 5%
    # equals 10% on gqa but not on pope: not the same images
    results = [_m(0.2, "gqa", 0, 640), _m(0.2, "pope", 0, 640), _m(0.15, "gqa", 0, 640), _m(0.15, "pope", 0, 640),
               _m(0.1, "gqa", 0, 250), _m(0.1, "pope", 0, 250), _m(0.05, "gqa", 0, 250), _m(0.05, "pope", 0, 160),
               _m(0.05, "gqa", 0, 90, method="cdpruner")]
    notes = resize_notes(results, "b", ["gqa", "pope"])
    assert set(notes) == {("downsample", b) for b in (0.2, 0.15, 0.1, 0.05)}
    assert notes[("downsample", 0.2)] == {"tokens": 64.0, "same_as": None, "note": "64 tokens per item"}
    assert notes[("downsample", 0.15)]["note"] == "64 tokens per item, the same images as 20%"
    assert notes[("downsample", 0.1)]["same_as"] is None
    assert notes[("downsample", 0.05)]["tokens"] == 20.5 and notes[("downsample", 0.05)]["same_as"] is None
    rows = [{"source": "ours", "method": "downsample", "budget": 0.15}, {"source": "paper", "method": "downsample",
                                                                         "budget": 0.15}]
    marked = annotate(rows, results, "b", ["gqa", "pope"])
    assert marked[0]["same_as"] == 0.2 and "note" not in marked[1]
