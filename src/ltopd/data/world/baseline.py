"""The question-only baseline: what a guesser that never looks at the image can score."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable


def answer_prior_baseline(items: Iterable[dict]) -> float:
    """Accuracy of the best image-blind guesser that answers the majority answer of each
    (task, question template, open or multiple-choice) group, fitted on the items themselves
    (an optimistic bound). Style wrappers around a question do not make a new template."""
    groups: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for it in items:
        meta = json.loads(it["meta"])
        key = (it["task"], meta.get("template", ""), bool(it["options"]))
        groups[key][it["answer"]] += 1
    total = sum(sum(c.values()) for c in groups.values())
    if total == 0:
        raise ValueError("answer_prior_baseline needs at least one item")
    return sum(c.most_common(1)[0][1] for c in groups.values()) / total
