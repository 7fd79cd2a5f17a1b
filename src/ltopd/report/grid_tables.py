"""The grid's tables, Tables 2, 7, 12 and Appendix H (results/<table>.csv and .md): methods x
budgets on one backbone, each benchmark's official score and the average retain ratio, our rows
(mean and spread over seeds) beside the paper's.

Given the evaluations' per-item predictions (:func:`build` with ``predictions``), Table 2 also

* scores the question-only baseline (ltopd.stats.gates.question_only: the better of an answer
  prior and a uniform guess): for a synthetic twin the prior is fitted on the twin's records at
  the fit seed (``fit_records``), for a benchmark without them (real data) K-fold cross-fitted
  on the scored records, folds by resampling unit;
* gates each benchmark: it enters the average retain ratio only if the full-token model beats
  that baseline, and the blind twin (method ``blind``) where it was evaluated, by at least
  :data:`GATE_SE` standard errors each (paired bootstrap SEs on the first seed's items,
  ltopd.stats.bootstrap); with no benchmark passing the average is n/a;
* gives every average retain ratio a 95% bootstrap interval (items resampled per benchmark by
  unit, jointly for the method and full tokens, each seed's record set on its own draws), and the
  retain differences of :data:`DIFFERENCES` at the smallest budget with their intervals (LT-OPD
  minus the untrained student, the selector it trains with, the profile's training.selector:
  CDPruner in the paper; LT-OPD + merge minus LT-OPD and minus the untrained student), each with
  the reported figures' difference beside it where both are reported.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltopd import integrity
from ltopd.catalog import BENCHMARKS, EXTERNAL_PREFIX, METHODS
from ltopd.catalog import method as method_entry
from ltopd.jsonl import read_jsonl
from ltopd.report.retain import Stat, retain_ratio
from ltopd.reported import paper_backbone, paper_rows
from ltopd.stats import bootstrap
from ltopd.stats.gates import GATE_SE, Gate, gate, question_only
from ltopd.stats.loyalty import Loyalty, loyalty_of_rows, pooled

QO_LABEL = "Question-only (out of sample)"

# The untrained student's row in DIFFERENCES: the profile's training.selector (``pruned``).
PRUNED = "<training.selector>"
# Table 2's notes: (method, the row it is compared with) at the smallest budget, average retain
# minus average retain on the same items and bootstrap draws, with its interval.
DIFFERENCES: tuple[tuple[str, str], ...] = (
    ("ltopd", PRUNED),
    ("learnable_merge", "ltopd"),
    ("learnable_merge", PRUNED),
)

def display_name(name: str) -> str:
    """A method's or benchmark's label in tables and figures (the name itself if it has none); an
    external student's row: its entry's name, marked external."""
    entry = METHODS.get(name) or BENCHMARKS.get(name)
    if entry is None and name.startswith(EXTERNAL_PREFIX):
        entry = method_entry(name)
    return entry.label if entry else name


def load_results(files: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Metrics files written by `ltopd evaluate` (each names its backbone, method, budget,
    benchmark and seed)."""
    out = []
    for f in files:
        integrity.check(f)  # sealed by `ltopd evaluate`: a cut-short file is refused, never scored
        m = json.loads(Path(f).read_text())
        missing = [k for k in ("backbone", "method", "budget", "benchmark", "seed", "score") if k not in m]
        if missing:
            raise ValueError(f"{f}: not an evaluation metrics file (missing {missing})")
        out.append(m)
    return out


def _order(method: str) -> tuple[int, str]:
    """Row order within a budget: the catalog's (the paper's), then the external students by name."""
    return (list(METHODS).index(method), "") if method in METHODS else (len(METHODS), method)


def _scores(results: list[dict[str, Any]], backbone: str,
            benchmarks: Sequence[str]) -> dict[tuple[str, float], dict[int, dict[str, float]]]:
    """(method, budget) -> seed -> benchmark -> score, for ``backbone`` and ``benchmarks``."""
    scores: dict[tuple[str, float], dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in results:
        if r["backbone"] == backbone and r["benchmark"] in benchmarks:
            scores[(r["method"], float(r["budget"]))][int(r["seed"])][r["benchmark"]] = float(r["score"])
    return scores


def our_rows(results: list[dict[str, Any]], backbone: str, benchmarks: Sequence[str],
             over: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per (method, budget) of ``backbone``: per benchmark a Stat over seeds, the average
    retain ratio as a Stat over seeds, and the benchmarks it averaged over (those of ``over``,
    default all of ``benchmarks``, that have a positive full-token score)."""
    eligible = list(benchmarks) if over is None else [b for b in benchmarks if b in over]
    scores = _scores(results, backbone, benchmarks)
    full = scores.get(("full", 1.0), {})
    rows = []
    for (method, budget), per_seed in scores.items():
        retains, used = [], set()
        for seed, s in per_seed.items():
            value, averaged = retain_ratio(s, full.get(seed, {}), eligible)
            retains.append(value)
            used.update(averaged)
        rows.append({"source": "ours", "backbone": backbone, "method": method, "budget": budget,
                     "seeds": len(per_seed),
                     "bench": {b: Stat.of([s[b] for s in per_seed.values() if b in s]) for b in benchmarks},
                     "avg_retain": Stat.of(retains), "retain_over": sorted(used, key=list(benchmarks).index)})
    return sorted(rows, key=lambda r: (r["method"] != "full", -r["budget"], _order(r["method"])))


def seed_comparisons(results: list[dict[str, Any]], backbone: str, benchmarks: Sequence[str],
                     reference: str | None) -> list[str]:
    """Per benchmark, each method minus ``reference`` at the smallest budget both have, paired by
    seed (the same seed's items and, for a trained method, its training seed): the mean over the
    common seeds with its 95% t interval (:func:`bootstrap.seed_interval`). One line per method with
    at least two seeds in common; none when the reference has fewer than two seeds or is None.
    ``reference``: the untrained student, the profile's training.selector."""
    if reference is None:
        return []
    scores = _scores(results, backbone, benchmarks)
    budgets = [b for (m, b) in scores if m == reference]
    if not budgets:
        return []
    lowest = min(budgets)
    ref = scores[(reference, lowest)]
    lines = []
    for (method, budget), per_seed in sorted(scores.items(), key=lambda kv: _order(kv[0][0])):
        if budget != lowest or method == reference:
            continue
        common = sorted(set(per_seed) & set(ref))
        if len(common) < 2:
            continue
        cells = []
        for b in benchmarks:
            seeds = [s for s in common if b in per_seed[s] and b in ref[s]]
            if len(seeds) >= 2:
                d = bootstrap.seed_interval([per_seed[s][b] - ref[s][b] for s in seeds])
                cells.append(f"{display_name(b)} {d.estimate:+.1f} {bootstrap.format_ci(d)}")
        lines.append(f"{display_name(method)} - {display_name(reference)} at {100 * lowest:g}%, paired by seed "
                     f"(seeds {common}; mean [95% t interval]): " + "; ".join(cells) + ".")
    return lines


def kept_fraction_note(results: list[dict[str, Any]], backbone: str, benchmarks: Sequence[str]) -> str | None:
    """The share of visual tokens the language model sees at the smallest budget: per benchmark
    the visual tokens kept over the visual tokens of all its evaluated items (every reduced row
    and seed at that budget), their mean over the benchmarks (as the paper's ~13% is) and the
    share pooled over every item. None when the metrics do not count tokens (older runs)."""
    reduced = [r for r in results if r["backbone"] == backbone and r["benchmark"] in benchmarks
               and float(r["budget"]) < 1 and "kept_tokens" in r and method_entry(r["method"]).kind != "resize"]
    if not reduced:
        return None
    lowest = min(float(r["budget"]) for r in reduced)
    kept: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in reduced:
        if float(r["budget"]) == lowest:
            kept[r["benchmark"]][0] += int(r["kept_tokens"])
            kept[r["benchmark"]][1] += int(r["visual_tokens"])
    per = {b: 100.0 * k / n for b, (k, n) in kept.items() if n}
    if not per:
        return None
    order = [b for b in benchmarks if b in per]
    mean = sum(per.values()) / len(per)
    pooled = 100.0 * sum(k for k, _ in kept.values()) / sum(n for _, n in kept.values())
    return (f"kept fraction at {100 * lowest:g}%: {mean:.1f}% (visual tokens kept over visual tokens, all evaluated "
            f"items of each benchmark, averaged over the benchmarks as the paper's ~13% is; pooled over every item "
            f"{pooled:.1f}%; " + ", ".join(f"{display_name(b)} {per[b]:.1f}" for b in order) + ").")


def paper_order_note(table: str) -> str | None:
    """The paper's rows at its smallest reported budget, ordered by average retain (one run, no
    interval): the order ours is read beside."""
    rows = [r for r in paper_rows(table) if "avg_retain" in r and float(r["budget"]) < 1]
    if not rows:
        return None
    lowest = min(float(r["budget"]) for r in rows)
    at = sorted((r for r in rows if float(r["budget"]) == lowest), key=lambda r: -float(r["avg_retain"]))
    later = any("quoted_in" in r for r in at)
    return (f"the paper's order at {100 * lowest:g}% ({paper_backbone(table)}, average retain, one run"
            + ("; * the authors' later release, not the paper's table" if later else "") + "): "
            + "; ".join(f"{display_name(r['method'])}{'*' if 'quoted_in' in r else ''} {float(r['avg_retain']):.1f}"
                        for r in at) + ".")


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


def load_predictions(files: Sequence[str | Path]) -> dict[tuple[str, str, float, str, int], list[dict]]:
    """(backbone, method, budget, benchmark, seed) -> the prediction rows of `ltopd evaluate`
    (each predictions.jsonl is named by the metrics.json written beside it)."""
    out: dict[tuple[str, str, float, str, int], list[dict]] = {}
    for f in files:
        f = Path(f)
        (m,) = load_results([f.parent / "metrics.json"])
        key = (m["backbone"], m["method"], float(m["budget"]), m["benchmark"], int(m["seed"]))
        integrity.check(f)
        rows = read_jsonl(f)  # a bad line: ValueError naming file and line
        if key in out:
            raise ValueError(f"{f}: a second predictions file for {key}")
        out[key] = rows
    return out


def _runs(preds: Mapping[tuple, list[dict]], backbone: str, method: str, budget: float,
          benchmarks: Sequence[str] | None = None) -> dict[int, dict[str, list[dict]]]:
    """seed -> benchmark -> prediction rows of (method, budget): every benchmark it has, or
    (``benchmarks`` given) those, for the seeds that have all of them."""
    by_seed: dict[int, dict[str, list[dict]]] = defaultdict(dict)
    for (bb, m, b, bench, seed), rows in preds.items():
        if bb == backbone and m == method and b == budget and (benchmarks is None or bench in benchmarks):
            by_seed[seed][bench] = rows
    if benchmarks is None:
        return dict(sorted(by_seed.items()))
    return {s: v for s, v in sorted(by_seed.items()) if all(b in v for b in benchmarks)}


@dataclass(frozen=True)
class Evidence:
    """What the per-item predictions add to the table (see :func:`evidence`)."""

    gates: dict[str, Gate]
    gated: list[str]                               # benchmarks that passed, in table order
    intervals: dict[tuple[str, float], bootstrap.Interval]  # (method, budget) -> avg retain CI
    rows: list[dict[str, Any]]                     # the question-only and gate rows
    notes: list[str]


def evidence(preds: Mapping[tuple, list[dict]], backbone: str, benchmarks: Sequence[str],
             rows: Sequence[tuple[str, float]], fit_records: Mapping[tuple[str, int], Sequence[dict]] | None = None,
             n_boot: int = 1000, boot_seed: int = 0, need: float = GATE_SE, level: float = 0.95, *,
             pruned: str | None, table: str = "table2") -> Evidence:
    """Gates, the out-of-sample question-only baseline and the average-retain intervals of the
    (method, budget) ``rows`` from the per-item predictions ``preds`` (:func:`load_predictions`).

    Question-only: per seed with full-token predictions, ltopd.stats.gates.question_only for
    those items, its prior fitted on ``fit_records[(benchmark, seed)]`` where given, else
    cross-fitted. Gate: on the first such seed, full - QO >= ``need`` SE, and full - blind twin
    where the blind twin has predictions for that seed. Intervals: over the gated benchmarks, the seeds where a row
    has predictions for each; the differences of :data:`DIFFERENCES` (``pruned``: the untrained
    student, training.selector) at the smallest budget where both rows have them, beside the
    difference of ``table``'s reported figures."""
    from ltopd.bench.scoring import score

    fit_records = fit_records or {}
    full_runs = {s: {b: r for b, r in v.items() if b in benchmarks}
                 for s, v in _runs(preds, backbone, "full", 1.0).items()}
    if not full_runs:
        raise ValueError(f"no full-token predictions for backbone {backbone!r}: the gates need them")
    first = min(full_runs)
    blind = _runs(preds, backbone, "blind", 1.0).get(first, {})  # the blind twin on the gate's items
    qo_scores: dict[str, list[float]] = defaultdict(list)
    how: dict[str, set[str]] = defaultdict(set)
    gates: dict[str, Gate] = {}
    for s, per_bench in full_runs.items():
        for b in benchmarks:
            if b not in per_bench:
                continue
            fit = fit_records.get((b, s))
            qo_rows, fitted = question_only(per_bench[b], b, fit, seed=boot_seed)
            how[b].add(fitted)
            qo_scores[b].append(score(b, qo_rows)["score"])
            if s == first:
                gates[b] = gate(per_bench[b], qo_rows, b, s, n_boot, boot_seed, need, blind.get(b))
    gated = [b for b in benchmarks if b in gates and gates[b].passed]
    failed = [b for b in benchmarks if b in gates and b not in gated]
    missing = [b for b in benchmarks if b not in gates]
    level_pct = f"{100 * level:g}%"
    notes = [f"gate (seed {first}): a benchmark enters the average retain ratio only if full tokens beat the "
             f"question-only baseline (out of sample) by >= {need:g} SE (paired bootstrap over units, "
             f"{n_boot} replicates)"
             + (f", and the blind twin (the model asked without the images) too, where evaluated ({sorted(blind)})"
                if blind else "") + "; passed: " + ("; ".join(gates[b].describe() for b in gated) or "none")
             + "; failed: " + ("; ".join(gates[b].describe() for b in failed) or "none")
             + (f"; no full-token predictions (left out): {missing}" if missing else "") + ".",
             "question-only baseline: the most frequent answer per task, template and has-options (out of "
             "sample, falling back to the task's, then 'A' / 'yes'), or a seeded uniform guess among option "
             "letters / yes-no where that is better by 2 SE on the fit records (on the scored ones when "
             "cross-fitted): it beats any constant answer where both questions of an MME image or every "
             "rotation of an MMBench question must be right; per benchmark: "
             + "; ".join(f"{b}: {' / '.join(sorted(how[b]))}" for b in benchmarks if b in how) + "."]
    intervals: dict[tuple[str, float], bootstrap.Interval] = {}
    differences: dict[str, dict[str, Any]] = {}  # the headline's (ltopd.report.headline), on the gate row
    versus: dict[str, Any] = {}  # every row minus the untrained student at the smallest budget (the figure's)
    if not gated:
        notes.append("no benchmark passed the gate: the average retain ratio is n/a (not computed).")
    else:
        full_gated = {s: v for s, v in full_runs.items() if all(b in v for b in gated)}
        runs = {k: {s: v for s, v in _runs(preds, backbone, k[0], k[1], gated).items() if s in full_gated}
                for k in rows}
        runs = {k: v for k, v in runs.items() if v}
        cache = bootstrap.UnitCache()  # every comparison below reads these rows' unit values
        reps = bootstrap.retain_replicates(runs, full_gated, gated, n_boot, boot_seed, cache)
        intervals = {k: bootstrap.interval(p, rep, level) for k, (p, rep) in reps.items()}
        lowest = min((k[1] for k in rows), default=None)
        for method, other in DIFFERENCES:
            other = pruned if other == PRUNED else other
            a, c = (method, lowest), (other, lowest)
            if other is None or a not in runs or c not in runs:
                continue
            d, common = _retain_difference(runs, a, c, full_gated, gated, n_boot, boot_seed, level, cache)
            if d is not None:
                reported = _reported_difference(table, method, other, lowest)
                notes.append(f"{display_name(method)} - {display_name(other)} at {100 * lowest:g}%: {d.estimate:+.1f} "
                             f"retain points, {level_pct} CI {bootstrap.format_ci(d)} (SE {d.se:.2f}; same items and "
                             f"draws, seeds {common}, over {gated}){reported}.")
                entry = {"estimate": d.estimate, "lo": d.lo, "hi": d.hi, "seeds": common}
                if other == pruned:  # a recovery claim: above full tokens on a benchmark is not recovery
                    capped, _ = _retain_difference(runs, a, c, full_gated, gated, n_boot, boot_seed, level, cache,
                                                   cap=100.0)
                    notes.append(f"{display_name(method)} - {display_name(other)} at {100 * lowest:g}%, retain capped "
                                 f"at 100%: {capped.estimate:+.1f} {bootstrap.format_ci(capped)} (each benchmark's "
                                 "retain at most 100% before the average: above full tokens is task learning, not "
                                 "recovery).")
                    entry.update(capped=capped.estimate, capped_lo=capped.lo, capped_hi=capped.hi)
                differences[f"{display_name(method)} - {display_name(other)}"] = entry
        ref = (pruned, lowest)
        if pruned is not None and ref in runs:
            versus = {"reference": pruned, "budget": lowest, "rows": {}}
            for k in sorted((k for k in runs if k[1] == lowest and k != ref), key=lambda k: _order(k[0])):
                d, _ = _retain_difference(runs, k, ref, full_gated, gated, n_boot, boot_seed, level, cache)
                if d is not None:
                    versus["rows"][k[0]] = {"estimate": d.estimate, "lo": d.lo, "hi": d.hi}
        above = above_full_note(runs, lowest, full_gated, gated, n_boot, boot_seed, level, cache)
        if above:
            notes.append(above)
        order = order_note(runs, intervals, lowest, full_gated, gated, n_boot, boot_seed, level, cache)
        if order:
            notes.append(order)
        notes.append(f"[lo, hi] after an average retain ratio: {level_pct} percentile bootstrap interval over items "
                     f"({n_boot} replicates, seed {boot_seed}; units: MME image pairs within category, MMBench "
                     "circular groups, POPE / HR-Bench rows within split / cycle category, rows otherwise; each "
                     "seed's record set drawn on its own, the method and full tokens on the same draws). It "
                     "covers item sampling only; ± is the spread over seeds.")
    qo_row = {"source": "baseline", "backbone": backbone, "method": "question_only", "budget": None,
              "seeds": len(full_runs), "bench": {b: Stat.of(qo_scores.get(b, [])) for b in benchmarks},
              "avg_retain": None, "retain_over": []}
    gate_row = {"source": "gate", "backbone": backbone, "method": "gate", "budget": None, "seeds": 1,
                "label": f"Gate: full - QO{' and full - blind' if blind else ''} >= {need:g} SE",
                "bench": {b: Stat(gates[b].binding_margin, math.nan, 1) if b in gates else Stat(math.nan, math.nan, 0)
                          for b in benchmarks},
                "text": {b: g.verdict for b, g in gates.items()}, "differences": differences, "versus": versus,
                "avg_retain": None, "retain_over": gated}
    return Evidence(gates, gated, intervals, [qo_row, gate_row], notes)


def _reported_difference(table: str, method: str, other: str, budget: float) -> str:
    """"; reported (<backbone>): a - c = d" from ``table``'s reported average retain ratios of both
    rows at ``budget`` (the paper's, or the authors' later release for LT-OPD + merge), or ""."""
    reported = {r["method"]: float(r["avg_retain"]) for r in paper_rows(table)
                if "avg_retain" in r and float(r["budget"]) == budget}
    if method not in reported or other not in reported:
        return ""
    a, c = reported[method], reported[other]
    return f"; reported ({paper_backbone(table)}): {a:.1f} - {c:.1f} = {a - c:+.1f}"


def _retain_difference(runs: Mapping[tuple[str, float], Mapping[int, Mapping[str, list[dict]]]],
                       a: tuple[str, float], c: tuple[str, float], full: Mapping[int, Mapping[str, list[dict]]],
                       gated: Sequence[str], n_boot: int, boot_seed: int, level: float,
                       cache: bootstrap.UnitCache | None = None,
                       cap: float | None = None) -> tuple[bootstrap.Interval | None, list[int]]:
    """Average retain of row ``a`` minus row ``c`` over the seeds both have, on the same items and
    bootstrap draws, with its interval (None when they share no seed), and those seeds. ``cap``:
    each benchmark's retain capped there first (bootstrap.retain_replicates)."""
    common = sorted(set(runs[a]) & set(runs[c]))
    if not common:
        return None, common
    pair = bootstrap.retain_replicates({"a": {s: runs[a][s] for s in common}, "c": {s: runs[c][s] for s in common}},
                                       full, gated, n_boot, boot_seed, cache, cap=cap)
    return bootstrap.interval(pair["a"][0] - pair["c"][0], pair["a"][1] - pair["c"][1], level), common


def above_full_note(runs: Mapping[tuple[str, float], Mapping[int, Mapping[str, list[dict]]]],
                    budget: float | None, full: Mapping[int, Mapping[str, list[dict]]], gated: Sequence[str],
                    n_boot: int, boot_seed: int, level: float = 0.95,
                    cache: bootstrap.UnitCache | None = None) -> str | None:
    """The trained rows at ``budget`` that score above the full-token model on a benchmark beyond
    their interval (the benchmark's retain interval, over the row's seeds, above 100%): a student
    that beats its teacher there has learned the task, which is not recovering what pruning took."""
    if budget is None:
        return None
    found = []
    for (m, b) in sorted((k for k in runs if k[1] == budget and method_entry(k[0]).kind == "trained"),
                         key=lambda k: _order(k[0])):
        for bench in gated:
            point, reps = bootstrap.retain_replicates({"m": runs[(m, b)]}, full, [bench], n_boot, boot_seed,
                                                      cache)["m"]
            ci = bootstrap.interval(point, reps, level)
            if ci.lo > 100:
                found.append(f"{display_name(m)} {display_name(bench)} {ci.estimate:.1f} {bootstrap.format_ci(ci)}")
    return (f"above full tokens at {100 * budget:g}% (a benchmark's retain and its {100 * level:g}% interval above "
            "100%: task learning, not recovery): " + ("; ".join(found) or "none") + ".")


def order_note(runs: Mapping[tuple[str, float], Mapping[int, Mapping[str, list[dict]]]],
               intervals: Mapping[tuple[str, float], bootstrap.Interval], budget: float | None,
               full: Mapping[int, Mapping[str, list[dict]]], gated: Sequence[str], n_boot: int, boot_seed: int,
               level: float = 0.95, cache: bootstrap.UnitCache | None = None) -> str | None:
    """The rows at ``budget`` ordered by average retain, and whether each neighbouring pair is
    resolved: the pair's difference on the same items and draws (the seeds both have) with its
    interval; resolved when the interval excludes zero. None with fewer than two rows."""
    at = sorted((k for k in runs if k[1] == budget and k in intervals), key=lambda k: (-intervals[k].estimate, k[0]))
    if budget is None or len(at) < 2:
        return None
    ranked = "; ".join(f"{display_name(m)} {intervals[(m, b)].estimate:.1f} {bootstrap.format_ci(intervals[(m, b)])}"
                       for m, b in at)
    pairs = []
    for hi, lo in zip(at, at[1:]):
        d, common = _retain_difference(runs, hi, lo, full, gated, n_boot, boot_seed, level, cache)
        if d is not None:
            verdict = "resolved" if d.lo > 0 or d.hi < 0 else "not resolved"
            pairs.append(f"{display_name(hi[0])} - {display_name(lo[0])} {d.estimate:+.1f} "
                         f"{bootstrap.format_ci(d)} (seeds {common}): {verdict}")
    return (f"order at {100 * budget:g}% (average retain [{100 * level:g}% interval]): {ranked}. Neighbours, "
            f"same items and draws: " + "; ".join(pairs) + ".")


def loyalties(preds: Mapping[tuple, list[dict]], backbone: str, benchmarks: Sequence[str],
              rows: Sequence[tuple[str, float]]) -> dict[tuple[str, float], tuple[Loyalty, dict[str, Loyalty]]]:
    """(method, budget) -> (its loyalty to the full-token model over every benchmark and seed
    together, per benchmark): each seed's items paired with the full-token predictions of the
    same seed (ltopd.stats.loyalty); rows without such pairs are left out."""
    full = _runs(preds, backbone, "full", 1.0)
    out = {}
    for method, budget in rows:
        per_bench: dict[str, list[Loyalty]] = defaultdict(list)
        for seed, per in _runs(preds, backbone, method, budget).items():
            for b in benchmarks:
                if b in per and b in full.get(seed, {}):
                    per_bench[b].append(loyalty_of_rows(b, full[seed][b], per[b]))
        if per_bench:
            out[(method, budget)] = (pooled(x for v in per_bench.values() for x in v),
                                     {b: pooled(v) for b, v in per_bench.items()})
    return out


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _budget(r: dict[str, Any], csv_form: bool) -> str:
    if r["budget"] is None:
        return ""
    if csv_form:
        return f"{r['budget']:g}"
    return "100%" if r["budget"] >= 1 else f"{100 * r['budget']:g}%"


def to_csv(rows: list[dict[str, Any]], benchmarks: Sequence[str]) -> str:
    """One line per row. Beside the table's columns: ``avg_retain_lo`` / ``_hi`` (the 95%
    bootstrap interval, when the table has predictions), a ``baseline`` row (the question-only
    scores) and a ``gate`` row (per benchmark the deciding margin in SEs: full - QO, or full -
    blind twin where that is smaller; its ``retain_over`` lists the benchmarks that passed).
    Loyalty to the full-token model (:func:`loyalties`, when the table has predictions):
    ``loyalty`` (% of items whose parsed answer equals full tokens' on the same item, over every
    benchmark and seed together), ``loyalty_items`` (those items), ``flips_right_wrong`` /
    ``flips_wrong_right`` (counts) with their ``_pct`` shares, and ``<benchmark>_loyalty``."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["source", "backbone", "method", "budget", "seeds", *benchmarks, "avg_retain",
                *[f"{b}_sd" for b in benchmarks], "avg_retain_sd", "retain_over", "avg_retain_lo", "avg_retain_hi",
                "loyalty", "loyalty_items", "flips_right_wrong", "flips_wrong_right", "flips_right_wrong_pct",
                "flips_wrong_right_pct", *[f"{b}_loyalty" for b in benchmarks]])
    for r in rows:
        stats_ = [r["bench"].get(b) for b in benchmarks]
        avg = r["avg_retain"]
        ci = r.get("avg_retain_ci")
        w.writerow([r["source"], r["backbone"], r["method"], _budget(r, True), r["seeds"],
                    *[_num(s.mean if s else None, 2) for s in stats_], _num(avg.mean if avg else None, 2),
                    *[_num(s.sd if s else None, 2) for s in stats_], _num(avg.sd if avg else None, 2),
                    " ".join(r["retain_over"]), _num(ci.lo if ci else None, 2), _num(ci.hi if ci else None, 2),
                    *_loyalty_cells(r.get("loyalty"), r.get("loyalty_bench") or {}, benchmarks)])
    return buf.getvalue()


def _loyalty_cells(total: Loyalty | None, per: Mapping[str, Loyalty], benchmarks: Sequence[str]) -> list[str]:
    if total is None:
        return [""] * (6 + len(benchmarks))
    return [_num(total.share, 2), str(total.n), str(total.right_to_wrong), str(total.wrong_to_right),
            _num(total.right_to_wrong_pct, 2), _num(total.wrong_to_right_pct, 2),
            *[_num(per[b].share, 2) if b in per else "" for b in benchmarks]]


def _cell(s: Stat | None, seeds: int | str) -> str:
    if s is None or math.isnan(s.mean):
        return ""
    return f"{s.mean:.1f} ± {s.sd:.1f}" if isinstance(seeds, int) and seeds > 1 else f"{s.mean:.1f}"


def _retain_cell(r: dict[str, Any]) -> str:
    s = r["avg_retain"]
    if r.get("gated") and r["source"] == "ours" and (s is None or math.isnan(s.mean)):
        return "n/a"
    cell = _cell(s, r["seeds"])
    ci = bootstrap.format_ci(r.get("avg_retain_ci"))
    return f"{cell} {ci}" if cell and ci else cell


def to_markdown(rows: list[dict[str, Any]], benchmarks: Sequence[str], notes: Sequence[str] = (),
                show_backbone: bool = False) -> str:
    """``show_backbone`` adds a Backbone column (tables spanning several models); off, the
    output is Table 2's."""
    head = ["", *(["Backbone"] if show_backbone else []), "Method", "Budget",
            *[display_name(b) for b in benchmarks], "Avg. retain (%)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mark = {"paper": "paper", "gate": "gate"}.get(r["source"], "ours")
        labels = {"question_only": QO_LABEL, "gate": r.get("label", f"Gate: full - QO >= {GATE_SE:g} SE")}
        label = labels.get(r["method"]) if r["source"] in ("baseline", "gate") else display_name(r["method"])
        label += f", {r['note']}" if r.get("note") else ""  # a resize row's kept tokens (report.kept_tokens)
        text = r.get("text") or {}
        cells = [text.get(b, "") if r["source"] == "gate" else _cell(r["bench"].get(b), r["seeds"]) for b in benchmarks]
        lines.append("| " + " | ".join([mark, *([r["backbone"]] if show_backbone else []), label,
                                        _budget(r, False), *cells, _retain_cell(r)]) + " |")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


def build(results: list[dict[str, Any]], backbone: str, benchmarks: Sequence[str], table: str = "table2",
          methods: Sequence[str] | None = None,
          predictions: Mapping[tuple[str, str, float, str, int], list[dict]] | None = None,
          fit_records: Mapping[tuple[str, int], Sequence[dict]] | None = None,
          n_boot: int = 1000, boot_seed: int = 0, *, pruned: str | None) -> tuple[list[dict], list[str]]:
    """(rows: ours then the paper's, notes for the markdown). ``methods`` keeps only those rows
    of ours (plus full tokens, the retain ratio's reference), as the ablation tables do.
    ``pruned``: the untrained student's selector (the profile's training.selector, CDPruner in the
    paper) the other rows are paired with at the smallest budget; None pairs none.

    With ``predictions`` (:func:`load_predictions`), the gates, the out-of-sample
    question-only baseline (fitted on ``fit_records`` (benchmark, seed) -> records where given,
    cross-fitted otherwise) and the bootstrap intervals join the table (:func:`evidence`); the
    average retain ratio then averages over the gated benchmarks only."""
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
    notes += seed_comparisons(results, backbone, benchmarks, pruned)
    kept_note = kept_fraction_note(results, backbone, benchmarks)
    if kept_note:
        notes.append(kept_note)
    paper_order = paper_order_note(table)
    if paper_order:
        notes.append(paper_order)
    if predictions is None:
        return ours + reported_rows(benchmarks, table), notes
    ev = evidence(predictions, backbone, benchmarks, [(r["method"], r["budget"]) for r in ours], fit_records,
                  n_boot, boot_seed, pruned=pruned, table=table)
    kept = {(r["method"], r["budget"]) for r in ours}
    loyal = loyalties(predictions, backbone, benchmarks, sorted(kept))
    ours = [dict(r, gated=True, avg_retain_ci=ev.intervals.get((r["method"], r["budget"])),
                 loyalty=loyal.get((r["method"], r["budget"]), (None, {}))[0],
                 loyalty_bench=loyal.get((r["method"], r["budget"]), (None, {}))[1])
            for r in our_rows(results, backbone, benchmarks, over=ev.gated) if (r["method"], r["budget"]) in kept]
    notes.append("loyalty (CSV): the share of items whose answer, as the official scorer parses it, equals the "
                 "full-token model's on the same item (EffiVLM-Bench), with the flips right -> wrong and wrong -> "
                 "right; over every benchmark (gated or not) and seed, each seed paired with full tokens' own.")
    return ours[:1] + ev.rows + ours[1:] + reported_rows(benchmarks, table), notes + ev.notes
