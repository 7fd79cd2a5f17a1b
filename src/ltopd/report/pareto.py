"""Retain vs measured cost: every Table 2 row placed on the prefill time and KV cache measured for
it on Table 2's backbone (ltopd.efficiency.prefill, rule prefill_costs), with the Pareto front
marked, so a reader sees which methods are dominated. The retain axis is Figure 1 right's (its
CSV: the average over every Table 2 benchmark, no gate), so the two figures differ only in their
cost: analytic FLOPs there, measured here.

A row is dominated on a cost axis when another row costs no more and retains no less, and is
strictly better in one of the two. Rows that run the same computation (a trained student and its
selector at the same budget) share a measured cost; the CSV's ``computation`` says which.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ltopd.atomic import atomic_file

COSTS = {"prefill_ms": "measured prefill per request (ms)",
         "kv_bytes": "measured KV cache after prefill (KiB)"}
SCALE = {"prefill_ms": 1.0, "kv_bytes": 1 / 1024}  # the figure's units


def dominated(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (cost, retain) points: True where another point costs no more and retains no less, and
    is strictly better in at least one of the two. One sweep in order of cost: a point is
    dominated when a strictly cheaper one retains at least as much, or one of equal cost retains
    more."""
    order = sorted(range(len(points)), key=lambda i: points[i][0])
    out = [False] * len(points)
    best_cheaper = -math.inf  # the highest retain among strictly cheaper points
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and points[order[j]][0] == points[order[i]][0]:
            j += 1
        group = order[i:j]  # the points of one cost
        top = max(points[k][1] for k in group)
        for k in group:
            out[k] = best_cheaper >= points[k][1] or top > points[k][1]
        best_cheaper = max(best_cheaper, top)
        i = j
    return out


def read_retain(path: str | Path) -> dict[tuple[str, float], float]:
    """(method, budget) -> our average retain ratio, from a CSV with source, method, budget and
    avg_retain columns (Figure 1 right's, or Table 2's; rows without one left out)."""
    out = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["source"] == "ours" and row["budget"] and row["avg_retain"]:
                out[(row["method"], float(row["budget"]))] = float(row["avg_retain"])
    return out


def rows(retain: Mapping[tuple[str, float], float], measurement: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    """(one row per measured Table 2 row with a retain ratio, with its costs and whether each
    cost axis dominates it; the Table 2 rows with no measurement, as "method@budget")."""
    placed = []
    for r in measurement["rows"]:
        key = (r["method"], float(r["budget"]))
        if key in retain and not math.isnan(retain[key]):
            placed.append({"method": key[0], "budget": key[1], "avg_retain": retain[key],
                           "computation": r["computation"], **{c: float(r[c]) for c in COSTS}})
    for cost in COSTS:
        for row, flag in zip(placed, dominated([(r[cost], r["avg_retain"]) for r in placed])):
            row[f"dominated_{cost}"] = flag
    seen = {(r["method"], r["budget"]) for r in placed}
    missing = [f"{m}@{b:g}" for (m, b) in retain if (m, b) not in seen]
    return placed, missing


def to_csv(placed: Sequence[dict]) -> str:
    buf = io.StringIO()
    cols = ["method", "budget", "avg_retain", "computation", *COSTS, *[f"dominated_{c}" for c in COSTS]]
    w = csv.DictWriter(buf, cols, lineterminator="\n")
    w.writeheader()
    w.writerows(placed)
    return buf.getvalue()


# The figure's markers: full tokens a star, the budgets these in increasing order.
FULL_MARKER, BUDGET_MARKERS = "*", ("o", "^", "D", "s", "v", "P", "X", "h")


def markers(budgets: Sequence[float]) -> dict[float, str]:
    reduced = sorted(b for b in set(budgets) if b < 1)
    return {**{b: BUDGET_MARKERS[i % len(BUDGET_MARKERS)] for i, b in enumerate(reduced)}, 1.0: FULL_MARKER}


def shared_costs(placed: Sequence[dict]) -> list[str]:
    """"A, B: <computation>" for each computation more than one placed row runs (they share its cost)."""
    from ltopd.report.grid_tables import display_name

    groups: dict[str, list[str]] = {}
    for r in placed:
        groups.setdefault(r["computation"], []).append(f"{display_name(r['method'])} {100 * r['budget']:g}%")
    return [f"{', '.join(names)}: {comp}" for comp, names in groups.items() if len(names) > 1]


def figure(placed: Sequence[dict], missing: Sequence[str], out: str | Path, title: str) -> None:
    """One panel per cost axis: each row coloured by method, its marker by budget, filled on the
    Pareto front and hollow where dominated (rows at one point nested), the front a dashed step
    line whose points are labelled; the legends beside the panels, shared and unmeasured rows
    named below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from ltopd.report.grid_tables import display_name

    methods = list(dict.fromkeys(r["method"] for r in placed))
    palette = plt.get_cmap("tab20" if len(methods) > 10 else "tab10")
    colour = {m: palette(i % palette.N) for i, m in enumerate(methods)}
    marker = markers([r["budget"] for r in placed])
    fig, axes = plt.subplots(1, len(COSTS), figsize=(13, 5.6), dpi=110)
    for ax, cost in zip(axes, COSTS):
        scale = SCALE[cost]
        # rows at one point (a student and its selector share a cost) drawn as nested markers, the
        # first the largest, so that each stays visible
        at: dict[tuple[float, float], list[dict]] = {}
        for r in placed:
            at.setdefault((r[cost] * scale, r["avg_retain"]), []).append(r)
        for (x, y), group in at.items():
            for k, r in enumerate(group):
                hollow = r[f"dominated_{cost}"]
                c = colour[r["method"]]
                ax.plot(x, y, marker[r["budget"]], ms=10 + 5 * (len(group) - 1 - k), color=c,
                        mfc="white" if hollow else c, mew=1.8, zorder=3 + k)
        # the front's points, rows at one point (equal cost and retain: none dominates the other) labelled together
        front: dict[tuple[float, float], list[str]] = {}
        for r in placed:
            if not r[f"dominated_{cost}"]:
                front.setdefault((r[cost] * scale, r["avg_retain"]), []).append(
                    f"{display_name(r['method'])} {100 * r['budget']:g}%")
        if front:
            steps = sorted(front)
            ax.step([x for x, _ in steps], [y for _, y in steps], where="post", color="black", lw=1, ls="--", zorder=2)
            for (x, y), names in front.items():
                ax.annotate("\n".join(names), (x, y), xytext=(6, 5), textcoords="offset points", fontsize=8)
        ax.set_xlabel(COSTS[cost])
        ax.set_ylabel("average retain ratio (%, Figure 1 right's)")
        ax.margins(x=0.15, y=0.12)
        ax.grid(alpha=0.3)
    method_keys = [Line2D([], [], ls="", marker="o", ms=8, color=colour[m], label=display_name(m)) for m in methods]
    budgets = sorted({r["budget"] for r in placed}, reverse=True)
    budget_keys = [Line2D([], [], ls="", marker=marker[b], ms=8, color="dimgrey",
                          label="full tokens" if b == 1 else f"keep {100 * b:g}%") for b in budgets]
    style_keys = [Line2D([], [], ls="", marker="o", ms=8, color="dimgrey", label="on the Pareto front"),
                  Line2D([], [], ls="", marker="o", ms=8, color="dimgrey", mfc="white", mew=1.6,
                         label="dominated (another row costs\nno more and retains no less)"),
                  Line2D([], [], ls="--", color="black", label="Pareto front")]
    fig.legend(handles=method_keys + budget_keys + style_keys, loc="center left", bbox_to_anchor=(0.80, 0.5),
               fontsize=8, frameon=False)
    shared = shared_costs(placed)
    notes = [f"Same computation, one measured cost: {'; '.join(shared)}."] if shared else []
    notes.append(f"Not measured: {', '.join(missing)}." if missing else "Every Table 2 row measured.")
    fig.suptitle(title, fontsize=10)
    fig.text(0.01, 0.01, "\n".join(notes), fontsize=7, wrap=True, color="dimgrey")
    fig.tight_layout(rect=(0, 0.07, 0.80, 1))
    with atomic_file(out, "wb") as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)


def load_measurement(path: str | Path) -> dict[str, Any]:
    m = json.loads(Path(path).read_text())
    if "rows" not in m or "backbone" not in m:
        raise ValueError(f"{path}: not a `ltopd prefill-costs` output (needs 'backbone' and 'rows')")
    return m
