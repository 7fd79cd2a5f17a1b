"""Retain vs measured cost: Table 2's rows placed on the prefill time and KV cache the Appendix E
protocol measures (ltopd.efficiency.latency, Table 5's job) on the same backbone, with the
Pareto front marked, so a reader sees which methods are dominated.

A row is dominated on a cost axis when another row costs no more and retains no less, and is
strictly better in one of the two. Only rows with both a measurement and an average retain ratio
are placed; the others are listed (the latency job times ``efficiency.methods`` at the target
budget only, so most of Table 2's rows have no measured cost yet).
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

COSTS = {"latency_ms": "measured prefill + decode latency per request (ms)",
         "kv_bytes": "measured KV cache after prefill (bytes)"}


def dominated(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (cost, retain) points: True where another point costs no more and retains no less,
    and is strictly better in at least one of the two."""
    return [any(c2 <= c and r2 >= r and (c2 < c or r2 > r) for j, (c2, r2) in enumerate(points) if j != i)
            for i, (c, r) in enumerate(points)]


def read_table2(path: str | Path) -> dict[tuple[str, float], float]:
    """(method, budget) -> our average retain ratio, from Table 2's CSV (rows without one left out)."""
    out = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["source"] == "ours" and row["budget"] and row["avg_retain"]:
                out[(row["method"], float(row["budget"]))] = float(row["avg_retain"])
    return out


def rows(retain: Mapping[tuple[str, float], float], measurement: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    """(one row per measured method with a retain ratio, with its costs and whether each cost axis
    dominates it; the Table 2 rows left out, as "method@budget")."""
    placed = []
    for r in measurement["results"]:
        key = (r["method"], float(r["ratio"]))
        if key in retain and not math.isnan(retain[key]):
            placed.append({"method": key[0], "budget": key[1], "avg_retain": retain[key],
                           **{c: float(r[c]) for c in COSTS}})
    for cost in COSTS:
        for row, flag in zip(placed, dominated([(r[cost], r["avg_retain"]) for r in placed])):
            row[f"dominated_{cost}"] = flag
    seen = {(r["method"], r["budget"]) for r in placed}
    missing = [f"{m}@{b:g}" for (m, b) in retain if (m, b) not in seen]
    return placed, missing


def to_csv(placed: Sequence[dict]) -> str:
    buf = io.StringIO()
    cols = ["method", "budget", "avg_retain", *COSTS, *[f"dominated_{c}" for c in COSTS]]
    w = csv.DictWriter(buf, cols, lineterminator="\n")
    w.writeheader()
    w.writerows(placed)
    return buf.getvalue()


def figure(placed: Sequence[dict], missing: Sequence[str], out: str | Path, title: str) -> None:
    """One panel per cost axis: every placed row (hollow where dominated), the front as a step
    line through the non-dominated ones, the rows without a measurement named below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ltopd.report.grid_tables import display_name

    fig, axes = plt.subplots(1, len(COSTS), figsize=(11, 5.2), dpi=120)
    palette = plt.get_cmap("tab10")
    for ax, cost in zip(axes, COSTS):
        for i, r in enumerate(placed):
            hollow = r[f"dominated_{cost}"]
            colour = palette(i % palette.N)
            ax.plot(r[cost], r["avg_retain"], "o", ms=7, color=colour, mfc="none" if hollow else colour)
            ax.annotate(f"{display_name(r['method'])} {100 * r['budget']:g}%" + (" (dominated)" if hollow else ""),
                        (r[cost], r["avg_retain"]), xytext=(5, 4), textcoords="offset points", fontsize=7,
                        color=colour)
        front = sorted((r[cost], r["avg_retain"]) for r in placed if not r[f"dominated_{cost}"])
        if front:
            ax.step([c for c, _ in front], [v for _, v in front], where="post", color="black", lw=0.8, ls="--",
                    label="Pareto front")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xlabel(COSTS[cost])
        ax.set_ylabel("average retain ratio (%, Table 2)")
        ax.grid(alpha=0.3)
    note = ("hollow: dominated (another row costs no more and retains no less). Not measured yet: "
            + (", ".join(missing) if missing else "none"))
    fig.suptitle(title, fontsize=9)
    fig.text(0.01, 0.01, note, fontsize=6, wrap=True, color="dimgrey")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    with atomic_file(out, "wb") as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)


def load_measurement(path: str | Path) -> dict[str, Any]:
    m = json.loads(Path(path).read_text())
    if "results" not in m or "backbone" not in m:
        raise ValueError(f"{path}: not a `ltopd table5 measure` output (needs 'backbone' and 'results')")
    return m
