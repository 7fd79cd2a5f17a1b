"""MMBench circular evaluation.

Reads: ``answer`` (option letter), ``options``, ``index`` (int; the rotations of one base
question share ``index % 1_000_000``). A reply is parsed by one option letter, else one option
text (VLMEvalKit's rule without its LLM fallback). A group counts only if every rotation is right.
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
        choice = infer_choice(prediction_text(record), list(record.get("options") or []))
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
