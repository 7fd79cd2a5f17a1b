"""Paired bootstrap over benchmark items with each benchmark's official scorer (pure functions).

A benchmark's official score is an aggregate over *units* (a unit's rows are scored together)
grouped in *strata*::

    score = sum over strata s of  c_s * (sum_{u in s} num(u)) / (sum_{u in s} den(u))

with den(u) = 1 and num(u) = the official scorer (``ltopd.bench.scoring.score``) applied to the
unit's rows alone -- except MVBench, whose per-task accuracy divides by the *answered* records
only: there den(u) = 1 if the row's prediction is not blank, and num(u) = score(u) * den(u).
c_s is 1 / #strata (a macro mean), 1 (a sum) or stratum size / total (size-weighted). Each
benchmark declares its rule in the catalog (``ltopd.catalog.Benchmark.bootstrap``; a benchmark the
catalog does not know is an error, never a silent row-level fallback).

:func:`unit_values` checks the decomposition on every call: the aggregate of the unit values
must equal the official score of all rows (else ValueError), so a benchmark whose metric does not
decompose this way (or a scorer changed since) is caught rather than bootstrapped wrongly.

A bootstrap replicate redraws, within each stratum, as many units as it has, uniformly with
replacement (a stratified bootstrap: strata are the benchmark's fixed design -- POPE's three
splits, MME's categories -- so every replicate keeps all of them, as the official aggregate
needs). The replicate score is the same aggregate with the drawn multiplicities as weights, so
duplicated units never reach the scorer (MME would reject an image with four questions; MMBench
would merge two copies of a group into one). *Paired*: every prediction set on the same items
gets the same draws, so differences and ratios are computed replicate by replicate.

Draws come from ``numpy.random.default_rng([seed, crc32(benchmark), pool])`` where ``pool`` is
the evaluation seed of the record set (0 for a single set), so any two calls with the same seed
see the same draws for the same record set, whichever methods they compare. Intervals are
percentile intervals; ``se`` is the replicates' sample standard deviation.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ltopd import catalog
from ltopd.bench.scoring import score
from ltopd.bench.scoring.common import field
from ltopd.bench.scoring.mmbench import GROUP_MODULUS
from ltopd.catalog import Bootstrap

Rows = Sequence[Mapping[str, Any]]
# evaluation seed -> benchmark -> prediction rows (that seed's record set of the benchmark)
Runs = Mapping[int, Mapping[str, Rows]]

CHUNK = 256  # replicates drawn per block (bounds memory: block x units counts)


def rule(benchmark: str) -> Bootstrap:
    """How ``benchmark``'s official score decomposes: its catalog entry's (unknown: ValueError
    naming the known benchmarks)."""
    return catalog.benchmark(benchmark).bootstrap


# A row's resampling unit, by the catalog's Bootstrap.unit.
UNITS: dict[str, Callable[[Mapping[str, Any]], Hashable]] = {
    "row": lambda row: ("row", row["id"]),
    "mme_pair": lambda row: ("mme", str(field(row, "category")), str(field(row, "image_id"))),
    "mmbench_group": lambda row: ("mmbench", int(field(row, "index")) % GROUP_MODULUS),
}

# The weights c_s of the strata (sizes: units per stratum), by the catalog's Bootstrap.combine.
COMBINE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean": lambda sizes: np.full_like(sizes, 1.0 / len(sizes)),
    "sum": np.ones_like,
    "size": lambda sizes: sizes / sizes.sum(),
}


def unit_key(benchmark: str, row: Mapping[str, Any]) -> Hashable:
    """The resampling unit of ``row`` under ``benchmark``'s official metric."""
    return UNITS[rule(benchmark).unit](row)


def stratum_key(benchmark: str, row: Mapping[str, Any]) -> Hashable:
    name = rule(benchmark).stratum
    return "" if name is None else str(field(row, name))


class Interval(NamedTuple):
    """A point estimate with its bootstrap percentile interval and standard error."""

    estimate: float
    lo: float
    hi: float
    se: float


@dataclass(frozen=True)
class Design:
    """A record set's units: row ids (the order rows are aligned to), the row positions of each
    unit, and each unit's stratum index."""

    benchmark: str
    ids: tuple[str, ...]
    members: tuple[tuple[int, ...], ...]
    strata: np.ndarray  # int, per unit
    combine: str        # how the strata combine: a key of COMBINE

    @property
    def n_units(self) -> int:
        return len(self.members)

    @property
    def stratum_units(self) -> list[np.ndarray]:
        return [np.flatnonzero(self.strata == s) for s in range(int(self.strata.max()) + 1)]

    def stratum_weights(self) -> np.ndarray:
        return COMBINE[self.combine](np.array([len(i) for i in self.stratum_units], dtype=float))


def design(benchmark: str, rows: Rows) -> Design:
    """The units and strata of ``rows`` (each with a unique ``id``) under ``benchmark``."""
    ids = [str(r["id"]) for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{benchmark}: duplicate row ids")
    if not ids:
        raise ValueError(f"{benchmark}: no rows")
    units: dict[Hashable, list[int]] = {}
    unit_stratum: dict[Hashable, Hashable] = {}
    for i, r in enumerate(rows):
        u, s = unit_key(benchmark, r), stratum_key(benchmark, r)
        units.setdefault(u, []).append(i)
        if unit_stratum.setdefault(u, s) != s:
            raise ValueError(f"{benchmark}: unit {u!r} spans strata {unit_stratum[u]!r} and {s!r}")
    strata_names = list(dict.fromkeys(unit_stratum[u] for u in units))
    index = {s: j for j, s in enumerate(strata_names)}
    return Design(benchmark, tuple(ids), tuple(tuple(m) for m in units.values()),
                  np.array([index[unit_stratum[u]] for u in units], dtype=np.int64), rule(benchmark).combine)


def _aligned(d: Design, rows: Rows) -> list[Mapping[str, Any]]:
    by_id = {str(r["id"]): r for r in rows}
    if len(by_id) != len(rows) or set(by_id) != set(d.ids):
        missing, extra = set(d.ids) - set(by_id), set(by_id) - set(d.ids)
        raise ValueError(f"{d.benchmark}: prediction sets differ in items (missing {sorted(missing)[:3]}, "
                         f"extra {sorted(extra)[:3]}, or duplicate ids)")
    return [by_id[i] for i in d.ids]


def aggregate(d: Design, values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The official aggregate of per-unit ``values`` (shape (..., 2, units): numerators, then
    denominators, as :func:`unit_values` gives them) with per-unit multiplicities ``weights``
    (shape (replicates, units); None = each unit once): shape (..., replicates), or (...)."""
    values = np.asarray(values, dtype=float)
    num, den = values[..., 0, :], values[..., 1, :]
    total = 0.0
    for c, idx in zip(d.stratum_weights(), d.stratum_units):
        if weights is None:
            n, m = num[..., idx].sum(axis=-1), den[..., idx].sum(axis=-1)
        else:
            n, m = num[..., idx] @ weights[:, idx].T, den[..., idx] @ weights[:, idx].T
        with np.errstate(divide="ignore", invalid="ignore"):
            total = total + c * np.where(m > 0, n / np.where(m > 0, m, 1.0), 0.0)  # 0 answered -> 0
    return np.asarray(total)


def unit_values(d: Design, rows: Rows) -> np.ndarray:
    """Per unit (numerator, denominator), shape (2, units): the unit's official score on its
    rows alone times its denominator (1, or for MVBench whether the row was answered), for
    ``rows`` aligned to ``d`` by id; raises if their aggregate is not the official score."""
    rows = _aligned(d, rows)
    answered_only = rule(d.benchmark).answered_only
    num, den = np.empty(d.n_units), np.ones(d.n_units)
    for j, m in enumerate(d.members):
        unit = [dict(rows[i]) for i in m]
        if answered_only:
            den[j] = sum(bool(str(r.get("prediction") or "").strip()) for r in unit)
        num[j] = score(d.benchmark, unit)["score"] * den[j]
    values = np.stack([num, den])
    official = score(d.benchmark, [dict(r) for r in rows])["score"]
    if not math.isclose(float(aggregate(d, values)), official, rel_tol=1e-9, abs_tol=1e-9):
        raise ValueError(f"{d.benchmark}: the official score {official} is not the aggregate of its unit "
                         f"scores ({float(aggregate(d, values))}); no resampling rule fits this record set")
    return values


class UnitCache:
    """Designs and unit values computed once per record set and prediction set, for the many
    comparisons of one table (every row against full tokens, then neighbouring pairs on the same
    rows): scoring each unit was most of the table job. Keyed by the rows' identity, which the
    cache holds on to (an id is not reused while its object is alive); the rows must not change
    while the cache is in use."""

    def __init__(self) -> None:
        self._designs: dict[tuple[str, int], tuple[Rows, Design]] = {}
        self._values: dict[tuple[int, int], tuple[Design, Rows, np.ndarray]] = {}

    def design(self, benchmark: str, rows: Rows) -> Design:
        key = (benchmark, id(rows))
        if key not in self._designs:
            self._designs[key] = (rows, design(benchmark, rows))
        return self._designs[key][1]

    def values(self, d: Design, rows: Rows) -> np.ndarray:
        key = (id(d), id(rows))
        if key not in self._values:
            self._values[key] = (d, rows, unit_values(d, rows))
        return self._values[key][2]


def pool_rng(seed: int, benchmark: str, pool: int = 0) -> np.random.Generator:
    """The generator of one record set's draws (see the module docstring)."""
    return np.random.default_rng([int(seed), zlib.crc32(benchmark.encode()), int(pool)])


def replicates(d: Design, values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the official aggregate of each prediction set's unit values
    (shape (k, 2, units), or (2, units) for one), all on the same stratified draws: shape
    (k, n_boot), or (n_boot,)."""
    if n_boot < 2:
        raise ValueError(f"n_boot must be >= 2, got {n_boot}")
    values = np.asarray(values, dtype=float)
    flat = values.reshape(-1, 2, d.n_units)
    strata = d.stratum_units
    out = np.empty((flat.shape[0], n_boot))
    for start in range(0, n_boot, CHUNK):
        b = min(CHUNK, n_boot - start)
        weights = np.zeros((b, d.n_units))
        for idx in strata:
            m = len(idx)
            draws = rng.integers(0, m, size=(b, m)) + m * np.arange(b)[:, None]
            weights[:, idx] = np.bincount(draws.ravel(), minlength=b * m).reshape(b, m)
        out[:, start:start + b] = aggregate(d, flat, weights)
    return out.reshape(values.shape[:-2] + (n_boot,))


def interval(estimate: float, reps: np.ndarray, level: float = 0.95) -> Interval:
    """Percentile interval and standard error of bootstrap replicates ``reps`` (NaN replicates,
    e.g. a ratio over a replicate whose denominator is 0, are left out)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    reps = np.asarray(reps, dtype=float)
    reps = reps[np.isfinite(reps)]
    if len(reps) < 2:
        return Interval(float(estimate), math.nan, math.nan, math.nan)
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(estimate), float(lo), float(hi), float(reps.std(ddof=1)))


def paired_diff_ci(rows_a: Rows, rows_b: Rows, benchmark: str, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> Interval:
    """(diff, lo, hi, se) of official score(a) - score(b), two prediction sets on the same items
    (matched by id), by the paired stratified unit bootstrap."""
    d = design(benchmark, rows_a)
    va, vb = unit_values(d, rows_a), unit_values(d, rows_b)
    reps = replicates(d, np.stack([va, vb]), n_boot, pool_rng(seed, benchmark))
    return interval(float(aggregate(d, va) - aggregate(d, vb)), reps[0] - reps[1], level)


def _as_runs(x: Mapping[str, Rows] | Runs) -> dict[int, Mapping[str, Rows]]:
    """A benchmark -> rows mapping (one record set per benchmark, pool 0), or seed -> that."""
    if not x:
        return {}
    first = next(iter(x.values()))
    return dict(x) if isinstance(first, Mapping) else {0: x}  # type: ignore[arg-type]


def retain_replicates(methods: Mapping[Hashable, Runs], full: Runs, benchmarks: Sequence[str] | None = None,
                      n_boot: int = 2000, seed: int = 0, cache: UnitCache | None = None,
                      cap: float | None = None) -> dict[Hashable, tuple[float, np.ndarray]]:
    """For each method, (average retain ratio, its bootstrap replicates): per evaluation seed
    the mean over ``benchmarks`` (default: every benchmark of full's record sets) of
    100 * score / full-token score, then the mean over the seeds the method has. Every method
    and the full-token run are resampled on the same draws per (benchmark, seed) record set;
    record sets of different benchmarks and seeds are drawn independently. ``cache``: unit values
    already computed by another comparison on the same rows (the numbers are the same). ``cap``:
    each benchmark's retain (point and replicates) capped there before the mean (100: a model
    above full tokens on a benchmark counts as recovering all of it, not more)."""
    cache = cache or UnitCache()
    methods = {name: _as_runs(r) for name, r in methods.items()}
    full = _as_runs(full)
    seeds = sorted({s for runs in methods.values() for s in runs})
    per: dict[Hashable, dict[int, list[tuple[float, np.ndarray]]]] = {m: {} for m in methods}
    for s in seeds:
        if s not in full:
            raise ValueError(f"no full-token predictions for seed {s}")
        benches = list(benchmarks) if benchmarks is not None else list(full[s])
        if not benches:
            raise ValueError("no benchmarks to average the retain ratio over")
        for b in benches:
            if b not in full[s]:
                raise ValueError(f"no full-token predictions for {b!r} (seed {s})")
            names = [m for m in methods if s in methods[m]]
            for m in names:
                if b not in methods[m][s]:
                    raise ValueError(f"method {m!r} has no predictions for {b!r} (seed {s})")
            d = cache.design(b, full[s][b])
            values = np.stack([cache.values(d, full[s][b])] + [cache.values(d, methods[m][s][b]) for m in names])
            points = aggregate(d, values)
            if points[0] <= 0:
                raise ValueError(f"full-token score of {b!r} (seed {s}) is {points[0]}: no retain ratio")
            reps = replicates(d, values, n_boot, pool_rng(seed, b, s))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(reps[0] > 0, 100.0 * reps[1:] / np.where(reps[0] > 0, reps[0], 1.0), np.nan)
            point = 100.0 * points[1:] / float(points[0])
            if cap is not None:
                point, ratio = np.minimum(point, cap), np.minimum(ratio, cap)  # nan stays nan
            for j, m in enumerate(names):
                per[m].setdefault(s, []).append((float(point[j]), ratio[j]))
    out = {}
    for m, by_seed in per.items():
        if not by_seed:
            raise ValueError(f"method {m!r} has no predictions")
        point = float(np.mean([np.mean([p for p, _ in parts]) for parts in by_seed.values()]))
        reps = np.mean([np.mean([r for _, r in parts], axis=0) for parts in by_seed.values()], axis=0)
        out[m] = (point, reps)
    return out


def retain_ratio_ci(method: Mapping[str, Rows] | Runs, full: Mapping[str, Rows] | Runs,
                    benchmarks: Sequence[str] | None = None, n_boot: int = 2000, seed: int = 0,
                    level: float = 0.95) -> Interval:
    """Average retain ratio of ``method`` vs full tokens with its bootstrap interval. Both map
    benchmark -> prediction rows (one record set each), or evaluation seed -> that."""
    point, reps = retain_replicates({"m": method}, full, benchmarks, n_boot, seed)["m"]
    return interval(point, reps, level)


def retain_diff_ci(method_a: Mapping[str, Rows] | Runs, method_b: Mapping[str, Rows] | Runs,
                   full: Mapping[str, Rows] | Runs, benchmarks: Sequence[str] | None = None,
                   n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Interval:
    """Average retain ratio of ``method_a`` minus that of ``method_b`` (same items, same draws),
    with its bootstrap interval."""
    r = retain_replicates({"a": method_a, "b": method_b}, full, benchmarks, n_boot, seed)
    return interval(r["a"][0] - r["b"][0], r["a"][1] - r["b"][1], level)


def format_ci(ci: Interval | None, digits: int = 1) -> str:
    """"[lo, hi]" (empty for None or an undefined interval)."""
    if ci is None or math.isnan(ci.lo):
        return ""
    return f"[{ci.lo:.{digits}f}, {ci.hi:.{digits}f}]"


# Student t quantiles at 0.975 for 1..30 degrees of freedom (the normal's 1.96 beyond): the
# two-sided 95% interval of a mean over a handful of seeds.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def seed_interval(values: Sequence[float]) -> Interval:
    """Mean of per-seed values (e.g. paired differences between two methods trained and evaluated
    at the same seeds) with its 95% Student t interval; undefined (NaN) below two seeds. Unlike
    the bootstrap intervals it covers training-seed variation too, with few degrees of freedom."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return Interval(float(x.mean()) if len(x) else math.nan, math.nan, math.nan, math.nan)
    se = float(x.std(ddof=1)) / math.sqrt(len(x))
    t = _T975[len(x) - 2] if len(x) - 1 <= len(_T975) else 1.96
    mean = float(x.mean())
    return Interval(mean, mean - t * se, mean + t * se, se)
