"""Average retain ratio vs visual-token budget, one line per selector (ours), the paper's
reported points beside them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ltopd.atomic import atomic_file


def spread_labels(ys: list[float], gap: float) -> list[float]:
    """Label heights for points at heights `ys`: each as close to its point as possible, no two
    closer than `gap` (a greedy sweep upwards, then the whole run centred on the points)."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed: list[float] = []
    for i in order:
        placed.append(ys[i] if not placed else max(ys[i], placed[-1] + gap))
    shift = (sum(ys[i] for i in order) - sum(placed)) / len(placed) if placed else 0.0
    out = [0.0] * len(ys)
    for i, y in zip(order, placed):
        out[i] = y + shift
    for k in range(1, len(order)):  # centring must not bring two labels closer than gap
        out[order[k]] = max(out[order[k]], out[order[k - 1]] + gap)
    return out


def retain_vs_budget(rows: list[dict[str, Any]], out: str | Path, title: str) -> None:
    """Left panel, ours: one line per selector, one marker per trained method, dodged sideways at
    a shared budget so none hides another; error bars the 95% bootstrap CI where the table has
    one (else the sd over seeds). Middle panel, the paper's reported points on the same y axis,
    one column per budget, labels spread so they never overprint. Right panel, where the rows
    carry it (Table 2 with predictions): each method's loyalty to the full-token model vs budget
    (ltopd.stats.loyalty), in the same colours and markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ltopd.catalog import METHODS
    from ltopd.report.grid_tables import display_name

    loyal_rows = [r for r in rows if r["source"] == "ours" and r.get("loyalty") is not None]
    fig, axes = plt.subplots(1, 3 if loyal_rows else 2, figsize=(13.5 if loyal_rows else 9.0, 6.0), dpi=120,
                             gridspec_kw={"width_ratios": [3, 2, 3] if loyal_rows else [3, 2]})
    ax, side = axes[0], axes[1]
    side.sharey(ax)
    side.tick_params(labelleft=False)
    colours: dict[str, Any] = {}
    styles: dict[str, tuple[str, str]] = {}
    ours = [r for r in rows if r["source"] == "ours" and r["method"] != "full" and r["budget"] < 1]
    methods = list(dict.fromkeys(r["method"] for r in ours))
    markers = "osD^vP*Xh<>p"
    palette = plt.get_cmap("tab20")
    for j, method in enumerate(methods):  # the loyalty panel's too, where a method has no retain ratio
        selector_like = method in METHODS and METHODS[method].kind in ("selector", "resize")
        colours[method], styles[method] = palette(j % palette.N), (markers[j % len(markers)],
                                                                   "-" if selector_like else "none")
    plotted = 0
    for j, method in enumerate(methods):
        mine = sorted((r for r in ours if r["method"] == method), key=lambda r: r["budget"])
        mine = [r for r in mine if not math.isnan(r["avg_retain"].mean)]
        if not mine:
            continue
        dodge = 1.6 * (j - (len(methods) - 1) / 2) / max(len(methods), 1)
        xs = [100 * r["budget"] + dodge for r in mine]
        ys = [r["avg_retain"].mean for r in mine]
        lo, hi = [], []
        for r, y in zip(mine, ys):
            ci = r.get("avg_retain_ci")
            spread = (y - ci.lo, ci.hi - y) if ci is not None else (r["avg_retain"].sd, r["avg_retain"].sd)
            lo.append(max(spread[0], 0.0))
            hi.append(max(spread[1], 0.0))
        marker, style = styles[method]
        # tab20: the default cycle repeats after ten, and Table 2 plots up to seventeen methods
        ax.errorbar(xs, ys, yerr=[lo, hi], marker=marker, linestyle=style, capsize=2, ms=4, lw=1,
                    label=display_name(method), color=colours[method])
        plotted += 1
    if not plotted:  # e.g. no benchmark passed its gate: say so instead of an empty frame
        ax.text(0.5, 0.5, "no retain ratio to plot\n(no benchmark passed its gate, see the table's notes)",
                transform=ax.transAxes, ha="center", va="center", fontsize=8, color="dimgrey")
        budgets_ours = sorted({100 * r["budget"] for r in ours})
        if budgets_ours:
            ax.set_xticks(budgets_ours)
            ax.set_xlim(min(budgets_ours) - 2, max(budgets_ours) + 2)
    ax.axhline(100, color="black", lw=0.8, ls=":")
    ax.set_xlabel("visual-token budget (%)")
    ax.set_ylabel("average retain ratio (%)")
    ax.set_title("ours (markers dodged sideways; bars: 95% CI)", fontsize=8)
    ax.grid(alpha=0.3)
    paper = [r for r in rows if r["source"] == "paper" and r["avg_retain"] is not None]
    columns = sorted({r["budget"] for r in paper})
    span = [y for r in paper for y in [r["avg_retain"].mean]]
    gap = 0.045 * ((max(span) - min(span)) if len(span) > 1 else 10) + 0.8
    for c, budget in enumerate(columns):
        at = [r for r in paper if r["budget"] == budget]
        ys = [r["avg_retain"].mean for r in at]
        for r, y, ly in zip(at, ys, spread_labels(ys, gap)):
            colour = colours.get(r["method"], "grey")
            side.plot(2 * c, y, marker="x", ms=7, linestyle="none", color=colour)
            side.annotate(f"{display_name(r['method'])} {y:.1f}", (2 * c, y), xytext=(2 * c + 0.15, ly),
                          textcoords="data", fontsize=6, color=colour, va="center",
                          arrowprops={"arrowstyle": "-", "lw": 0.4, "color": colour})
    side.set_xticks([2 * c for c in range(len(columns))], [f"{100 * b:g}%" for b in columns])
    side.set_xlim(-0.3, 2 * len(columns))  # each column two units wide: room for its labels
    side.axhline(100, color="black", lw=0.8, ls=":")
    side.set_title("paper (Qwen3.5-4B, reported)", fontsize=8)
    side.grid(axis="y", alpha=0.3)
    if loyal_rows:
        loyalty_panel(axes[2], loyal_rows, colours, styles)
        if not plotted:  # no legend below the panels: the loyalty panel names its lines
            axes[2].legend(fontsize=6, loc="lower left", ncol=2)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    if plotted:  # below both panels: inside, it covered the trained students' cluster at 5%
        handles, labels = ax.get_legend_handles_labels()
        ncol = 4
        fig.subplots_adjust(bottom=0.08 + 0.03 * math.ceil(len(labels) / ncol))
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=6, frameon=False)
    with atomic_file(out, "wb") as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)


def loyalty_panel(ax: Any, rows: list[dict[str, Any]], colours: dict[str, Any],
                  styles: dict[str, tuple[str, str]]) -> None:
    """Loyalty to the full-token model (% of items with full tokens' answer) vs budget, one line
    per method as in the retain panel (a method without a retain ratio, e.g. none gated, still
    gets its loyalty, in grey)."""
    from ltopd.report.grid_tables import display_name

    reduced = [r for r in rows if r["method"] != "full" and r["budget"] is not None and r["budget"] < 1]
    for method in dict.fromkeys(r["method"] for r in reduced):
        mine = sorted((r for r in reduced if r["method"] == method), key=lambda r: r["budget"])
        marker, style = styles.get(method, ("o", "-"))
        ax.plot([100 * r["budget"] for r in mine], [r["loyalty"].share for r in mine], marker=marker,
                linestyle=style, ms=4, lw=1, color=colours.get(method, "grey"), label=display_name(method))
    ax.axhline(100, color="black", lw=0.8, ls=":")
    ax.set_xlabel("visual-token budget (%)")
    ax.set_ylabel("loyalty to full tokens (% of items, same parsed answer)")
    ax.set_title("ours: loyalty (EffiVLM-Bench), every benchmark and seed pooled", fontsize=8)
    ax.grid(alpha=0.3)


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
