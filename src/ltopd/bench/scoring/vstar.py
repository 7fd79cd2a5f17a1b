"""V*Bench: lmms-eval's answer-letter extraction, micro accuracy x 100.

Official code followed: EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/tasks/vstar_bench/utils.py``
(``extract_answer_letter``, ``vstar_process_results``, ``vstar_aggregate_results``).

Reads: ``answer`` (option letter; "(B)", "b" read as "B"), ``task`` (``direct_attributes`` /
``relative_position``) for the per-task breakdown. The options are not read: lmms-eval looks for
the letters A-D whatever the number of options.

Extraction (:func:`parse_vstar`), in lmms-eval's order, on the reply stripped and upper-cased
first (so "b", "a red car" and "based on ..." are read after upper-casing):

1. the reply starts with a letter A-D (anything may follow: "BLUE" reads as B);
2. an optional "THE", then "ANSWER" / "CHOICE" / "OPTION", an optional "IS", then spaces or
   colons and a letter;
3. "(X)" anywhere;
4. a letter followed (after optional spaces) by ".", ")" or "]" anywhere;
5. a letter standing alone between spaces (or the reply's ends);
6. else the reply's only character in A-D;
7. else (never reached after rule 1, kept for completeness) its first character if in A-D.

The first rule that matches decides, each by its first match; no match -> unparsed, wrong.
"""

from __future__ import annotations

import re

from .common import answer_letter, grouped_accuracy, pct, prediction_text, require_records

# lmms-eval's five ordered patterns (applied with IGNORECASE to the upper-cased reply).
_PATTERNS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"^([A-D])\s*[\.)\]]*",
        r"(?:THE\s+)?(?:ANSWER|CHOICE|OPTION)(?:\s+IS)?[\s:]+([A-D])",
        r"\(([A-D])\)",
        r"([A-D])\s*(?:\.|\)|])",
        r"(?:^|\s)([A-D])(?:\s|$)",
    )
)
_LETTER = re.compile(r"[A-D]")


def parse_vstar(text: str) -> str | None:
    """The option letter lmms-eval's V*Bench task reads from ``text``, or None."""
    reply = text.strip().upper()
    for pattern in _PATTERNS:
        match = pattern.search(reply)
        if match:
            return match.group(1).upper()
    letters = _LETTER.findall(reply)
    if len(letters) == 1:
        return letters[0]
    if reply and reply[0] in "ABCD":
        return reply[0]
    return None


def score_vstar(records: list[dict]) -> dict:
    require_records("vstar", records)
    correct: list[bool] = []
    unparsed = 0
    for record in records:
        letter = parse_vstar(prediction_text(record))
        unparsed += letter is None
        correct.append(letter == answer_letter(record))
    return {
        "score": pct(sum(correct), len(records)),
        "n": len(records),
        "n_unparsed": unparsed,
        "per_task": grouped_accuracy([str(r.get("task", "")) for r in records], correct),
    }
