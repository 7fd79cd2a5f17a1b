"""POPE: yes/no from the first sentence; accuracy, precision, recall, F1, yes-ratio per split.

Official code followed: RUCAIBox/POPE, ``evaluate.py``.

Reads: ``answer`` ("yes"/"no", any case), ``split`` (adversarial / popular / random; top level
or meta). Parsing, as ``evaluate.py`` does it: if the reply contains a ".", keep the text before
the first one; delete every ","; split on single spaces; the answer is "no" if one of the words
is exactly "No", "not" or "no", else "yes". So an empty reply (or an unfinished think block,
whose answer text is empty) reads as "yes", like any reply without those words; such replies
are still counted in ``n_unparsed``. Labels must be "yes"/"no" (a ValueError otherwise; the
official script maps "no" to negative and anything else to positive).
Every metric is x 100; ``score`` is the macro mean of the split accuracies (Appendix D).
Deliberate deviation: precision with no predicted "yes", recall with no "yes" label and F1 with
precision + recall = 0 are 0 here, where ``evaluate.py`` would divide by zero.
"""

from __future__ import annotations

from .common import field, pct, prediction_text, require_records

SPLITS = ("adversarial", "popular", "random")
_METRICS = ("accuracy", "precision", "recall", "f1", "yes_ratio")


def parse_pope(text: str) -> str:
    """'yes' or 'no' by ``evaluate.py``'s rule ("" -> 'yes')."""
    first = text.split(".")[0].replace(",", "")
    words = first.split(" ")
    return "no" if ("no" in words or "No" in words or "not" in words) else "yes"


def binary_metrics(labels: list[str], preds: list[str]) -> dict[str, float]:
    tp = sum(label == "yes" and p == "yes" for label, p in zip(labels, preds))
    fp = sum(label == "no" and p == "yes" for label, p in zip(labels, preds))
    tn = sum(label == "no" and p == "no" for label, p in zip(labels, preds))
    fn = sum(label == "yes" and p == "no" for label, p in zip(labels, preds))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "accuracy": pct(tp + tn, len(labels)),
        "precision": 100.0 * precision,
        "recall": 100.0 * recall,
        "f1": 100.0 * f1,
        "yes_ratio": pct(tp + fp, len(labels)),
    }


def score_pope(records: list[dict]) -> dict:
    require_records("pope", records)
    by_split: dict[str, tuple[list[str], list[str]]] = {}
    unparsed = 0
    for record in records:
        split = str(field(record, "split"))
        if split not in SPLITS:
            raise ValueError(f"record {record.get('id')!r}: unknown POPE split {split!r}")
        label = str(record["answer"]).strip().lower()
        if label not in ("yes", "no"):
            raise ValueError(f"record {record.get('id')!r}: POPE answer {label!r} is not yes/no")
        text = prediction_text(record)
        unparsed += not text
        pred = parse_pope(text)
        labels, preds = by_split.setdefault(split, ([], []))
        labels.append(label)
        preds.append(pred)
    per_split = {s: binary_metrics(*by_split[s]) for s in SPLITS if s in by_split}
    macro = {m: sum(v[m] for v in per_split.values()) / len(per_split) for m in _METRICS}
    return {
        "score": macro["accuracy"],
        "n": len(records),
        "n_unparsed": unparsed,
        "per_split": per_split,
        "macro": macro,
    }
