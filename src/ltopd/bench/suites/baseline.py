"""The question-only baseline of a record set, in its benchmark's own metric."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from ltopd.bench.scoring import score


def blind_predictions(records: list[dict]) -> list[str]:
    """For each record, the most frequent answer of its (task, template, has options) group,
    fitted on the records themselves: the best image-blind guesser (an optimistic bound)."""
    def key(r: dict) -> tuple[str, str, bool]:
        return r["task"], json.loads(r["meta"]).get("template", ""), bool(r["options"])

    groups: dict[tuple, Counter] = defaultdict(Counter)
    for r in records:
        groups[key(r)][r["answer"]] += 1
    return [groups[key(r)].most_common(1)[0][0] for r in records]


def question_only_score(name: str, records: list[dict]) -> float:
    """The official ``score`` of the blind guesser's predictions on ``records``."""
    preds = blind_predictions(records)
    return score(name, [dict(r, prediction=p) for r, p in zip(records, preds)])["score"]
