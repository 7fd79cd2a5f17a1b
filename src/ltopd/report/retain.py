"""Average retain ratio (Section 4.1): mean over benchmarks of 100 * score / full-token score,
computed per seed against the full-token run of the same seed, then mean and spread over seeds.

A benchmark whose full-token score is 0 has no retain ratio (the paper's formula divides by it);
it is left out of that seed's average and the row says over how many benchmarks it averaged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Stat:
    mean: float
    sd: float  # sample standard deviation over seeds (0 with one seed)
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        values = [v for v in values if not math.isnan(v)]
        if not values:
            return cls(math.nan, math.nan, 0)
        m = sum(values) / len(values)
        sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
        return cls(m, sd, len(values))


def retain_ratio(scores: Mapping[str, float], full: Mapping[str, float],
                 benchmarks: Sequence[str]) -> tuple[float, list[str]]:
    """(average retain ratio in percent, benchmarks it averaged over) for one seed."""
    used = [b for b in benchmarks if b in scores and full.get(b, 0) > 0]
    if not used:
        return math.nan, []
    return sum(100.0 * scores[b] / full[b] for b in used) / len(used), used
