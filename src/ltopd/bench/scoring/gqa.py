"""GQA (testdev-balanced): exact match of a one-word-or-phrase answer.

Reads: ``answer`` (the reference word). Two metrics:
* ``exact_match`` (primary ``score``): lmms-eval's normalised match -- both sides lower-cased,
  every ``string.punctuation`` character deleted, surrounding whitespace stripped (Appendix D's
  "normalised exact match");
* ``exact_match_raw``: the original GQA evaluator's string equality (after answer-tag removal
  and surrounding-whitespace stripping, which the tag helper does for every scorer).
"""

from __future__ import annotations

import string

from .common import pct, prediction_text, require_records

_DROP_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_gqa(text: str) -> str:
    return text.lower().translate(_DROP_PUNCT).strip()


def score_gqa(records: list[dict]) -> dict:
    require_records("gqa", records)
    norm_hits = raw_hits = unparsed = 0
    for record in records:
        pred = prediction_text(record)
        if not pred:
            unparsed += 1
            continue
        answer = str(record["answer"]).strip()
        raw_hits += pred == answer
        norm_hits += normalize_gqa(pred) == normalize_gqa(answer)
    return {
        "score": pct(norm_hits, len(records)),
        "n": len(records),
        "n_unparsed": unparsed,
        "exact_match": pct(norm_hits, len(records)),
        "exact_match_raw": pct(raw_hits, len(records)),
    }
