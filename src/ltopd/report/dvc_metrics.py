"""Table 2's headline numbers as a DVC metrics file (results/table2.json).

`dvc metrics show` prints every metrics file as one row with a column per number it holds, and
it leaves lists out (and nulls) without saying so. So the numbers it shows are the headline's
few (ltopd.report.headline.dvc_numbers: gates passed, LT-OPD minus the untrained student with its
interval, the contradicted ranks) and everything else is in lists: the headline's lines
(``headline.summary``, what the logger plugin prints), the order at the smallest budget, and per
row of ours (``rows``) its ``avg_retain`` with ``avg_retain_lo`` / ``_hi`` (95% interval) and each
benchmark's official ``score`` (mean over seeds), per benchmark (``gates``) whether it passed and
by how many SEs. An undefined value (an average retain ratio no benchmark was gated into, an
interval without predictions) is left out rather than written as null.
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


def table2_metrics(rows: list[dict[str, Any]], summary: list[str] | None = None) -> dict[str, Any]:
    """The metrics of Table 2's rows (ltopd.report.grid_tables.build); ``summary``: the headline's
    lines (ltopd.report.headline.lines)."""
    from ltopd.report.headline import dvc_numbers, headline

    h = headline(rows)
    out: dict[str, Any] = {"headline": {**_numbers(dvc_numbers(h)), "summary": list(summary or []),
                                        "order": h["order"], "flagged": h["flagged"]},
                           "rows": [], "gates": []}
    for r in rows:
        if r["source"] == "gate":
            out["gates"] = [{"benchmark": b, "passed": int(b in r["retain_over"]), **_numbers({"margin_se": s.mean})}
                            for b, s in r["bench"].items()]
        elif r["source"] == "ours" and r["budget"] is not None:
            avg, ci = r["avg_retain"], r.get("avg_retain_ci")
            entry = _numbers({"avg_retain": avg.mean if avg else None,
                              "avg_retain_lo": ci.lo if ci else None, "avg_retain_hi": ci.hi if ci else None})
            scores = _numbers({b: s.mean for b, s in r["bench"].items() if s is not None})
            out["rows"].append({"row": f"{r['method']}@{budget_key(r['budget'])}", **entry,
                                **({"score": scores} if scores else {})})
    return out
