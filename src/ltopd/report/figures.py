"""Average retain ratio vs visual-token budget, one line per selector (ours), the paper's
reported points beside them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ltopd.atomic import atomic_file


def retain_vs_budget(rows: list[dict[str, Any]], out: str | Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ltopd.grid import METHODS
    from ltopd.report.table2 import LABELS

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    colours: dict[str, Any] = {}
    ours = [r for r in rows if r["source"] == "ours" and r["method"] != "full"]
    for method in dict.fromkeys(r["method"] for r in ours):
        pts = sorted((r["budget"], r["avg_retain"]) for r in ours if r["method"] == method)
        pts = [(b, s) for b, s in pts if not math.isnan(s.mean)]
        if not pts:
            continue
        style = "-o" if METHODS.get(method) == "selector" else "s"
        line = ax.errorbar([100 * b for b, _ in pts], [s.mean for _, s in pts], yerr=[s.sd for _, s in pts],
                           fmt=style, capsize=3, label=f"{LABELS.get(method, method)} (ours)")
        colours[method] = line[0].get_color()
    for r in rows:
        if r["source"] == "paper" and r["avg_retain"] is not None:
            ax.plot(100 * r["budget"], r["avg_retain"].mean, marker="x", ms=8, linestyle="none",
                    color=colours.get(r["method"], "grey"))
            ax.annotate(f"paper {LABELS.get(r['method'], r['method'])}", (100 * r["budget"], r["avg_retain"].mean),
                        fontsize=6, xytext=(4, 2), textcoords="offset points", color=colours.get(r["method"], "grey"))
    ax.axhline(100, color="black", lw=0.8, ls=":")
    ax.set_xlabel("visual-token budget (%)")
    ax.set_ylabel("average retain ratio (%)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_file(out, "wb") as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)
