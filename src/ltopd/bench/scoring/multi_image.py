"""MuirBench and MVBench: multiple choice.

Reads: ``answer`` (option letter), ``options``, ``task`` (task / sub-task name).

MuirBench -- official code followed: open-compass/VLMEvalKit, ``vlmeval/utils/matching_util.py``
(``can_infer``: one option letter, else one option text; exact matching, no LLM fallback; no
article guard, as in VLMEvalKit's default) through ``ImageMCQDataset.evaluate`` (``MUIRDataset``
in ``vlmeval/dataset/image_mcq.py``). ``score`` is micro accuracy x 100 (VLMEvalKit's Overall);
``macro_accuracy`` is the mean of the per-task accuracies.

MVBench -- official code followed: EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/tasks/mvbench/utils.py``
(``mcq_acc``, ``mvbench_aggregate_results``; the data are lmms-eval's ``OpenGVLab/MVBench``).
A reply is read by :func:`mvbench_choice`:

1. if the stripped reply matches ``^([A-E])\\.\\s*(.+)$`` (case-insensitive: a letter, a
   period, then at least one more character on that line), that letter, upper-cased;
2. else newlines/tabs become spaces, the reply is stripped, the VQA punctuation rule is applied
   (each of ``; / [ ] " { } ( ) = + \\ _ - > < @ ` , ? !`` is deleted where it touches a space or
   when the text holds a "digit,digit", else replaced by a space; then every period not
   followed by a digit is deleted, at most 32 of them -- the official ``sub`` call passes
   ``re.UNICODE`` (= 32) as its count), the ends are stripped of ``'``, ``"``, ``)`` and ``(``
   (in that order) and of whitespace, and the text is lower-cased;
3. the first standalone letter a-e (``\\b[A-E]\\b``, case-insensitive) of that text, upper-cased;
   else the processed text itself (which can never equal a letter).

A record is right when that equals the reference letter. Per task, accuracy = right / answered,
where "answered" means the raw prediction is not empty after stripping (lmms-eval drops empty
replies from the denominator; a task with none answered scores 0). ``score`` is the task
accuracies weighted by the tasks' record counts (lmms-eval's group aggregation,
``aggregate_subtask_metrics`` with ``weight_by_size``): with no empty reply it equals micro
accuracy, and for MVBench's 20 tasks of 200 it is also their plain mean (``macro_accuracy``).
"""

from __future__ import annotations

import re

from .common import answer_letter, grouped_accuracy, pct, prediction_text, require_records
from .options import infer_choice
from .vqa_norm import process_punctuation

_MV_LEADING = re.compile(r"^([A-E])\.\s*(.+)$", re.IGNORECASE)
_MV_LETTER = re.compile(r"\b([A-E])\b", re.IGNORECASE)
def mvbench_choice(text: str) -> str:
    """lmms-eval's MVBench reading of a reply: a letter A-E, or the processed text."""
    leading = _MV_LEADING.match(text.strip())
    if leading:
        return leading.group(1).upper()
    out = text.replace("\n", " ").replace("\t", " ").strip()
    out = process_punctuation(out)  # the same step as the VQA evaluation's
    out = out.strip("'").strip('"').strip(")").strip("(").strip().lower()
    letter = _MV_LETTER.search(out)
    return letter.group(1).upper() if letter else out


def score_muirbench(records: list[dict]) -> dict:
    require_records("muirbench", records)
    correct: list[bool] = []
    unparsed = 0
    for record in records:
        choice = infer_choice(prediction_text(record), list(record.get("options") or []))
        unparsed += choice is None
        correct.append(choice == answer_letter(record))
    per_task = grouped_accuracy([str(r.get("task", "")) for r in records], correct)
    return {
        "score": pct(sum(correct), len(records)),
        "n": len(records),
        "n_unparsed": unparsed,
        "per_task": per_task,
        "macro_accuracy": sum(per_task.values()) / len(per_task),
    }


def score_mvbench(records: list[dict]) -> dict:
    require_records("mvbench", records)
    tasks: dict[str, list[int]] = {}  # task -> [records, answered, right]
    unparsed = right_total = 0
    for record in records:
        answered = bool(str(record.get("prediction") or "").strip())
        choice = mvbench_choice(prediction_text(record))
        ok = choice == answer_letter(record)
        unparsed += not (len(choice) == 1 and choice in "ABCDE")
        right_total += ok
        counts = tasks.setdefault(str(record.get("task", "")), [0, 0, 0])
        counts[0] += 1
        counts[1] += answered
        counts[2] += ok and answered
    per_task = {t: pct(c[2], c[1]) for t, c in sorted(tasks.items())}
    sizes = {t: c[0] for t, c in tasks.items()}
    return {
        "score": sum(per_task[t] * sizes[t] for t in per_task) / sum(sizes.values()),
        "n": len(records),
        "n_unparsed": unparsed,
        "n_answered": sum(c[1] for c in tasks.values()),
        "per_task": per_task,
        "macro_accuracy": sum(per_task.values()) / len(per_task),
        "micro_accuracy": pct(right_total, len(records)),
    }
