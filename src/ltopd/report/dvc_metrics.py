"""Table 2's headline numbers as a DVC metrics file (results/table2.json).

DVC's `metrics show` keeps only numbers, strings and dicts of them and drops the rest (nulls,
lists) without saying which: every leaf here is a number, and a value that is undefined (an
average retain ratio no benchmark was gated into, an interval without predictions) is left out
rather than written as null. Layout, per of our rows ``"<method>@<budget>"``: ``avg_retain`` with
``avg_retain_lo`` / ``_hi`` (its 95% interval) and ``score`` (each benchmark's official score,
mean over seeds), so even a run whose gates pass nothing shows numbers; per benchmark under
``gate``: ``passed`` (1 or 0) and ``margin_se`` (the deciding margin in standard errors).
"""

from __future__ import annotations

import math
from typing import Any


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 2)


def _numbers(pairs: dict[str, float | None]) -> dict[str, float]:
    """The defined ones, rounded."""
    return {k: v for k, v in ((k, _num(x)) for k, x in pairs.items()) if v is not None}


def budget_key(budget: float) -> str:
    return "100%" if budget >= 1 else f"{100 * budget:g}%"


def table2_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The metrics of Table 2's rows (ltopd.report.grid_tables.build)."""
    out: dict[str, Any] = {}
    for r in rows:
        if r["source"] == "gate":
            out["gate"] = {b: {"passed": int(b in r["retain_over"]), **_numbers({"margin_se": s.mean})}
                           for b, s in r["bench"].items()}
        elif r["source"] == "ours" and r["budget"] is not None:
            avg, ci = r["avg_retain"], r.get("avg_retain_ci")
            entry = _numbers({"avg_retain": avg.mean if avg else None,
                              "avg_retain_lo": ci.lo if ci else None, "avg_retain_hi": ci.hi if ci else None})
            scores = _numbers({b: s.mean for b, s in r["bench"].items() if s is not None})
            out[f"{r['method']}@{budget_key(r['budget'])}"] = {**entry, **({"score": scores} if scores else {})}
    return out
