"""Per-item readings (ltopd.bench.scoring.readings): hand-read replies, and every reader against
the official scorer it mirrors on random replies (the items' correctness must reproduce the
scorer's per-item accuracy, so a reader cannot drift from its scorer)."""

from __future__ import annotations

import json
import random

import pytest

from ltopd.bench.scoring import score
from ltopd.bench.scoring.readings import READERS, Reading, read
from ltopd.catalog import BENCHMARKS

COLORS = ["red", "blue", "green", "yellow"]


def rec(i, prediction, answer, **extra):
    return {"id": str(i), "question": "q", "options": extra.pop("options", []), "answer": answer, "task": "t",
            "meta": json.dumps(extra.pop("meta", {})), "prediction": prediction, **extra}


def test_every_catalog_benchmark_has_one_reader():
    assert set(READERS) == set(BENCHMARKS)
    with pytest.raises(ValueError, match="no per-item reader for benchmark 'nope'"):
        read("nope", {})


@pytest.mark.parametrize("benchmark, prediction, extra, expected", [
    # option letters: the scorer's letter, not the raw string
    ("vstar", "<answer>(B) blue</answer>", {"answer": "B", "options": COLORS}, Reading("B", True)),
    ("vstar", "blue", {"answer": "B", "options": COLORS}, Reading("B", True)),       # "BLUE" starts with B
    ("vstar", "xyz", {"answer": "B", "options": COLORS}, Reading(None, False)),
    ("hrbench4k", "It is green", {"answer": "C", "options": COLORS, "cycle_category": "single"},
     Reading("C", True)),                                                            # option text
    ("mmbench", "A red circle is shown", {"answer": "A", "options": COLORS, "index": 1},
     Reading("A", True)),                                                            # option text "red"
    ("mmbench", "A blue one is shown", {"answer": "A", "options": COLORS, "index": 1},
     Reading("B", False)),                                  # "A" the article (> 3 words): the option text "blue"
    ("muirbench", "D.", {"answer": "A", "options": COLORS}, Reading("D", False)),
    ("mvbench", "B. blue", {"answer": "B", "options": COLORS}, Reading("B", True)),
    ("mvbench", "", {"answer": "B", "options": COLORS}, Reading("", False)),
    # yes / no
    ("mme", "Yes.", {"answer": "Yes", "category": "color", "image_id": "i"}, Reading("yes", True)),
    ("mme", "", {"answer": "No", "category": "color", "image_id": "i"}, Reading("other", False)),
    ("pope", "There is not a dog.", {"answer": "no", "split": "random"}, Reading("no", True)),
    ("pope", "", {"answer": "no", "split": "random"}, Reading("yes", False)),        # POPE reads "" as yes
    # open answers: normalised text
    ("gqa", " Red!", {"answer": "red"}, Reading("red", True)),
    ("gqa", "", {"answer": "red"}, Reading(None, False)),
    ("textvqa", "Two Dogs.", {"answer": "2 dogs", "answers": ["2 dogs"] + ["cat"] * 9}, Reading("2 dogs", True)),
    ("textvqa", "bird", {"answer": "cat", "answers": ["cat"] * 10}, Reading("bird", False)),
    ("ocrbench", "The sign says STOP", {"answer": "stop", "category": "kie"}, Reading("the sign says stop", True)),
    ("ocrbench", "x ^ 2", {"answer": "x^2", "category": "hmer"}, Reading("x^2", True)),
    ("mmmu", "I pick (C)", {"answer": "C", "options": COLORS, "question_type": "multiple-choice"},
     Reading("C", True)),
    ("mmmu", "", {"answer": "C", "options": COLORS, "question_type": "multiple-choice"}, Reading(None, None)),
    # "3.50": the tail after "is " and the number in it, both 3.5, kept once
    ("mmmu", "so the answer is 3.50", {"answer": "3.5", "question_type": "open"}, Reading((3.5,), True)),
])
def test_hand_read_replies(benchmark, prediction, extra, expected):
    extra = dict(extra)
    got = read(benchmark, rec(7, prediction, extra.pop("answer"), **extra))
    assert got.answer == expected.answer
    if expected.correct is not None:  # MMMU's fallback letter is random: its correctness is the draw's
        assert got.correct == expected.correct


REPLIES = ["A", "B", "(C)", "D.", "The answer is B", "A red one", "A blue one is shown", "It is green", "blue", "yes",
           "No.", "not there", "Yes, there is", "", "red", "3", "so it is 3", "A B", "stop", "x^2", "<think>never"]


def _random_records(benchmark: str, n: int, rng: random.Random) -> list[dict]:
    out = []
    for i in range(n):
        reply, letter = rng.choice(REPLIES), rng.choice("ABCD")
        base = {
            "vstar": dict(answer=letter, options=COLORS),
            "hrbench4k": dict(answer=letter, options=COLORS, cycle_category="single"),
            "mmmu": dict(answer=letter, options=COLORS, question_type="multiple-choice") if i % 2
            else dict(answer=rng.choice(["3", "red", "['3', 'three']"]), question_type="open"),
            "mmbench": dict(answer=letter, options=COLORS, index=i),
            "pope": dict(answer=rng.choice(["yes", "no"]), split="random"),
            "mme": dict(answer=rng.choice(["Yes", "No"]), category="color", image_id=f"img{i // 2}"),
            "gqa": dict(answer=rng.choice(["red", "yes", "3"])),
            "textvqa": dict(answer="red", answers=[rng.choice(["red", "blue", "3"]) for _ in range(10)]),
            "ocrbench": dict(answer=rng.choice(["stop", "red"]), category=rng.choice(["kie", "hmer"])),
            "muirbench": dict(answer=letter, options=COLORS),
            "mvbench": dict(answer=letter, options=COLORS),
        }[benchmark]
        out.append(rec(i, reply, base.pop("answer"), **base))
    return out


def _per_item_accuracy(benchmark: str, records: list[dict]) -> float:
    """The scorer's own per-item accuracy x 100 (single split / category where it macro-averages)."""
    out = score(benchmark, records)
    return {"hrbench4k": lambda: out["micro_accuracy"], "mmbench": lambda: out["vanilla_accuracy"],
            "pope": lambda: out["per_split"]["random"]["accuracy"], "mme": lambda: out["per_category"]["color"]["acc"],
            "ocrbench": lambda: 100 * out["hits"] / out["n"], "mvbench": lambda: out["micro_accuracy"],
            }.get(benchmark, lambda: out["score"])()


@pytest.mark.parametrize("benchmark", sorted(set(BENCHMARKS) - {"textvqa"}))
def test_readers_reproduce_their_scorers(benchmark):
    records = _random_records(benchmark, 60, random.Random(benchmark))
    correct = [read(benchmark, r).correct for r in records]
    assert 0 < sum(correct) < len(correct)  # the random replies hit both cases
    assert 100 * sum(correct) / len(correct) == pytest.approx(_per_item_accuracy(benchmark, records))


def test_textvqa_reader_is_right_exactly_when_the_item_earns_credit():
    records = _random_records("textvqa", 60, random.Random(1))
    flags = [read("textvqa", r).correct for r in records]
    assert 0 < sum(flags) < len(flags)
    assert flags == [score("textvqa", [r])["score"] > 0 for r in records]
