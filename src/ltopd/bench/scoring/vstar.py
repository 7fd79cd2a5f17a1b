"""V*Bench: option letter by ordered patterns, micro accuracy x 100.

Reads: ``answer`` (option letter), ``options`` (letters A.. up to their count; A-D if empty),
``task`` (``direct_attributes`` / ``relative_position``) for the per-task breakdown.
"""

from __future__ import annotations

from .common import (
    answer_letter,
    grouped_accuracy,
    option_letters,
    pct,
    prediction_text,
    require_records,
)
from .options import extract_letter


def score_vstar(records: list[dict]) -> dict:
    require_records("vstar", records)
    correct: list[bool] = []
    unparsed = 0
    for record in records:
        letter = extract_letter(prediction_text(record), option_letters(record))
        unparsed += letter is None
        correct.append(letter == answer_letter(record))
    return {
        "score": pct(sum(correct), len(records)),
        "n": len(records),
        "n_unparsed": unparsed,
        "per_task": grouped_accuracy([str(r.get("task", "")) for r in records], correct),
    }
