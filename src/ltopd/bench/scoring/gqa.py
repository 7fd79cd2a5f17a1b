"""GQA (testdev-balanced): exact match of a one-word-or-phrase answer.

Official code followed: EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/tasks/gqa/gqa.yaml`` (metric
``exact_match`` with ``ignore_case`` and ``ignore_punctuation``), which runs
``exact_match_hf_evaluate`` in ``lmms_eval/api/metrics.py`` on the reply that
``Task.process_results`` in ``lmms_eval/api/task.py`` has stripped of surrounding whitespace.
The raw variant is the original GQA evaluator's string equality (``eval.py`` of the GQA release).

Reads: ``answer`` (the reference word). Two metrics:

* ``exact_match`` (primary ``score``, Appendix D's "normalised exact match"), in lmms-eval's
  order: the reply is stripped of surrounding whitespace FIRST, then both reply and reference
  are lower-cased and every ``string.punctuation`` character is deleted; nothing is stripped
  afterwards, and the reference is never stripped. So "yes !" becomes "yes " and does not match
  "yes";
* ``exact_match_raw``: reply == reference, unchanged (after the answer-tag removal every scorer
  does, which also strips the reply).
"""

from __future__ import annotations

import string

from .common import pct, prediction_text, require_records

_DROP_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_gqa_reply(text: str) -> str:
    """lmms-eval: strip, then lower-case, then delete punctuation (no strip after)."""
    return text.strip().lower().translate(_DROP_PUNCT)


def normalize_gqa_reference(text: str) -> str:
    """lmms-eval: lower-case, then delete punctuation (the reference is not stripped)."""
    return text.lower().translate(_DROP_PUNCT)


def score_gqa(records: list[dict]) -> dict:
    require_records("gqa", records)
    norm_hits = raw_hits = unparsed = 0
    for record in records:
        pred = prediction_text(record)
        if not pred:
            unparsed += 1
            continue
        answer = str(record["answer"])
        raw_hits += pred == answer
        norm_hits += normalize_gqa_reply(pred) == normalize_gqa_reference(answer)
    return {
        "score": pct(norm_hits, len(records)),
        "n": len(records),
        "n_unparsed": unparsed,
        "exact_match": pct(norm_hits, len(records)),
        "exact_match_raw": pct(raw_hits, len(records)),
    }
