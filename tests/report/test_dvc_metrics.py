"""Table 2's DVC metrics file: the headline's numbers shown, the rest in lists DVC leaves out."""
from __future__ import annotations

import math

from dvc.repo.metrics.show import _extract_metrics

from ltopd.report.dvc_metrics import table2_metrics
from ltopd.report.retain import Stat
from ltopd.stats.bootstrap import Interval

NAN = Stat(math.nan, math.nan, 0)


def _rows(gated: list[str]) -> list[dict]:
    return [
        {"source": "ours", "method": "full", "budget": 1.0, "avg_retain": Stat(100.0, 0.0, 1),
         "bench": {"gqa": Stat(61.0, 0.0, 1), "mme": Stat(1500.125, 0.0, 1)}},
        {"source": "ours", "method": "cdpruner", "budget": 0.05, "avg_retain": Stat(71.234, 0.0, 1),
         "avg_retain_ci": Interval(71.234, 60.0, 80.555, 5.0),
         "bench": {"gqa": Stat(40.0, 0.0, 1), "mme": NAN}},
        {"source": "ours", "method": "ltopd", "budget": 0.125, "avg_retain": NAN,
         "bench": {"gqa": Stat(50.0, 0.0, 1), "mme": Stat(900.0, 0.0, 1)}},
        {"source": "paper", "method": "cdpruner", "budget": 0.05, "avg_retain": Stat(68.6, 0.0, 1),
         "bench": {"gqa": Stat(55.0, 0.0, 1)}},
        {"source": "baseline", "method": "question_only", "budget": None, "avg_retain": None,
         "bench": {"gqa": Stat(30.0, 0.0, 1)}},
        {"source": "gate", "method": "gate", "budget": None, "avg_retain": None, "retain_over": gated,
         "bench": {"gqa": Stat(4.256, math.nan, 1), "mme": Stat(math.nan, math.nan, 0)}},
    ]


def test_table2_metrics_by_hand():
    """Our rows only (not the paper's, not the baseline), rounded to 2 places; undefined values
    (NaN average, no interval, NaN score, NaN margin) left out, not null; rows and gates in lists."""
    metrics = table2_metrics(_rows(["gqa"]), ["a line"])
    assert metrics["rows"] == [
        {"row": "full@100%", "avg_retain": 100.0, "score": {"gqa": 61.0, "mme": 1500.12}},
        {"row": "cdpruner@5%", "avg_retain": 71.23, "avg_retain_lo": 60.0, "avg_retain_hi": 80.56,
         "score": {"gqa": 40.0}},
        {"row": "ltopd@12.5%", "score": {"gqa": 50.0, "mme": 900.0}},
    ]
    assert metrics["gates"] == [{"benchmark": "gqa", "passed": 1, "margin_se": 4.26},
                                {"benchmark": "mme", "passed": 0}]
    assert metrics["headline"]["summary"] == ["a line"]


def _leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    else:
        yield tree


def test_dvc_shows_the_headline_numbers_only():
    """DVC's own loader (dvc.repo.metrics.show._extract_metrics, what `dvc metrics show` applies to
    a parsed file) keeps the headline's few numbers, each finite, and leaves out the lists (the
    rows, the gates, the headline's lines): one short line per file in `dvc metrics show`."""
    for gated in (["gqa"], []):  # a run whose gates pass nothing still shows numbers
        metrics = table2_metrics(_rows(gated), ["a line"])
        shown = _extract_metrics(metrics, "table2.json")
        assert set(shown) == {"headline"} and set(shown["headline"]) == {"gates_passed", "gates_of", "contradicted"}
        leaves = list(_leaves(shown))
        assert leaves and all(isinstance(x, (int, float)) and math.isfinite(x) for x in leaves)
