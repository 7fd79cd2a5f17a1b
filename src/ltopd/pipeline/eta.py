"""Where a running pipeline stands: what each finished job was, and an ETA for the whole run.

Each job still to run is expected to cost its prior (its kind's fixed start-up plus its units,
settings x items for an evaluation, answered questions for a training: ltopd.pipeline.job_costs)
times its kind's factor: the time this run's finished jobs of that kind took over their priors,
else the last run's factor for the kind, else this run's pooled factor over every finished job
(shrunk towards the last run's, or 1, by SHRINK_S prior seconds: the first small jobs of a run say
little about its long ones). The work left (a running job: its expected cost less the time it has
run) is divided by the parallelism observed so far (busy job-seconds, running jobs' included, per
wall second since the first job started; the run's cores before the first job ends), and is
never less than the longest job left. Without a cost plan every job is one unit of its kind, so
the ETA weighs by the mean time of each kind.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from ltopd.pipeline.job_costs import OTHER, PRIORS, JobCost, Prior, kind

__all__ = ["Eta", "describe_job", "describe_group", "duration", "kind"]


def describe_job(rule: str, wildcards: Mapping[str, object], message: str | None = None,
                 outputs: Sequence[str] = ()) -> str:
    """"train qwen35-tiny ltopd seed=0": the rule's message if it has one; an evaluation group
    described by its outputs; else rule and wildcards."""
    if message:
        return message
    if kind(rule) == "evaluate" and (group := describe_group(outputs)):
        return group
    parts = [f"{k}={v}" if k == "seed" else str(v) for k, v in wildcards.items()]
    return " ".join([rule, *parts])


def describe_group(outputs: Sequence[str]) -> str | None:
    """"evaluate qwen35-tiny dart seed 0: 4 budgets x 9 benchmarks (36 settings)" from an
    evaluation group's outputs (.../eval/<backbone>/<method>/<budget>/<benchmark>/seed<k>/...);
    a backbone's training-free group names its methods ("full, cdpruner: ..."). None when they
    are not one backbone's evaluations at one seed."""
    settings = set()
    for path in outputs:
        parts = Path(path).parts
        if "eval" in parts and len(parts) > parts.index("eval") + 5:
            i = parts.index("eval")
            settings.add(parts[i + 1:i + 6])
    models = {(bb, seed) for bb, _, _, _, seed in settings}
    if len(models) != 1:
        return None
    (backbone, seed), = models
    methods = sorted({s[1] for s in settings})
    budgets, benchmarks = {s[2] for s in settings}, {s[3] for s in settings}
    plural = "budget" if len(budgets) == 1 else "budgets"
    return (f"evaluate {backbone} {', '.join(methods)} seed {seed.removeprefix('seed')}: {len(budgets)} {plural} x "
            f"{len(benchmarks)} benchmarks ({len(settings)} settings)")


def duration(seconds: float) -> str:
    """"7s", "3m05s", "1h02m"."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


# Prior seconds that weigh the last run's pooled factor (or 1) against this run's first jobs.
SHRINK_S = 60.0


class Eta:
    def __init__(self, priors: Mapping[str, Prior] | None = None,
                 records: Mapping[str, tuple[float, float]] | None = None) -> None:
        """``priors``: per kind (fixed start-up, seconds per unit); ``records``: the last run's
        (seconds taken, seconds its priors expected) per kind (job_costs.read_records)."""
        self.priors = dict(PRIORS if priors is None else priors)
        self.set_records(records or {})
        self.planned: dict[str, int] = {}
        self.costs: dict[str, JobCost] = {}   # key -> cost, jobs not finished (started or not)
        self.running: dict[str, float] = {}   # key -> start
        self.cores: int | None = None
        self.times: dict[str, list[float]] = defaultdict(list)
        self.expected: dict[str, list[float]] = defaultdict(list)  # the finished jobs' priors
        self.start: float | None = None
        self.first_job: float | None = None

    def set_records(self, records: Mapping[str, tuple[float, float]]) -> None:
        self.base = {k: s / e for k, (s, e) in records.items() if e > 0 and s > 0}
        taken, expected = sum(s for s, _ in records.values()), sum(e for _, e in records.values())
        self.base_speed = taken / expected if taken > 0 and expected > 0 else 1.0

    def plan(self, rule_counts: Mapping[str, int], now: float) -> None:
        """The run's jobs by rule (Snakemake's job stats); the clock starts here."""
        planned: dict[str, int] = defaultdict(int)
        for rule, n in rule_counts.items():
            planned[kind(rule)] += int(n)
        self.planned, self.start = dict(planned), now

    def plan_costs(self, costs: Sequence[JobCost], cores: int | None = None) -> None:
        """Each job's kind and units (job_costs.plan), replacing the counts of plan()."""
        self.costs = {c.key: c for c in costs}
        self.cores = cores
        planned: dict[str, int] = defaultdict(int)
        for c in costs:
            planned[c.kind] += 1
        self.planned = dict(planned)

    def started(self, key: str, now: float) -> None:
        self.running[key] = now
        self.first_job = now if self.first_job is None else min(self.first_job, now)

    def finished(self, rule: str, seconds: float, now: float, key: str | None = None) -> None:
        if self.start is None:
            self.start = now - seconds
        cost = self.costs.pop(key, None) if key is not None else None
        self.running.pop(key, None)
        k = cost.kind if cost else kind(rule)
        self.times[k].append(seconds)
        self.expected[k].append(self.prior_s(k, cost.units) if cost else 0.0)

    def prior_s(self, k: str, units: float) -> float:
        p = self.priors.get(k, OTHER)
        return p.fixed_s + units * p.per_unit_s

    def speed(self) -> float:
        """This run's finished jobs' time over their priors, shrunk towards the last run's factor."""
        seen = sum(t for k, ts in self.times.items() for t, e in zip(ts, self.expected[k]) if e > 0)
        expected = sum(e for es in self.expected.values() for e in es)
        return (seen + SHRINK_S * self.base_speed) / (expected + SHRINK_S)

    def factor(self, k: str) -> float:
        """How much longer than its prior a job of kind ``k`` takes in this run."""
        es = self.expected.get(k, [])
        if sum(es) > 0:
            return sum(t for t, e in zip(self.times[k], es) if e > 0) / sum(es)
        return self.base.get(k) or self.speed()

    def expected_s(self, k: str, units: float) -> float:
        """A job's expected seconds: its prior times its kind's factor."""
        return self.prior_s(k, units) * self.factor(k)

    @property
    def done(self) -> int:
        return sum(len(v) for v in self.times.values())

    @property
    def total(self) -> int:
        return max(sum(self.planned.values()), self.done)

    def elapsed(self, now: float) -> float:
        return 0.0 if self.start is None else now - self.start

    def _left(self, now: float) -> list[float]:
        """Expected seconds left of each job not finished."""
        if self.costs:
            return [max(0.0, self.expected_s(c.kind, c.units) - (now - self.running[key] if key in self.running else 0))
                    for key, c in self.costs.items()]
        busy = [t for ts in self.times.values() for t in ts]
        overall = sum(busy) / len(busy)
        left = []
        for k, n in self.planned.items():
            ts = self.times.get(k, [])
            left += [sum(ts) / len(ts) if ts else overall] * max(0, n - len(ts))
        return left

    def remaining_s(self, now: float) -> float | None:
        """Wall seconds left, or None before the first job has finished (and without a cost plan)."""
        busy = [t for ts in self.times.values() for t in ts]
        if not busy and not self.costs:
            return None
        left = self._left(now)
        if not left:
            return 0.0
        # busy job-seconds (the running jobs' so far too) per wall second since the first job started:
        # Snakemake's own start-up before it is no job's
        origin = self.first_job if self.first_job is not None else self.start
        since = now - origin if origin is not None else 0.0
        running = sum(now - t for t in self.running.values())
        if busy and since > 0:
            parallelism = max(1.0, (sum(busy) + running) / since)
        else:
            parallelism = float(self.cores or 1)
        return max(sum(left) / min(parallelism, len(left)), max(left))

    def expected_of(self, key: str) -> float | None:
        c = self.costs.get(key)
        return None if c is None else self.expected_s(c.kind, c.units)

    def records(self) -> dict[str, tuple[float, float]]:
        """This run's (seconds taken, seconds the priors expected) per kind: the next run's base."""
        out = {}
        for k, ts in self.times.items():
            pairs = [(t, e) for t, e in zip(ts, self.expected[k]) if e > 0]
            if pairs:
                out[k] = (sum(t for t, _ in pairs), sum(e for _, e in pairs))
        return out
