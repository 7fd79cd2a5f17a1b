"""OCRBench: a hit when a reference is a substring of the reply; total hits out of 1,000.

Official code followed: open-compass/VLMEvalKit, ``vlmeval/dataset/image_vqa.py``
(``OCRBench.evaluate``; the data are VLMEvalKit's OCRBench.tsv), which keys the formula rule on
the category "Handwritten Mathematical Expression Recognition" and keeps the reply's case there.
(lmms-eval's ``lmms_eval/tasks/ocrbench/utils.py`` keys it on the source dataset "HME100k" and
lower-cases the reply first; not followed.)

Reads: ``category`` (one of :data:`CATEGORIES`, or one of the ten official sub-category names in
:data:`SUBCATEGORY_TO_CATEGORY`) and ``answers`` (acceptable strings; ``[answer]`` if absent).
Non-formula items: both sides lower-cased, stripped, newlines as spaces. HMER items: both sides
stripped, newlines as spaces, then every space removed; case kept (as in the official script).
An empty reply is scored like any other (it hits only an empty reference) and counted in
``n_unparsed``. ``score`` is hits scaled to 1,000 items (the raw total when the set has exactly
1,000; deliberate, so that subsets stay on the paper's scale).
"""

from __future__ import annotations

from .common import field, pct, prediction_text, require_records

# The five reported categories (official sizes 300, 200, 200, 200, 100).
CATEGORIES = ("text_recognition", "scene_vqa", "doc_vqa", "kie", "hmer")
SUBCATEGORY_TO_CATEGORY = {
    "Regular Text Recognition": "text_recognition",
    "Irregular Text Recognition": "text_recognition",
    "Artistic Text Recognition": "text_recognition",
    "Handwriting Recognition": "text_recognition",
    "Digit String Recognition": "text_recognition",
    "Non-Semantic Text Recognition": "text_recognition",
    "Scene Text-centric VQA": "scene_vqa",
    "Doc-oriented VQA": "doc_vqa",
    "Key Information Extraction": "kie",
    "Handwritten Mathematical Expression Recognition": "hmer",
}
FULL_SIZE = 1000


def _category(record: dict) -> str:
    raw = str(field(record, "category"))
    category = SUBCATEGORY_TO_CATEGORY.get(raw, raw)
    if category not in CATEGORIES:
        raise ValueError(f"record {record.get('id')!r}: unknown OCRBench category {raw!r}")
    return category


def ocr_hit(prediction: str, answers: list[str], category: str) -> bool:
    if category == "hmer":
        pred = prediction.strip().replace("\n", " ").replace(" ", "")
        return any(a.strip().replace("\n", " ").replace(" ", "") in pred for a in answers)
    pred = prediction.lower().strip().replace("\n", " ")
    return any(a.lower().strip().replace("\n", " ") in pred for a in answers)


def score_ocrbench(records: list[dict]) -> dict:
    require_records("ocrbench", records)
    hits = {c: 0 for c in CATEGORIES}
    counts = {c: 0 for c in CATEGORIES}
    unparsed = 0
    for record in records:
        category = _category(record)
        counts[category] += 1
        pred = prediction_text(record)
        unparsed += not pred
        answers = field(record, "answers", None) or [record["answer"]]
        if isinstance(answers, str):
            answers = [answers]
        hits[category] += ocr_hit(pred, [str(a) for a in answers], category)
    total = sum(hits.values())
    return {
        "score": total * FULL_SIZE / len(records),
        "hits": total,
        "n": len(records),
        "n_unparsed": unparsed,
        "per_category_hits": hits,
        "per_category_accuracy": {c: pct(hits[c], counts[c]) for c in CATEGORIES if counts[c]},
    }
