"""MMBench circular evaluation.

Official code followed: open-compass/VLMEvalKit, ``vlmeval/utils/matching_util.py``
(``can_infer`` = ``can_infer_option`` then ``can_infer_text``) and the circular grouping of
``vlmeval/dataset/utils/multiple_choice.py``; the "A as an article" rule as lmms-eval's
``lmms_eval/tasks/mmbench/mmbench_evals.py`` applies it (``MMBench_Evaluator.can_infer_option``).

Reads: ``answer`` (option letter), ``options``, ``index`` (int; the rotations of one base
question share ``index % 1_000_000``). A reply is parsed by :func:`.options.infer_choice` with
the article guard on: one option letter among the words (after ``.()[],:;!*#{}`` become
spaces), except that when "A" is a word of a reply of more than three words the letter step
gives nothing ("A red circle is shown" is not option A; "A red circle", three words, is); else
one option text inside the reply. No LLM fallback (VLMEvalKit's exact-matching mode): a reply
parsed to nothing is wrong. A group counts only if every rotation is right.
"""

from __future__ import annotations

from .common import answer_letter, field, pct, prediction_text, require_records
from .options import infer_choice

GROUP_MODULUS = 1_000_000


def score_mmbench(records: list[dict]) -> dict:
    require_records("mmbench", records)
    groups: dict[int, bool] = {}
    n_right = 0
    unparsed = 0
    for record in records:
        choice = infer_choice(prediction_text(record), list(record.get("options") or []),
                              article_guard=True)
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
