"""Where a running pipeline stands: what each finished job was, and an ETA for the whole run.

The ETA weighs the jobs still to run by the mean time of finished jobs of the same kind (every
evaluate_* group is one kind) and divides by the parallelism observed so far (busy job-seconds
per wall second), so a run of many cheap jobs and a few long trainings is not averaged flat.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path


def kind(rule: str) -> str:
    """The job kind a rule counts as: the evaluate_<backbone>[_<student>]_s<seed> groups are "evaluate"."""
    return "evaluate" if rule.startswith("evaluate_") else rule


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


class Eta:
    def __init__(self) -> None:
        self.planned: dict[str, int] = {}
        self.times: dict[str, list[float]] = defaultdict(list)
        self.start: float | None = None

    def plan(self, rule_counts: Mapping[str, int], now: float) -> None:
        """The run's jobs by rule (Snakemake's job stats); the clock starts here."""
        planned: dict[str, int] = defaultdict(int)
        for rule, n in rule_counts.items():
            planned[kind(rule)] += int(n)
        self.planned, self.start = dict(planned), now

    def finished(self, rule: str, seconds: float, now: float) -> None:
        if self.start is None:
            self.start = now - seconds
        self.times[kind(rule)].append(seconds)

    @property
    def done(self) -> int:
        return sum(len(v) for v in self.times.values())

    @property
    def total(self) -> int:
        return max(sum(self.planned.values()), self.done)

    def elapsed(self, now: float) -> float:
        return 0.0 if self.start is None else now - self.start

    def remaining_s(self, now: float) -> float | None:
        """Wall seconds left, or None before the first job has finished."""
        busy = [t for ts in self.times.values() for t in ts]
        if not busy:
            return None
        overall = sum(busy) / len(busy)
        work = 0.0
        for k, n in self.planned.items():
            ts = self.times.get(k, [])
            left = max(0, n - len(ts))
            work += left * (sum(ts) / len(ts) if ts else overall)
        parallelism = max(1.0, sum(busy) / self.elapsed(now)) if self.elapsed(now) > 0 else 1.0
        return work / parallelism
