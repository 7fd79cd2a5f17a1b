"""The figures of the tables: Table 2's (ltopd.report.table2_figure), Figure 4's recovery bars,
Figure 1 right's FLOPs vs retain."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ltopd.atomic import atomic_file


def retain_vs_budget(rows: list[dict[str, Any]], out: str | Path, title: str) -> None:
    """Table 2's figure: the smallest budget ours vs the paper's, each method minus the untrained
    student, the training-free rows vs budget and loyalty (ltopd.report.table2_figure)."""
    from ltopd.report.table2_figure import draw

    draw(rows, out, title)


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
    (no gap to recover) has no bar, only an x on the axis marked 'undefined'."""
    plt = _pyplot()
    from matplotlib.patches import Patch

    from ltopd.report.grid_tables import display_name

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
                if math.isnan(r["recovery"]):  # no gap to recover: no bar, a mark on the axis
                    ax.plot(x, 0, marker="x", ms=5, color=colour, linestyle="none")
                    ax.text(x, 2, "undefined", ha="center", va="bottom", fontsize=5.5, rotation=90,
                            color=colour)
                else:
                    err = r["recovery_sd"] if r["seeds"] > 1 else None
                    ax.bar(x, r["recovery"], width, yerr=err, capsize=2, color=colour)
                    ax.text(x, max(r["recovery"], 0) + (err or 0) + 1, f"{r['recovery']:.0f}", ha="center",
                            va="bottom", fontsize=6)  # a 0 recovery has no visible bar
            handles.append(Patch(color=colour, label=display_name(method)))
        ax.set_xticks(range(len(benches)), [display_name(b) for b in benches])
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
    from ltopd.report.grid_tables import display_name

    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    colours: dict[str, str] = {}
    for r in rows:
        colour = colours.setdefault(r["method"], f"C{len(colours) % 10}")
        label = f"{display_name(r['method'])} {100 * r['budget']:g}%"
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
