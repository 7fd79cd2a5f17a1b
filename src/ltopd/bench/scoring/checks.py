"""Consistency check between a benchmark and a set of predictions."""

from __future__ import annotations

from collections import Counter

_SHOW = 5


def _names(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:_SHOW])
    return shown + (", ..." if len(ids) > _SHOW else "")


def check_predictions(benchmark_records: dict[str, dict], predictions: list[dict]) -> None:
    """Raise ValueError unless every benchmark id has exactly one prediction and no other id does.

    The message counts and names (the first five, in sorted order) missing ids, duplicated ids,
    ids not in the benchmark, and predictions without an id.
    """
    no_id = sum(1 for p in predictions if p.get("id") is None)
    counts = Counter(str(p["id"]) for p in predictions if p.get("id") is not None)
    expected = {str(i) for i in benchmark_records}
    missing = sorted(expected - counts.keys())
    duplicated = sorted(i for i, c in counts.items() if c > 1)
    unknown = sorted(counts.keys() - expected)
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing id(s): {_names(missing)}")
    if duplicated:
        problems.append(f"{len(duplicated)} duplicated id(s): {_names(duplicated)}")
    if unknown:
        problems.append(f"{len(unknown)} id(s) not in the benchmark: {_names(unknown)}")
    if no_id:
        problems.append(f"{no_id} prediction(s) without an id")
    if problems:
        raise ValueError("predictions do not match the benchmark: " + "; ".join(problems))
