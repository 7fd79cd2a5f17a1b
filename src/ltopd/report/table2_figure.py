"""Table 2's figure, readable in ten seconds: four panels on one page, the legend inside it.

* top left, the smallest budget (5%): every method's average retain with its 95% interval, ours as
  a dot, the paper's reported value as a cross on the same line, sorted by ours;
* top right, the same budget: every method minus the untrained student (CDPruner) with its
  interval (same items and bootstrap draws), zero marked: what resolves and what does not;
* bottom left, retain vs budget for the training-free rows (the trained ones run at 5% only and
  sit in the panels above), the downsampling control's points naming the tokens they keep, a
  hollow point where its images equal a larger budget's;
* bottom right, loyalty to the full-token model vs budget.

LT-OPD and CDPruner keep strong colours throughout; every other method is muted.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ltopd.atomic import atomic_file

# The two rows the paper's claim is about, in strong colours (LT-OPD and the untrained student the
# gate compares against: the profile's selector, named by the table's gate row); the others muted.
OURS, REFERENCE = "#c0392b", "#1f4e9c"
MUTED = ("#7f9c6b", "#b08d57", "#8e7cc3", "#6fa8b5", "#c27ba0", "#999999", "#a5a05a", "#d2946a", "#5e8f8f")
MARKERS = "osD^vP*Xh<>p"
PLAIN = "#4d4d4d"  # every other method in the 5% panels: the two strong ones stand out


def strong_colours(reference: str | None) -> dict[str, str]:
    return {"ltopd": OURS, **({reference: REFERENCE} if reference else {})}


def _label(name: str) -> str:
    from ltopd.report.grid_tables import display_name

    return display_name(name)


def _retain(r: Mapping[str, Any]) -> float:
    s = r.get("avg_retain")
    return math.nan if s is None else s.mean


def _ci(r: Mapping[str, Any]) -> tuple[float, float]:
    """(down, up) error-bar lengths: the 95% interval where the row has one, else the seeds' sd."""
    y, ci = _retain(r), r.get("avg_retain_ci")
    if ci is not None and math.isfinite(ci.lo):
        return max(y - ci.lo, 0.0), max(ci.hi - y, 0.0)
    sd = r["avg_retain"].sd if r.get("avg_retain") is not None and math.isfinite(r["avg_retain"].sd) else 0.0
    return sd, sd


def colours(methods: Sequence[str], strong: Mapping[str, str]) -> dict[str, str]:
    out, muted = {}, iter(MUTED * (1 + len(methods) // len(MUTED)))
    for m in methods:
        out[m] = strong.get(m) or next(muted)
    return out


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="dimgrey")
    ax.set_xticks([])
    ax.set_yticks([])


def at_budget(ax: Any, rows: Sequence[Mapping[str, Any]], paper: Mapping[str, float], budget: float,
              strong_of: Mapping[str, str]) -> list[str]:
    """Ours (dot, interval) and the paper's (cross) per method at ``budget``, best on top; returns
    the methods in their plotted order (top first)."""
    at = sorted((r for r in rows if r["budget"] == budget and math.isfinite(_retain(r))), key=_retain)
    if not at:
        _empty(ax, "no retain ratio at this budget\n(no benchmark passed its gate: see the table's notes)")
        return []
    for i, r in enumerate(at):
        m = r["method"]
        lo, hi = _ci(r)
        strong = m in strong_of
        ax.errorbar(_retain(r), i, xerr=[[lo], [hi]], fmt="o", color=strong_of.get(m, PLAIN), ms=6 if strong else 4,
                    lw=2 if strong else 1, capsize=2)
        if m in paper:
            ax.plot(paper[m], i, marker="x", ms=7, color=strong_of.get(m, PLAIN), mew=2 if strong else 1)
    ax.set_yticks(range(len(at)), [_label(r["method"]) for r in at], fontsize=7)
    for tick, r in zip(ax.get_yticklabels(), at):
        if r["method"] in strong_of:
            tick.set_color(strong_of[r["method"]])
            tick.set_fontweight("bold")
    ax.plot([], [], "o", color="dimgrey", label="ours, 95% CI")
    ax.plot([], [], "x", color="dimgrey", label="paper (Qwen3.5-4B)")
    ax.legend(fontsize=6, loc="lower right")
    ax.axvline(100, color="black", lw=0.8, ls=":")
    ax.set_xlabel("average retain ratio (%)")
    ax.set_title(f"at {100 * budget:g}%: ours vs the paper, best on top", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return [r["method"] for r in at][::-1]


def forest(ax: Any, versus: Mapping[str, Any], order: Sequence[str], strong_of: Mapping[str, str]) -> None:
    """Each method minus the reference (its interval), in the 5% panel's order."""
    rows, ref = versus.get("rows") or {}, versus.get("reference")
    shown = [m for m in order if m in rows][::-1]
    if not shown:
        _empty(ax, "no paired difference\n(no gated benchmark, or no reference row)")
        return
    for i, m in enumerate(shown):
        d = rows[m]
        resolved, strong, c = d["lo"] > 0 or d["hi"] < 0, m in strong_of, strong_of.get(m, PLAIN)
        ax.errorbar(d["estimate"], i, xerr=[[d["estimate"] - d["lo"]], [d["hi"] - d["estimate"]]], fmt="o",
                    color=c, ms=6 if strong else 4, lw=2 if strong else 1, capsize=2, mfc=c if resolved else "white")
    ax.set_yticks(range(len(shown)), [_label(m) for m in shown], fontsize=7)
    for tick, m in zip(ax.get_yticklabels(), shown):
        if m in strong_of:
            tick.set_color(strong_of[m])
            tick.set_fontweight("bold")
    ax.axvline(0, color=strong_of.get(ref, PLAIN), lw=1)
    ax.set_xlabel(f"average retain minus {_label(ref)} (points)")
    ax.set_title(f"at {100 * versus['budget']:g}%: each method - {_label(ref)}, 95% CI "
                 "(filled: excludes 0)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def training_free(ax: Any, rows: Sequence[Mapping[str, Any]], colour: Mapping[str, str],
                  strong_of: Mapping[str, str]) -> None:
    """Retain vs budget of the selectors and the downsampling control, one line each."""
    from ltopd.catalog import method as method_entry

    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if method_entry(m).kind in ("selector", "resize")]
    plotted = 0
    for j, m in enumerate(methods):
        mine = sorted((r for r in rows if r["method"] == m and math.isfinite(_retain(r))), key=lambda r: r["budget"])
        if not mine:
            continue
        strong = m in strong_of
        errs = [_ci(r) for r in mine]
        xs, ys = [100 * r["budget"] for r in mine], [_retain(r) for r in mine]
        ax.errorbar(xs, ys, yerr=[[e[0] for e in errs], [e[1] for e in errs]], marker=MARKERS[j % len(MARKERS)],
                    color=colour[m], lw=2.2 if strong else 1, ms=6 if strong else 4, capsize=2,
                    label=_label(m), zorder=3 if strong else 2, alpha=1 if strong else 0.85)
        for r, x, y in zip(mine, xs, ys):
            if "tokens" in r:  # the downsampling control: what it keeps, and its repeats hollow
                ax.annotate(f"{r['tokens']:.0f} tok" + (f" (= {100 * r['same_as']:g}%)" if r.get("same_as") else ""),
                            (x, y), xytext=(3, -9), textcoords="offset points", fontsize=6, color=colour[m])
                if r.get("same_as"):
                    ax.plot(x, y, "o", ms=7, mfc="white", mec=colour[m], zorder=4)
        plotted += 1
    if not plotted:
        _empty(ax, "no retain ratio to plot\n(no benchmark passed its gate, see the table's notes)")
        return
    ax.axhline(100, color="black", lw=0.8, ls=":")
    ax.set_xlabel("visual-token budget (%)")
    ax.set_ylabel("average retain ratio (%)")
    ax.set_title("training-free rows vs budget (95% CI; downsampling: tokens kept per item)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.set_ylim(top=max(ax.get_ylim()[1], 112))  # room above 100% for the legend
    ax.legend(fontsize=6, loc="upper left", ncol=4, framealpha=0.9)


def loyalty(ax: Any, rows: Sequence[Mapping[str, Any]], colour: Mapping[str, str],
            strong_of: Mapping[str, str]) -> None:
    """Loyalty to the full-token model (% of items with full tokens' parsed answer) vs budget."""
    reduced = [r for r in rows if r.get("loyalty") is not None and r["method"] != "full"]
    if not reduced:
        _empty(ax, "no loyalty (the table has no predictions)")
        return
    for j, m in enumerate(dict.fromkeys(r["method"] for r in reduced)):
        mine = sorted((r for r in reduced if r["method"] == m), key=lambda r: r["budget"])
        strong = m in strong_of
        ax.plot([100 * r["budget"] for r in mine], [r["loyalty"].share for r in mine],
                marker=MARKERS[j % len(MARKERS)], lw=2.2 if strong else 1, ms=6 if strong else 4,
                color=colour.get(m, "grey"), label=_label(m), zorder=3 if strong else 2,
                linestyle="-" if len(mine) > 1 else "none")
    ax.axhline(100, color="black", lw=0.8, ls=":")
    ax.set_xlabel("visual-token budget (%)")
    ax.set_ylabel("loyalty to full tokens (% of items)")
    ax.set_title("loyalty: same parsed answer as full tokens, all benchmarks and seeds", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=5.5, loc="lower right", ncol=2)


def draw(rows: list[dict[str, Any]], out: str | Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ours = [r for r in rows if r["source"] == "ours" and r["budget"] is not None and r["budget"] < 1]
    methods = list(dict.fromkeys(r["method"] for r in ours))
    gate = next((r for r in rows if r["source"] == "gate"), {})
    strong_of = strong_colours((gate.get("versus") or {}).get("reference"))
    colour = colours(methods, strong_of)
    budget = min((r["budget"] for r in ours), default=None)
    paper_at = [r for r in rows if r["source"] == "paper" and r.get("avg_retain") is not None and r["budget"] < 1]
    lowest = min((r["budget"] for r in paper_at), default=None)
    paper = {r["method"]: r["avg_retain"].mean for r in paper_at if r["budget"] == lowest}
    fig, axes = plt.subplots(2, 2, figsize=(13.0, 9.0), dpi=110, gridspec_kw={"height_ratios": [1.15, 1]})
    order = at_budget(axes[0, 0], ours, paper if lowest == budget else {}, budget, strong_of) if budget else []
    forest(axes[0, 1], gate.get("versus") or {}, order, strong_of)
    training_free(axes[1, 0], ours, colour, strong_of)
    loyalty(axes[1, 1], ours, colour, strong_of)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_file(out, "wb") as fh:
        fig.savefig(fh, format="png")
    plt.close(fig)
