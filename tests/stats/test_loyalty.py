"""Loyalty to the full-token model and answer flips (ltopd.stats.loyalty), on hand-built items
with every count worked out by hand."""

from __future__ import annotations

import pytest

from ltopd.bench.scoring import score
from ltopd.bench.scoring.readings import Reading
from ltopd.stats.loyalty import Loyalty, loyalty, loyalty_of_rows, pooled

COLORS = ["red", "blue", "green", "yellow"]


def vstar(i, prediction, answer):
    return {"id": f"v{i}", "question": "q", "options": COLORS, "answer": answer, "task": "direct_attributes",
            "meta": "{}", "prediction": prediction}


# V*Bench, five items (reference letter; full-token reply -> read; reduced reply -> read):
#   v1  A:  "A" -> A right     "(A) red" -> A right    same answer, no flip
#   v2  C:  "B" -> B wrong     "C"       -> C right    changed, wrong -> right
#   v3  C:  "C" -> C right     "B"       -> B wrong    changed, right -> wrong
#   v4  A:  ""  -> None wrong  "xyz"     -> None wrong same (both unparsed), no flip
#   v5  D:  "D" -> D right     "D."      -> D right    same answer ("D." and "D" read alike)
FULL = [vstar(1, "A", "A"), vstar(2, "B", "C"), vstar(3, "C", "C"), vstar(4, "", "A"), vstar(5, "D", "D")]
REDUCED = [vstar(1, "(A) red", "A"), vstar(2, "C", "C"), vstar(3, "B", "C"), vstar(4, "xyz", "A"),
           vstar(5, "D.", "D")]


def test_loyalty_counts_same_answers_and_flips_by_hand():
    got = loyalty_of_rows("vstar", FULL, REDUCED)
    assert got == Loyalty(n=5, same=3, right_to_wrong=1, wrong_to_right=1)
    assert got.share == pytest.approx(60.0)
    assert got.right_to_wrong_pct == pytest.approx(20.0)
    assert got.wrong_to_right_pct == pytest.approx(20.0)
    # the point of the metric: both score 3 of 5 (retain 100%), yet two answers flipped
    assert score("vstar", FULL)["score"] == score("vstar", REDUCED)["score"] == pytest.approx(60.0)


def test_loyalty_pairs_items_by_id_not_by_position():
    assert loyalty_of_rows("vstar", FULL, list(reversed(REDUCED))) == Loyalty(5, 3, 1, 1)


def test_loyalty_of_itself_is_total():
    assert loyalty_of_rows("vstar", FULL, FULL) == Loyalty(5, 5, 0, 0)


def test_loyalty_rejects_unpaired_items():
    with pytest.raises(ValueError, match=r"ids only with full tokens: \['v5'\]"):
        loyalty_of_rows("vstar", FULL, REDUCED[:4])
    with pytest.raises(ValueError, match="pairs items: 2 full-token readings but 1 reduced"):
        loyalty([Reading("A", True)] * 2, [Reading("A", True)])


def test_pooled_over_benchmarks_by_hand():
    # POPE, two items: "yes" / "Yes, it is" both read yes (label yes: right, right);
    # "no" / "not at all" both read no (label yes: wrong, wrong): same twice, no flip
    pope = [{"id": "p1", "answer": "yes", "split": "random", "prediction": "yes"},
            {"id": "p2", "answer": "yes", "split": "random", "prediction": "no"}]
    pope_reduced = [dict(pope[0], prediction="Yes, it is"), dict(pope[1], prediction="not at all")]
    both = pooled([loyalty_of_rows("vstar", FULL, REDUCED), loyalty_of_rows("pope", pope, pope_reduced)])
    assert both == Loyalty(n=7, same=5, right_to_wrong=1, wrong_to_right=1)
    assert both.share == pytest.approx(500 / 7)
    assert pooled([]).n == 0 and pooled([]).share != pooled([]).share  # NaN: no items, no share
