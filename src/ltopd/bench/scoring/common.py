"""Record access shared by the scorers.

Benchmark-specific fields may sit at the top level of a record or inside its ``meta`` JSON
string (design.md keeps "anything else" there); :func:`field` looks in both, top level first.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

_MISSING = object()

_THINK_CLOSE = "</think>"
_ANSWER_OPEN = "<answer>"
_ANSWER_CLOSE = "</answer>"


def strip_answer_tags(text: object) -> str:
    """The answer the model gave, without a think block or answer tags.

    The prompt pre-fills ``<think>\\n\\n</think>\\n\\n<answer>`` and generation stops at
    ``</answer>``, so a raw prediction may be bare ("B"), end with the closing tag ("B</answer>")
    or carry the whole template. A think block that never closes holds no answer: "".
    """
    if not text:
        return ""
    text = str(text)
    if _THINK_CLOSE in text:
        text = text.rsplit(_THINK_CLOSE, 1)[1]
    elif text.lstrip().startswith("<think>"):
        return ""
    if _ANSWER_OPEN in text:
        text = text.split(_ANSWER_OPEN, 1)[1]
    if _ANSWER_CLOSE in text:
        text = text.split(_ANSWER_CLOSE, 1)[0]
    return text.strip()


def prediction_text(record: dict) -> str:
    """The record's ``prediction`` (raw model text, maybe None) reduced to its answer."""
    return strip_answer_tags(record.get("prediction"))


def meta_of(record: dict) -> dict:
    """The record's meta as a dict (read it, do not modify it: a JSON string is parsed once and the
    dict shared by every call with that string, as a table's job scores each item many times)."""
    meta = record.get("meta")
    if not meta:
        return {}
    if isinstance(meta, dict):
        return meta
    return _parsed(meta)


@functools.lru_cache(maxsize=1 << 16)
def _parsed(meta: str) -> dict:
    return json.loads(meta)


def field(record: dict, name: str, default: Any = _MISSING) -> Any:
    """``record[name]``, else ``meta[name]``, else ``default``; ValueError if required."""
    if name in record and record[name] is not None:
        return record[name]
    meta = meta_of(record)
    if name in meta and meta[name] is not None:
        return meta[name]
    if default is _MISSING:
        raise ValueError(f"record {record.get('id')!r} has no field {name!r} (top level or meta)")
    return default


def option_letters(record: dict, fallback: str = "ABCD") -> list[str]:
    """Letters of the record's options (A, B, ... in order); ``fallback`` when it has none."""
    options = record.get("options") or []
    if not options:
        return list(fallback)
    if len(options) > 26:
        raise ValueError(f"record {record.get('id')!r} has more than 26 options")
    return [chr(ord("A") + i) for i in range(len(options))]


def answer_letter(record: dict) -> str:
    """The reference option letter, upper-cased ("b", "(B)", "B." all read as "B")."""
    answer = str(record.get("answer", "")).strip()
    match = re.fullmatch(r"\(?([A-Za-z])\)?\.?", answer)
    if not match:
        raise ValueError(f"record {record.get('id')!r}: answer {answer!r} is not an option letter")
    return match.group(1).upper()


def pct(numerator: float, denominator: float) -> float:
    """100 * numerator / denominator, 0.0 for an empty denominator."""
    return 100.0 * numerator / denominator if denominator else 0.0


def require_records(benchmark: str, records: list[dict]) -> None:
    if not records:
        raise ValueError(f"{benchmark}: no records to score")


def grouped_accuracy(keys: list[str], correct: list[bool]) -> dict[str, float]:
    """Accuracy x 100 per key, keys in sorted order."""
    hits: dict[str, list[int]] = {}
    for key, ok in zip(keys, correct):
        hits.setdefault(key, []).append(int(ok))
    return {key: pct(sum(v), len(v)) for key, v in sorted(hits.items())}
