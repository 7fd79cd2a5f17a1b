"""MME: paired yes/no questions per image; category score = acc + acc+ (max 200).

Official code followed: EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/tasks/mme/utils.py``
(``parse_pred_ans``, ``mme_process_results``, ``mme_aggregate_results``), whose totals equal the
MME release's ``eval_tool/calculation.py`` (acc over a category's questions + acc+ over its
images, summed over categories). The reply parser is lmms-eval's (from Otter): the official
``calculation.py`` has no period removal and no "y"/"n" rule.

Reads: ``answer`` ("Yes"/"No", any case), ``category`` (one of the 14 official names below),
``image_id`` (the two questions of an image share it; top level or meta). Per image: acc = mean
correctness x 100, acc+ = 100 if every question is right; a category's acc, acc+ and score are
means over its images. ``perception`` / ``cognition`` sum the category scores present (max
2,000 / 800); ``score`` = perception + cognition.
"""

from __future__ import annotations

from .common import field, prediction_text, require_records

PERCEPTION = ("existence", "count", "position", "color", "posters", "celebrity", "scene",
              "landmark", "artwork", "OCR")
COGNITION = ("commonsense_reasoning", "numerical_calculation", "text_translation",
             "code_reasoning")


def parse_mme(text: str) -> str:
    """'yes', 'no' or 'other' (lmms-eval's rule: lower-case, periods dropped, y/n alone count,
    else yes/no inside the first four characters)."""
    text = text.lower().strip().replace(".", "")
    if text in ("yes", "no"):
        return text
    if len(text) == 1:
        return {"y": "yes", "n": "no"}.get(text, "other")
    head = text[:4]
    if "yes" in head:
        return "yes"
    if "no" in head:
        return "no"
    return "other"


def score_mme(records: list[dict]) -> dict:
    require_records("mme", records)
    images: dict[str, dict[str, list[bool]]] = {}
    unparsed = 0
    for record in records:
        category = str(field(record, "category"))
        if category not in PERCEPTION + COGNITION:
            raise ValueError(f"record {record.get('id')!r}: unknown MME category {category!r}")
        text = prediction_text(record)
        pred = parse_mme(text) if text else "other"
        unparsed += pred == "other"
        label = str(record["answer"]).strip().lower()
        if label not in ("yes", "no"):
            raise ValueError(f"record {record.get('id')!r}: MME answer {label!r} is not yes/no")
        ok = pred == label
        images.setdefault(category, {}).setdefault(str(field(record, "image_id")), []).append(ok)
    per_category: dict[str, dict[str, float]] = {}
    for category, per_image in sorted(images.items()):
        for image_id, marks in per_image.items():
            if len(marks) != 2:
                raise ValueError(f"MME {category}/{image_id}: {len(marks)} questions, expected 2")
        acc = sum(100.0 * sum(m) / len(m) for m in per_image.values()) / len(per_image)
        acc_plus = sum(100.0 * all(m) for m in per_image.values()) / len(per_image)
        per_category[category] = {"acc": acc, "acc_plus": acc_plus, "score": acc + acc_plus}
    perception = sum(per_category[c]["score"] for c in PERCEPTION if c in per_category)
    cognition = sum(per_category[c]["score"] for c in COGNITION if c in per_category)
    return {
        "score": perception + cognition,
        "n": len(records),
        "n_unparsed": unparsed,
        "perception": perception,
        "cognition": cognition,
        "per_category": per_category,
    }
