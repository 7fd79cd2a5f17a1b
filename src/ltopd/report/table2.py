"""results/table2.csv and .md: methods x budgets on one backbone, each benchmark's official score
and the average retain ratio, our rows (mean and spread over seeds) beside the paper's."""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ltopd.grid import METHODS
from ltopd.report.reported import paper_backbone, paper_rows
from ltopd.report.retain import Stat, retain_ratio

# Row order within a budget: the paper's (training-free, then training-based, LT-OPD last).
ORDER = ["full", "fastv", "divprune", "dart", "cdpruner", "hiprune", "random", "uniform",
         "sft", "sft_curriculum", "llava_mini", "epic", "kd_fixed_prefix", "opd_no_curriculum", "ltopd",
         "ltopd_no_plateau", "ltopd_forward_kl", "ltopd_reverse_kl", "ltopd_teacher_ema", "ltopd_trust_region"]
LABELS = {"full": "Full tokens", "fastv": "FastV", "divprune": "DivPrune", "dart": "DART",
          "cdpruner": "CDPruner", "hiprune": "HiPrune", "random": "Random", "uniform": "Uniform",
          "sft": "SFT", "sft_curriculum": "SFT + curriculum", "llava_mini": "LLaVA-Mini", "epic": "EPIC",
          "kd_fixed_prefix": "Curriculum + fixed-prefix JSD (KD)",
          "opd_no_curriculum": "On-policy JSD, no curriculum", "ltopd": "LT-OPD",
          "ltopd_no_plateau": "LT-OPD, no final plateau", "ltopd_forward_kl": "LT-OPD, forward KL",
          "ltopd_reverse_kl": "LT-OPD, reverse KL", "ltopd_teacher_ema": "LT-OPD, EMA teacher",
          "ltopd_trust_region": "LT-OPD, trust-region teacher", "grpo": "GRPO", "gspo": "GSPO", "dapo": "DAPO"}
BENCH_LABELS = {"vstar": "V*Bench", "hrbench4k": "HR-4K", "gqa": "GQA", "mmmu": "MMMU", "mmbench": "MMB",
                "mme": "MME", "pope": "POPE", "textvqa": "TVQA", "ocrbench": "OCRB",
                "muirbench": "MuirBench", "mvbench": "MVBench"}


def load_results(files: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Metrics files written by `ltopd evaluate` (each names its backbone, method, budget,
    benchmark and seed)."""
    out = []
    for f in files:
        m = json.loads(Path(f).read_text())
        missing = [k for k in ("backbone", "method", "budget", "benchmark", "seed", "score") if k not in m]
        if missing:
            raise ValueError(f"{f}: not an evaluation metrics file (missing {missing})")
        out.append(m)
    return out


def _order(method: str) -> int:
    return ORDER.index(method) if method in ORDER else len(ORDER) + sorted(METHODS).index(method)


def our_rows(results: list[dict[str, Any]], backbone: str, benchmarks: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (method, budget) of ``backbone``: per benchmark a Stat over seeds, the average
    retain ratio as a Stat over seeds, and the benchmarks it averaged over."""
    scores: dict[tuple[str, float], dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in results:
        if r["backbone"] == backbone and r["benchmark"] in benchmarks:
            scores[(r["method"], float(r["budget"]))][int(r["seed"])][r["benchmark"]] = float(r["score"])
    full = scores.get(("full", 1.0), {})
    rows = []
    for (method, budget), per_seed in scores.items():
        retains, used = [], set()
        for seed, s in per_seed.items():
            value, over = retain_ratio(s, full.get(seed, {}), benchmarks)
            retains.append(value)
            used.update(over)
        rows.append({"source": "ours", "backbone": backbone, "method": method, "budget": budget,
                     "seeds": len(per_seed),
                     "bench": {b: Stat.of([s[b] for s in per_seed.values() if b in s]) for b in benchmarks},
                     "avg_retain": Stat.of(retains), "retain_over": sorted(used, key=list(benchmarks).index)})
    return sorted(rows, key=lambda r: (r["method"] != "full", -r["budget"], _order(r["method"])))


def reported_rows(benchmarks: Sequence[str], table: str = "table2") -> list[dict[str, Any]]:
    """The paper's rows of ``table`` in our row format (no spread: the paper reports one run). A
    row's own ``backbone`` (tables spanning several models) overrides the table's."""
    rows = []
    for r in paper_rows(table):
        rows.append({"source": "paper", "backbone": r.get("backbone", paper_backbone(table)), "method": r["method"],
                     "budget": float(r["budget"]), "seeds": "",
                     "bench": {b: Stat(float(r[b]), math.nan, 1) for b in benchmarks if b in r},
                     "avg_retain": Stat(float(r["avg_retain"]), math.nan, 1) if "avg_retain" in r else None,
                     "retain_over": []})
    return rows


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def to_csv(rows: list[dict[str, Any]], benchmarks: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["source", "backbone", "method", "budget", "seeds", *benchmarks, "avg_retain",
                *[f"{b}_sd" for b in benchmarks], "avg_retain_sd", "retain_over"])
    for r in rows:
        stats = [r["bench"].get(b) for b in benchmarks]
        avg = r["avg_retain"]
        w.writerow([r["source"], r["backbone"], r["method"], f"{r['budget']:g}", r["seeds"],
                    *[_num(s.mean if s else None, 2) for s in stats], _num(avg.mean if avg else None, 2),
                    *[_num(s.sd if s else None, 2) for s in stats], _num(avg.sd if avg else None, 2),
                    " ".join(r["retain_over"])])
    return buf.getvalue()


def _cell(s: Stat | None, seeds: int | str) -> str:
    if s is None or math.isnan(s.mean):
        return ""
    return f"{s.mean:.1f} ± {s.sd:.1f}" if isinstance(seeds, int) and seeds > 1 else f"{s.mean:.1f}"


def to_markdown(rows: list[dict[str, Any]], benchmarks: Sequence[str], notes: Sequence[str] = (),
                show_backbone: bool = False) -> str:
    """``show_backbone`` adds a Backbone column (tables spanning several models); off, the
    output is Table 2's."""
    head = ["", *(["Backbone"] if show_backbone else []), "Method", "Budget",
            *[BENCH_LABELS.get(b, b) for b in benchmarks], "Avg. retain (%)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mark = "paper" if r["source"] == "paper" else "ours"
        budget = "100%" if r["budget"] >= 1 else f"{100 * r['budget']:g}%"
        cells = [_cell(r["bench"].get(b), r["seeds"]) for b in benchmarks]
        lines.append("| " + " | ".join([mark, *([r["backbone"]] if show_backbone else []),
                                        LABELS.get(r["method"], r["method"]), budget, *cells,
                                        _cell(r["avg_retain"], r["seeds"])]) + " |")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


def build(results: list[dict[str, Any]], backbone: str, benchmarks: Sequence[str], table: str = "table2",
          methods: Sequence[str] | None = None) -> tuple[list[dict], list[str]]:
    """(rows: ours then the paper's, notes for the markdown). ``methods`` keeps only those rows
    of ours (plus full tokens, the retain ratio's reference), as the ablation tables do."""
    ours = our_rows(results, backbone, benchmarks)
    if methods is not None:
        ours = [r for r in ours if r["method"] == "full" or r["method"] in methods]
    if not any(r["method"] == "full" for r in ours):
        raise ValueError(f"no full-token results for backbone {backbone!r}: the retain ratio needs them")
    seeds = sorted({int(r["seed"]) for r in results if r["backbone"] == backbone})
    notes = [f"ours: backbone {backbone}, seeds {seeds} (mean" + (" ± sample sd" if len(seeds) > 1 else "")
             + f"); paper: {paper_backbone(table)}, only the cells the paper's text reports."]
    full = next(r for r in ours if r["method"] == "full")
    zero = [b for b in benchmarks if full["bench"][b].n and full["bench"][b].mean == 0]
    if zero:
        notes.append(f"full-token score 0 on {zero}: left out of the average retain ratio (undefined).")
    return ours + reported_rows(benchmarks, table), notes
