"""MuirBench and MVBench: multiple choice, one option letter else one option text.

Reads: ``answer`` (option letter), ``options``, ``task`` (task / sub-task name). ``score`` is
micro accuracy x 100 (both benchmarks' official overall figure; for MVBench's 20 equal tasks it
equals the task mean, also reported as ``macro_accuracy``).
"""

from __future__ import annotations

from .common import answer_letter, grouped_accuracy, pct, prediction_text, require_records
from .options import infer_choice


def _score_choice(benchmark: str, records: list[dict]) -> dict:
    require_records(benchmark, records)
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


def score_muirbench(records: list[dict]) -> dict:
    return _score_choice("muirbench", records)


def score_mvbench(records: list[dict]) -> dict:
    return _score_choice("mvbench", records)
