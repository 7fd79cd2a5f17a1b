"""Table 2's headline, first: which gates passed, the order at the smallest budget with its
intervals, LT-OPD minus the untrained student with its interval, and where ours contradicts the
paper (a method ranked far from the paper's rank), in at most a dozen lines. The same lines open
results/table2.md, sit in results/table2.json (``headline.summary``) and close a run's log (the
`--logger ltopd` plugin reads them there).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ltopd.catalog import METHODS
from ltopd.stats import bootstrap

MAX_LINES = 12
# A method's rank among the methods both report, ours against the paper's: a gap of at least this
# share of the field, beyond every rank our intervals allow, is flagged (FastV clearly first of
# eight here and last in the paper: 7 >= 4).
RANK_GAP = 0.5


def _label(name: str) -> str:
    from ltopd.report.grid_tables import display_name

    return display_name(name)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _retain(r: Mapping[str, Any]) -> float:
    s = r.get("avg_retain")
    return math.nan if s is None else s.mean


def headline(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline of Table 2's rows (ltopd.report.grid_tables.build): JSON-ready, with the gates,
    the order at our smallest budget, the LT-OPD difference and the contradicted ranks."""
    ours = [r for r in rows if r["source"] == "ours" and r["budget"] is not None and r["budget"] < 1]
    gate = next((r for r in rows if r["source"] == "gate"), None)
    budget = min((r["budget"] for r in ours), default=None)
    order = []
    at = [r for r in ours if r["budget"] == budget and math.isfinite(_retain(r))]
    for r in sorted(at, key=lambda r: -_retain(r)):
        ci = r.get("avg_retain_ci")
        # rounded once, to the table's one decimal: 62.949 kept as 62.95 printed as 63.0 beside the table's 62.9
        entry = {"method": r["method"], "retain": round(_retain(r), 1)}
        if ci is not None and math.isfinite(ci.lo):
            entry.update(lo=round(ci.lo, 1), hi=round(ci.hi, 1))
        order.append(entry)
    out: dict[str, Any] = {"budget": budget, "order": order, "passed": [], "failed": [], "difference": None}
    if gate is not None:
        out["passed"] = list(gate["retain_over"])
        out["failed"] = [b for b, s in gate["bench"].items() if s.n and b not in gate["retain_over"]]
        # the first of Table 2's differences is the paper's claim (LT-OPD - the untrained student)
        out["difference"] = next(({"name": n, **d} for n, d in (gate.get("differences") or {}).items()), None)
    out["flagged"] = against_paper(order, rows)
    return out


def rank_range(entry: Mapping[str, Any], field: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """The ranks ``entry`` can hold in ``field`` given the intervals (the point where a row has
    none): 1 + the rows clearly above it, to the field's size less the rows clearly below it."""
    lo, hi = entry.get("lo", entry["retain"]), entry.get("hi", entry["retain"])
    above = sum(1 for e in field if e is not entry and e.get("lo", e["retain"]) > hi)
    below = sum(1 for e in field if e is not entry and e.get("hi", e["retain"]) < lo)
    return 1 + above, len(field) - below


def against_paper(order: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Methods whose rank among those both tables report at the smallest budget is at least
    RANK_GAP of their number away from the paper's, whatever rank our intervals allow (a tie
    within the intervals contradicts nothing)."""
    paper = [r for r in rows if r["source"] == "paper" and r["method"] in METHODS and r.get("avg_retain") is not None
             and r["budget"] < 1]
    if not paper or not order:
        return []
    lowest = min(r["budget"] for r in paper)
    theirs = {r["method"]: r["avg_retain"].mean for r in paper if r["budget"] == lowest}
    common = [e for e in order if e["method"] in theirs]
    n = len(common)
    if n < 3:
        return []
    out = []
    for e in common:
        paper_rank = 1 + sum(1 for f in common if theirs[f["method"]] > theirs[e["method"]])
        best, worst = rank_range(e, common)
        gap = max(best - paper_rank, paper_rank - worst, 0)
        if gap >= RANK_GAP * n:
            out.append({"method": e["method"], "rank": best if paper_rank > worst else worst, "paper_rank": paper_rank,
                        "of": n, "retain": e["retain"], "paper_retain": theirs[e["method"]]})
    return out


def _ci(e: Mapping[str, Any]) -> str:
    return f" [{e['lo']:.1f}, {e['hi']:.1f}]" if "lo" in e else ""


def lines(h: Mapping[str, Any], files: Mapping[str, str] | None = None) -> list[str]:
    """At most MAX_LINES lines: gates, the order, the difference, the contradictions, the files."""
    out = []
    n = len(h["passed"]) + len(h["failed"])
    if n:
        out.append(f"Gates: {len(h['passed'])} of {n} benchmarks pass ({', '.join(map(_label, h['passed'])) or 'none'})"
                   + (f"; fail: {', '.join(map(_label, h['failed']))}" if h["failed"] else "") + ".")
    if h["budget"] is not None:
        pct = f"{100 * h['budget']:g}%"
        if h["order"]:
            shown = h["order"][:8]
            more = len(h["order"]) - len(shown)
            out.append(f"At {pct} (average retain, 95% CI): "
                       + "; ".join(f"{_label(e['method'])} {e['retain']:.1f}{_ci(e)}" for e in shown)
                       + (f"; {more} more in the table" if more > 0 else "") + ".")
        else:
            out.append(f"At {pct}: no average retain ratio (no benchmark passed its gate).")
        d = h.get("difference")
        if d:
            ci = bootstrap.Interval(d["estimate"], d["lo"], d["hi"], math.nan)
            verdict = ("resolved" if d["lo"] > 0 or d["hi"] < 0 else "not resolved: the interval holds 0")
            capped = (f"; each benchmark capped at 100%: {d['capped']:+.1f} "
                      f"[{d['capped_lo']:.1f}, {d['capped_hi']:.1f}]" if "capped" in d else "")
            out.append(f"{d['name']} at {pct}: {d['estimate']:+.1f} retain points {bootstrap.format_ci(ci)}, {verdict}"
                       f"{capped}.")
    for f in h.get("flagged", [])[:3]:
        out.append(f"Contradicts the paper: {_label(f['method'])} ranks {_ordinal(f['rank'])} of {f['of']} here "
                   f"({f['retain']:.1f}) but {_ordinal(f['paper_rank'])} in the paper ({f['paper_retain']:.1f}).")
    for name, where in (files or {}).items():
        out.append(f"{name}: {where}")
    return out[:MAX_LINES]


def markdown(summary: Sequence[str]) -> str:
    """The headline block that opens the table's markdown."""
    return "**Headline**\n\n" + "".join(f"- {s}\n" for s in summary) + "\n"


def dvc_numbers(h: Mapping[str, Any]) -> dict[str, float]:
    """The few numbers `dvc metrics show` prints (one short line): gates passed and of how many,
    LT-OPD minus the untrained student with its interval, and the contradicted ranks' count."""
    out: dict[str, float] = {"gates_passed": len(h["passed"]), "gates_of": len(h["passed"]) + len(h["failed"])}
    d = h.get("difference")
    if d:
        out.update(ltopd_minus_pruned=d["estimate"], ci_lo=d["lo"], ci_hi=d["hi"])
    out["contradicted"] = len(h.get("flagged", []))
    return out


def summary_lines(path: str | Path) -> list[str]:
    """The headline lines of a table's JSON (``headline.summary``), [] when it has none."""
    try:
        summary = json.loads(Path(path).read_text()).get("headline", {}).get("summary", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [str(s) for s in summary][:MAX_LINES]
