"""HR-Bench 4K: one option letter, else one option text; accuracy per cycle category, averaged.

Official code followed: open-compass/VLMEvalKit -- ``vlmeval/utils/matching_util.py``
(``can_infer``, exact matching, no LLM fallback: :func:`.options.infer_choice`, with no
article guard, which VLMEvalKit applies only under its VERBOSE switch) and
``vlmeval/dataset/utils/hrbench.py`` (``report_acc_hrbench``: accuracy within each
``cycle_category``, then the plain mean over the cycle categories).

Reads: ``answer`` (option letter), ``options``, ``cycle_category`` (e.g. ``single`` / ``cross``;
top level or meta). ``score`` is the macro mean of the per-category accuracies.
"""

from __future__ import annotations

from .common import answer_letter, field, grouped_accuracy, pct, prediction_text, require_records
from .options import infer_choice


def score_hrbench(records: list[dict]) -> dict:
    require_records("hrbench4k", records)
    correct: list[bool] = []
    unparsed = 0
    for record in records:
        choice = infer_choice(prediction_text(record), list(record.get("options") or []))
        unparsed += choice is None
        correct.append(choice == answer_letter(record))
    categories = [str(field(r, "cycle_category")) for r in records]
    per_category = grouped_accuracy(categories, correct)
    return {
        "score": sum(per_category.values()) / len(per_category),
        "n": len(records),
        "n_unparsed": unparsed,
        "per_cycle_category": per_category,
        "micro_accuracy": pct(sum(correct), len(records)),
    }
