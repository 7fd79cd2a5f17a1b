"""The RL baselines' correctness reward, from the dataset's reference answer.

A choice question (the record has options) is right when the option letter extracted from the
response (the V*Bench-style ordered patterns) is the reference letter; an open question when
the response and the reference are equal after the VQA answer normalisation (case, punctuation,
articles, number words). The response is read up to the first '</answer>'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltopd.bench.scoring.options import extract_letter
from ltopd.bench.scoring.vqa_norm import normalize_vqa_answer
from ltopd.models.prompt import extract_answer, option_letter


def correctness_reward(record: Mapping[str, Any], response: str) -> float:
    """1.0 if ``response`` answers ``record`` correctly, else 0.0."""
    answer = extract_answer(response)
    options = record.get("options") or []
    reference = str(record["answer"]).strip()
    if options:
        letters = [option_letter(i) for i in range(len(options))]
        if reference.upper() not in letters and reference in options:  # a source that stores the option text
            reference = letters[options.index(reference)]
        return float(extract_letter(answer, letters) == reference.upper())
    return float(normalize_vqa_answer(answer) == normalize_vqa_answer(reference) != "")
