"""Official-style scorers, one per benchmark: ``score(records) -> metrics``.

Each record is a benchmark record (design.md) plus ``prediction`` (raw model text or None).
Every scorer strips a think block and answer tags first (:func:`strip_answer_tags`) and returns
``score`` (the paper's scale), ``n``, ``n_unparsed`` and its sub-metrics; the fields each reads
are listed in its module docstring.
"""

from __future__ import annotations

from collections.abc import Callable

from ltopd.catalog import BENCHMARKS, resolve

from .checks import check_predictions
from .common import strip_answer_tags

# The catalog names each benchmark's scorer.
SCORERS: dict[str, Callable[[list[dict]], dict]] = {b.name: resolve(__name__, b.scorer) for b in BENCHMARKS.values()}


def score(benchmark: str, records: list[dict]) -> dict:
    """Metrics of ``records`` under ``benchmark``'s official scorer."""
    if benchmark not in SCORERS:
        raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(SCORERS))}")
    return SCORERS[benchmark](records)


__all__ = ["SCORERS", "check_predictions", "score", "strip_answer_tags"]
