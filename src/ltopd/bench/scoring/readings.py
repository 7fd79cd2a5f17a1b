"""Per-item readings: what a benchmark's official scorer reads from one reply, and whether that
item is right, for comparisons that pair two predictions of the same item (loyalty to the
full-token model and its answer flips, ltopd.stats.loyalty).

The scorers return aggregates only; a reading reuses each scorer's own parser, so "the same
answer" means the same option letter, yes/no or normalised text the official scorer compares,
not the same raw string ("B" and "(B) blue" agree). tests/bench/test_readings.py checks every
reader against its scorer: the mean of the items' ``correct`` equals the scorer's per-item
accuracy on random replies, so a reader cannot drift from the scorer it mirrors.

Per benchmark, ``answer`` and ``correct``:

* option letters (V*Bench, HR-Bench, MMBench, MuirBench, MVBench): the scorer's letter (None:
  nothing parsed); right when it is the reference letter. MMBench: the single reply, not its
  circular group (the group is the score's unit, the item is loyalty's).
* MME and POPE: "yes" / "no" (MME's "other": neither), right when it equals the label.
* MMMU: the letter (None when the official random fallback chose it: two unparsed replies agree,
  an unparsed reply never agrees with a parsed one) or the open reply's candidate answers;
  right as the scorer rules (the fallback letter included).
* GQA: the normalised reply (None if empty), right on exact match.
* TextVQA: the EvalAI-normalised reply (None if empty), right when the item earns any soft
  credit (at least one annotator gave that answer).
* OCRBench: the reply as its category's rule normalises it, right on a hit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from .common import answer_letter, field, prediction_text
from .gqa import normalize_gqa_reference, normalize_gqa_reply
from .mmbench import mmbench_choice
from .mme import parse_mme
from .mmmu import DEFAULT_SEED, _references, open_correct, parse_multi_choice, parse_open
from .multi_image import mvbench_choice
from .ocrbench import _category, ocr_hit
from .options import infer_choice
from .pope import parse_pope
from .vqa_norm import normalize_vqa_answer, vqa_soft_accuracy
from .vstar import parse_vstar


@dataclass(frozen=True)
class Reading:
    """One item as the official scorer reads it: the parsed answer (None: nothing parsed) and
    whether the item is right."""

    answer: Hashable
    correct: bool


def _choice(parse: Callable[[str, list], str | None]) -> Callable[[dict], Reading]:
    """A reader of option letters by ``parse(reply, options)``, the scorer's own letter parser."""
    def read(record: dict) -> Reading:
        letter = parse(prediction_text(record), list(record.get("options") or []))
        return Reading(letter, letter == answer_letter(record))
    return read


def read_vstar(record: dict) -> Reading:
    letter = parse_vstar(prediction_text(record))
    return Reading(letter, letter == answer_letter(record))


def read_mvbench(record: dict) -> Reading:
    choice = mvbench_choice(prediction_text(record))
    return Reading(choice, choice == answer_letter(record))


def read_yes_no(parse: Callable[[str], str]) -> Callable[[dict], Reading]:
    def read(record: dict) -> Reading:
        said = parse(prediction_text(record))
        return Reading(said, said == str(record["answer"]).strip().lower())
    return read


def read_mmmu(record: dict) -> Reading:
    reply = prediction_text(record)
    options = list(record.get("options") or [])
    kind = str(field(record, "question_type", "multiple-choice" if options else "open"))
    if kind == "multiple-choice":
        rng = random.Random(f"{field(record, 'seed', DEFAULT_SEED)}:{record.get('id')}")
        letter, parsed = parse_multi_choice(reply, options, rng)
        return Reading(letter if parsed else None, letter == str(record["answer"]).strip().upper())
    if not reply:
        return Reading(None, False)
    candidates = parse_open(reply)
    return Reading(tuple(candidates), open_correct(_references(record["answer"]), candidates))


def read_gqa(record: dict) -> Reading:
    reply = prediction_text(record)
    if not reply:
        return Reading(None, False)
    said = normalize_gqa_reply(reply)
    return Reading(said, said == normalize_gqa_reference(str(record["answer"])))


def read_textvqa(record: dict) -> Reading:
    reply = prediction_text(record)
    if not reply:
        return Reading(None, False)
    credit = vqa_soft_accuracy(reply, [str(a) for a in field(record, "answers")])
    return Reading(normalize_vqa_answer(reply), credit > 0)


def read_ocrbench(record: dict) -> Reading:
    category = _category(record)
    reply = prediction_text(record)
    answers = field(record, "answers", None) or [record["answer"]]
    answers = [answers] if isinstance(answers, str) else answers
    said = (reply.strip().replace("\n", " ").replace(" ", "") if category == "hmer"
            else reply.lower().strip().replace("\n", " "))
    return Reading(said, ocr_hit(reply, [str(a) for a in answers], category))


# benchmark -> its reader (tests/bench/test_readings.py: the catalog's benchmarks, each once)
READERS: dict[str, Callable[[dict], Reading]] = {
    "vstar": read_vstar,
    "hrbench4k": _choice(infer_choice),
    "gqa": read_gqa,
    "mmmu": read_mmmu,
    "mmbench": _choice(mmbench_choice),
    "mme": read_yes_no(lambda text: parse_mme(text) if text else "other"),
    "pope": read_yes_no(parse_pope),
    "textvqa": read_textvqa,
    "ocrbench": read_ocrbench,
    "muirbench": _choice(infer_choice),
    "mvbench": read_mvbench,
}


def read(benchmark: str, record: dict) -> Reading:
    """``record`` (a prediction row) as ``benchmark``'s official scorer reads it."""
    if benchmark not in READERS:
        raise ValueError(f"no per-item reader for benchmark {benchmark!r}; known: {sorted(READERS)}")
    return READERS[benchmark](record)
