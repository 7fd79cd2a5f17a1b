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


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: str | Path) -> None:
    with atomic_file(out, "wb") as fh:
        fig.savefig(fh, format="png")


def recovery_bars(rows: list[dict[str, Any]], out: str | Path, title: str, notes: list[str] = ()) -> None:
    """Figure 4: grouped bars of recovery (benchmarks on x, one bar per method), one panel per
    backbone; error bars (sample sd) where a cell averages more than one seed. An undefined cell
    (no gap to recover) has no bar, only a hatched outline marked 'n/a'."""
    plt = _pyplot()
    from matplotlib.patches import Patch

    from ltopd.report.table2 import BENCH_LABELS, LABELS

    backbones = list(dict.fromkeys(r["backbone"] for r in rows)) or ["(no results)"]
    fig, axes = plt.subplots(len(backbones), 1, figsize=(7.0, 3.4 * len(backbones) + 0.6), dpi=120, squeeze=False)
    for ax, bb in zip(axes[:, 0], backbones):
        mine = [r for r in rows if r["backbone"] == bb]
        benches = list(dict.fromkeys(r["benchmark"] for r in mine))
        methods = list(dict.fromkeys(r["method"] for r in mine))
        width = 0.8 / max(len(methods), 1)
        handles = []
        for j, method in enumerate(methods):
            cell = {r["benchmark"]: r for r in mine if r["method"] == method}
            xs = [i - 0.4 + width * (j + 0.5) for i in range(len(benches))]
            colour = f"C{j}"
            for x, b in zip(xs, benches):
                r = cell.get(b)
                if r is None:
                    continue
                if math.isnan(r["recovery"]):
                    ax.bar(x, 10, width, fill=False, hatch="//", edgecolor=colour, linewidth=0.6)
                    ax.text(x, 11, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
                else:
                    err = r["recovery_sd"] if r["seeds"] > 1 else None
                    ax.bar(x, r["recovery"], width, yerr=err, capsize=2, color=colour)
                    ax.text(x, max(r["recovery"], 0) + (err or 0) + 1, f"{r['recovery']:.0f}", ha="center",
                            va="bottom", fontsize=6)  # a 0 recovery has no visible bar
            handles.append(Patch(color=colour, label=LABELS.get(method, method)))
        ax.set_xticks(range(len(benches)), [BENCH_LABELS.get(b, b) for b in benches])
        ax.axhline(0, color="black", lw=0.6)
        ax.axhline(100, color="black", lw=0.6, ls=":")
        ax.margins(y=0.15)  # room for the legend and the value marks
        ax.set_ylabel("recovery (%)")
        ax.set_title(bb, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        if methods:
            ax.legend(handles=handles, fontsize=7, ncol=len(methods), loc="upper left")
    fig.suptitle(title, fontsize=9)
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=5.5, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.04 * len(notes), 1, 1))
    _save(fig, out)
    plt.close(fig)


def flops_retain_scatter(rows: list[dict[str, Any]], out: str | Path, title: str, note: str = "") -> None:
    """Figure 1 right: prefill FLOPs ratio (x) vs average retain ratio (y); ours filled markers
    labelled by method and budget (error bars over seeds), the paper's as crosses."""
    plt = _pyplot()
    from ltopd.report.table2 import LABELS

    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    colours: dict[str, str] = {}
    for r in rows:
        colour = colours.setdefault(r["method"], f"C{len(colours) % 10}")
        label = f"{LABELS.get(r['method'], r['method'])} {100 * r['budget']:g}%"
        if r["source"] == "ours":
            sd = r["avg_retain_sd"] if isinstance(r["seeds"], int) and r["seeds"] > 1 else None
            ax.errorbar(r["flops_ratio"], r["avg_retain"], yerr=sd, fmt="o", color=colour, capsize=2, ms=5)
            ax.annotate(label, (r["flops_ratio"], r["avg_retain"]), fontsize=6, xytext=(4, 2),
                        textcoords="offset points", color=colour)
        else:
            ax.plot(r["flops_ratio"], r["avg_retain"], marker="x", ms=8, linestyle="none", color=colour)
            ax.annotate(f"paper {label}", (r["flops_ratio"], r["avg_retain"]), fontsize=6, xytext=(4, -8),
                        textcoords="offset points", color=colour)
    ax.plot([], [], "o", color="grey", label="ours")
    ax.plot([], [], "x", color="grey", label="paper (Qwen3.5-4B)")
    ax.set_xlabel("prefill FLOPs ratio (reduced / full)")
    ax.set_ylabel("average retain ratio (%)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    if note:
        fig.text(0.01, 0.005, note, fontsize=5.5, va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.06 if note else 0, 1, 1))
    _save(fig, out)
    plt.close(fig)
