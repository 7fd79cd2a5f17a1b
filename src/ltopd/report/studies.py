"""The paper's comparisons outside Table 2 (ltopd.catalog.TABLES): Tables 3, 4, 6 and 14 (Table 2's
arithmetic per backbone), Figure 4's compression-gap recovery, and Figure 1 right (prefill FLOPs
ratio vs average retain ratio). Pure builders: the job (pipeline/study_jobs.py) reads and writes files."""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ltopd.catalog import METHODS, study_methods
from ltopd.efficiency.analytic import TextArch, keep_count, prefill_flops
from ltopd.report import grid_tables
from ltopd.report.retain import Stat
from ltopd.reported import paper_backbone, paper_rows

NO_GAP = "no gap to recover: pruning did not lower the score"


# -- Tables 3, 4, 6, 14 -------------------------------------------------------------------------

def build_study(results: list[dict[str, Any]], study: str, backbones: Sequence[str], benchmarks: Sequence[str],
                lowest: float, pruned: str) -> tuple[list[dict], list[str]]:
    """(rows, notes) of a study table: per backbone of the study, its full-token row and the
    study's methods at the grid's smallest budget, each retain ratio against THAT backbone's full
    tokens (Table 2's arithmetic); then the paper's rows of the study. ``lowest``: the grid's
    smallest budget; ``pruned``: the untrained student's row, the profile's training.selector
    (ltopd.grid.study_scope gives a profile's backbones, benchmarks, budget and selector)."""
    methods = study_methods(study, pruned)
    ours, notes = [], []
    for bb in backbones:
        rows, bb_notes = grid_tables.build(results, bb, benchmarks, study, methods, pruned=pruned)
        rows = [r for r in rows if r["source"] == "ours"
                and (r["method"] == "full" and r["budget"] == 1.0 or r["method"] != "full" and r["budget"] == lowest)]
        rows.sort(key=lambda r: methods.index(r["method"]))  # the paper's row order (GRPO, GSPO, DAPO, LT-OPD)
        ours += rows
        seeds = sorted({int(r["seed"]) for r in results if r["backbone"] == bb})
        notes.append(f"ours: backbone {bb}, seeds {seeds} (mean" + (" ± sample sd" if len(seeds) > 1 else "")
                     + ")" + "".join(f"; {n}" for n in bb_notes[1:]))
        missing = [m for m in methods if not any(r["method"] == m for r in rows)]
        if missing:
            notes.append(f"{bb}: no results for {missing} at budget {lowest:g}.")
    paper = grid_tables.reported_rows(benchmarks, study)
    paper_bbs = list(dict.fromkeys(r["backbone"] for r in paper))
    notes.append(f"paper: {', '.join(paper_bbs)}, only the cells the paper's text reports"
                 + (f" (backbone not stated; {paper_backbone(study)} assumed)." if study == "table14" else "."))
    return ours + paper, notes


def study_markdown(rows: list[dict[str, Any]], benchmarks: Sequence[str], notes: Sequence[str]) -> str:
    """Table 2's markdown, with a Backbone column when the rows span more than one."""
    return grid_tables.to_markdown(rows, benchmarks, notes, show_backbone=len({r["backbone"] for r in rows}) > 1)


# -- Figure 4: compression-gap recovery ---------------------------------------------------------

RECOVERY_COLUMNS = ("backbone", "method", "benchmark", "s_full", "s_pruned", "s_method", "recovery",
                    "recovery_sd", "seeds", "note")


def recovery(results: list[dict[str, Any]], backbones: Sequence[str], benchmarks: Sequence[str],
             lowest: float, pruned: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, notes): per backbone, trained method and benchmark of Figure 4, the recovery
    100 (S_method - S_pruned) / (S_full - S_pruned) computed per seed (S_pruned = ``pruned``, the
    untrained student: the profile's training.selector, CDPruner in the paper, at the grid's
    smallest budget; S_full = full tokens of the same seed), then mean and sample sd over seeds.
    A seed whose S_full <= S_pruned has no recovery (nothing was lost to pruning); a cell without
    any defined seed stays empty (NaN)."""
    # score[(backbone, method, benchmark)][seed]; full at budget 1, the others at the smallest budget
    score: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for r in results:
        budget = float(r["budget"])
        if (r["method"] == "full" and budget == 1.0) or (r["method"] != "full" and budget == lowest):
            score[(r["backbone"], r["method"], r["benchmark"])][int(r["seed"])] = float(r["score"])
    rows, no_gap = [], {}
    for bb in backbones:
        for method in (m for m in study_methods("figure4", pruned) if m not in ("full", pruned)):
            for bench in benchmarks:
                full, base, ours = (score.get((bb, m, bench), {}) for m in ("full", pruned, method))
                seeds = sorted(set(full) & set(base) & set(ours))
                if not seeds:
                    continue
                values, undefined = [], []
                for s in seeds:
                    gap = full[s] - base[s]
                    if gap > 0:
                        values.append(100.0 * (ours[s] - base[s]) / gap)
                    else:
                        undefined.append(s)
                if undefined:
                    no_gap.setdefault((bb, bench), set()).update(undefined)
                rec = Stat.of(values)
                rows.append({
                    "backbone": bb, "method": method, "benchmark": bench,
                    "s_full": Stat.of([full[s] for s in seeds]).mean,
                    "s_pruned": Stat.of([base[s] for s in seeds]).mean,
                    "s_method": Stat.of([ours[s] for s in seeds]).mean,
                    "recovery": rec.mean, "recovery_sd": rec.sd, "seeds": rec.n,
                    "note": f"{NO_GAP} (seeds {undefined})" if undefined else "",
                })
    notes = [f"S_pruned = {grid_tables.display_name(pruned)} (the untrained student) at {100 * lowest:g}%; "
             "S_full = full tokens; "
             "recovery per seed, then mean ± sample sd over seeds."]
    if no_gap:
        notes.append(f"{NO_GAP}, recovery undefined on: "
                     + "; ".join(f"{bb} {bench} (seeds {sorted(s)})" for (bb, bench), s in no_gap.items()))
    return rows, notes


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def recovery_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=RECOVERY_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: _fmt(r.get(c)) for c in RECOVERY_COLUMNS})
    return buf.getvalue()


# -- Figure 1 right: FLOPs ratio vs average retain ratio ----------------------------------------

FLOPS_COLUMNS = ("source", "backbone", "method", "budget", "kept_tokens", "flops_ratio", "avg_retain",
                 "avg_retain_sd", "seeds", "note")

EPIC_NOTE = ("our EPIC prunes before the LM like every method here, so its ratio equals the others' at "
             "its budget; the paper's EPIC prunes at LM layer 2, hence its 0.200x")


def protocol_tokens(arch: TextArch) -> tuple[float, float, int]:
    """(text tokens, visual tokens, floor) of Table 5's analytic rows: the token means solved
    from the paper's KV figures (efficiency.table5.protocol_tokens) and Appendix E's floor, so
    Figure 1's ratios are Table 5's at 5%."""
    from ltopd.efficiency import table5

    tokens, _, _, floor = table5.protocol_tokens(arch)
    return tokens.text, tokens.visual, int(floor)


def flops_vs_retain(table2_rows: Sequence[dict[str, Any]], arch: TextArch, floor: int, n_visual: float,
                    n_text: float) -> list[dict[str, Any]]:
    """Every (method, budget) row of ours in ``table2_rows`` at the prefill-FLOPs ratio of the
    analytic ``arch`` (``n_text`` + keep_count(``n_visual``, budget, ``floor``) tokens over
    ``n_text`` + ``n_visual``; every method here prunes before the LM), then the paper's points."""
    full_flops = prefill_flops(arch, n_text + n_visual).total
    rows = []
    for r in table2_rows:
        if r["source"] != "ours" or not METHODS[r["method"]].images:  # the blind twin: a baseline, no tokens
            continue
        if r["budget"] >= 1:
            kept, ratio = n_visual, 1.0
        else:
            kept = keep_count(n_visual, r["budget"], floor)
            ratio = prefill_flops(arch, n_text + kept).total / full_flops
        rows.append({"source": "ours", "backbone": r["backbone"], "method": r["method"], "budget": r["budget"],
                     "kept_tokens": kept, "flops_ratio": ratio, "avg_retain": r["avg_retain"].mean,
                     "avg_retain_sd": r["avg_retain"].sd, "seeds": r["seeds"],
                     "note": EPIC_NOTE if r["method"] == "epic" else ""})
    for p in paper_rows("figure1_right"):
        rows.append({"source": "paper", "backbone": paper_backbone("figure1_right"), "method": p["method"],
                     "budget": float(p["budget"]), "kept_tokens": None, "flops_ratio": float(p["flops_ratio"]),
                     "avg_retain": float(p["avg_retain"]), "avg_retain_sd": math.nan, "seeds": "",
                     "note": "prunes at LM layer 2" if p["method"] == "epic" else ""})
    return rows


def flops_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FLOPS_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: f"{r['budget']:g}" if c == "budget" else
                    _fmt(r.get(c), 4 if c == "flops_ratio" else 2) for c in FLOPS_COLUMNS})
    return buf.getvalue()
