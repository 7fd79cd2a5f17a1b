"""MMBench circular evaluation, as lmms-eval's judge-free (static) MMBench task scores it.

Official code followed: EvolvingLMMs-Lab/lmms-eval ``lmms_eval/tasks/mmbench/mmbench_evals.py``,
class ``MMBench_Evaluator``: ``can_infer_option``, ``can_infer_text``, ``can_infer``,
``build_choices``, and ``eval_sub_data`` / ``eval_result`` with ``eval_method="static"`` (task
``mmbench_en_dev_static``, ``en_utils.mmbench_aggregate_dev_results_static``), whose last resort
is ``lmms_eval/tasks/_task_utils/mcq_extract.py`` (:mod:`.mcq_extract`).

Reads: ``answer`` (option letter), ``options``, ``index`` (int; the rotations of one base
question share ``index % 1_000_000``). One rotation's reply (stripped, as
``mmbench_process_results`` does) is read by :func:`mmbench_choice`; a group counts only if
every rotation is right.
"""

from __future__ import annotations

import math

from .common import answer_letter, field, pct, prediction_text, require_records
from .mcq_extract import extract_mcq_answer

GROUP_MODULUS = 1_000_000
# can_infer_option's num_choice=5: the letter steps look for A-E whatever the options
LETTERS = "ABCDE"
# can_infer_option's second step: (prefix, suffix) around a letter, tried in this order
WRITTEN = (("", "."), ("", ","), ("", ":"), ("", ")"), ("", ")."), ("(", ")"), ("(", ")."),
           (":", ""), (":", ","), (":", "."), (":", ")"), (":", ")."))
API_FAILURE = "Failed to obtain answer via API"


def build_choices(options: list) -> dict[str, str]:
    """Letter -> option text for options A-D that exist (``build_choices``: not NaN)."""
    out = {}
    for letter, option in zip("ABCD", options):
        if option is None or (isinstance(option, float) and math.isnan(option)):
            continue
        out[letter] = str(option)
    return out


def can_infer_option(answer: str) -> str | None:
    """``MMBench_Evaluator.can_infer_option``: a letter written alone or in one of the forms.

    The reply is split on whitespace (no punctuation removed). Exactly one of A-E standing as a
    word gives that letter, unless "A" is a word and there are more than three ("A" may be the
    article): then, as when no or several letters stand alone, the forms of :data:`WRITTEN` are
    tried in order and the first one that exactly one letter takes gives it.
    """
    if API_FAILURE in answer:
        return None
    words = answer.split()
    alone = [ch for ch in LETTERS if ch in words]
    if len(alone) == 1 and not ("A" in words and len(words) > 3):
        return alone[0]
    for prefix, suffix in WRITTEN:
        hits = [ch for ch in LETTERS if prefix + ch + suffix in words]
        if len(hits) == 1:
            return hits[0]
    return None


def can_infer_text(answer: str, choices: dict[str, str]) -> str | None:
    """``MMBench_Evaluator.can_infer_text``: the only option whose lower-cased text is in the
    lower-cased reply."""
    lowered = answer.lower()
    hits = [letter for letter, text in choices.items() if text.lower() in lowered]
    return hits[0] if len(hits) == 1 else None


def mmbench_choice(answer: str, options: list) -> str | None:
    """The letter lmms-eval's static MMBench evaluation reads from one reply, or None.

    ``can_infer`` (a letter, else one option text); else ``extract_mcq_answer`` over the
    record's option letters (``eval_sub_data``'s static branch).
    """
    choices = build_choices(options)
    letter = can_infer_option(answer) or can_infer_text(answer, choices)
    return letter or extract_mcq_answer(answer, sorted(choices)) or None


def score_mmbench(records: list[dict]) -> dict:
    require_records("mmbench", records)
    groups: dict[int, bool] = {}
    n_right = 0
    unparsed = 0
    for record in records:
        choice = mmbench_choice(prediction_text(record), list(record.get("options") or []))
        unparsed += choice is None
        ok = choice == answer_letter(record)
        n_right += ok
        group = int(field(record, "index")) % GROUP_MODULUS
        groups[group] = groups.get(group, True) and ok
    return {
        "score": pct(sum(groups.values()), len(groups)),
        "n": len(records),
        "n_unparsed": unparsed,
        "n_groups": len(groups),
        "vanilla_accuracy": pct(n_right, len(records)),
    }
