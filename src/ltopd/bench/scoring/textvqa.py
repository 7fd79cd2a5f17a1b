"""TextVQA: EvalAI soft accuracy x 100.

Official code followed: EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/tasks/textvqa/utils.py``
(``textvqa_process_results``) with ``lmms_eval/tasks/_task_utils/vqa_eval_metric.py``
(``EvalAIAnswerProcessor``); see :mod:`.vqa_norm`. Reply and every reference are normalised;
for each reference left out, min(#other references equal to the reply / 3, 1); the item scores
the mean of those; ``score`` is the mean over items x 100.

Reads: ``answers`` (list of the ten reference strings; top level or meta). An empty reply scores
0 and counts as unparsed (the official scorer gives it 0 too unless a reference normalises to
the empty string).
"""

from __future__ import annotations

from .common import field, pct, prediction_text, require_records
from .vqa_norm import vqa_soft_accuracy


def score_textvqa(records: list[dict]) -> dict:
    require_records("textvqa", records)
    total = 0.0
    unparsed = 0
    for record in records:
        pred = prediction_text(record)
        if not pred:
            unparsed += 1
            continue
        total += vqa_soft_accuracy(pred, [str(a) for a in field(record, "answers")])
    return {"score": pct(total, len(records)), "n": len(records), "n_unparsed": unparsed}
