"""Hand-worked checks of the benchmark scorers (ltopd.bench.scoring)."""

from __future__ import annotations

import json
import random

import pytest

from ltopd.bench.scoring import SCORERS, check_predictions, score, strip_answer_tags
from ltopd.bench.scoring.gqa import normalize_gqa_reference, normalize_gqa_reply
from ltopd.bench.scoring.mcq_extract import extract_mcq_answer
from ltopd.bench.scoring.mmbench import build_choices, can_infer_option, mmbench_choice
from ltopd.bench.scoring.mme import parse_mme
from ltopd.bench.scoring.mmmu import extract_numbers, open_correct, parse_multi_choice, parse_open
from ltopd.bench.scoring.multi_image import mvbench_choice
from ltopd.bench.scoring.ocrbench import ocr_hit
from ltopd.bench.scoring.options import extract_letter, infer_choice
from ltopd.bench.scoring.pope import parse_pope
from ltopd.bench.scoring.vqa_norm import normalize_vqa_answer, vqa_soft_accuracy
from ltopd.bench.scoring.vstar import parse_vstar

ABCD = ["A", "B", "C", "D"]
COLORS = ["red", "blue", "green", "yellow"]


def rec(i, prediction, answer="", options=None, **extra):
    return {"id": str(i), "question": "q", "options": options or [], "answer": answer,
            "task": extra.pop("task", "t"), "meta": json.dumps(extra.pop("meta", {})),
            "prediction": prediction, **extra}


# ---- answer tags ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    (None, ""),
    ("", ""),
    ("  B ", "B"),
    ("B</answer>", "B"),
    ("<think>\n\n</think>\n\n<answer>B</answer>", "B"),
    ("<answer> two dogs </answer> trailing chatter", "two dogs"),
    ("long reasoning </think> <answer>C", "C"),
    ("<think>never closed, A or B", ""),
    ("<think>x</think><answer></answer>", ""),
    (7, "7"),
])
def test_strip_answer_tags(raw, expected):
    assert strip_answer_tags(raw) == expected


# ---- registry and prediction checks ---------------------------------------------------------

def test_registry_names_and_unknown_benchmark():
    assert set(SCORERS) == {"vstar", "hrbench4k", "mmmu", "mmbench", "mme", "pope", "gqa",
                            "textvqa", "ocrbench", "muirbench", "mvbench"}
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        score("nope", [rec(1, "A")])
    with pytest.raises(ValueError, match="no records"):
        score("vstar", [])


def test_check_predictions_accepts_exact_match():
    check_predictions({"a": {}, "b": {}}, [{"id": "b"}, {"id": "a"}])


def test_check_predictions_counts_and_names_problems():
    bench = {f"q{i}": {} for i in range(8)}
    preds = [{"id": "q0"}, {"id": "q0"}, {"id": "q1"}, {"id": "zz"}, {"prediction": "A"}]
    with pytest.raises(ValueError) as err:
        check_predictions(bench, preds)
    msg = str(err.value)
    assert "6 missing id(s): 'q2', 'q3', 'q4', 'q5', 'q6', ..." in msg
    assert "'q7'" not in msg
    assert "1 duplicated id(s): 'q0'" in msg
    assert "1 id(s) not in the benchmark: 'zz'" in msg
    assert "1 prediction(s) without an id" in msg


def _minimal(benchmark, prediction):
    """One well-formed record (two for MME's pair) of each benchmark."""
    if benchmark == "mme":
        return [rec(i, prediction, "Yes", category="color", image_id="img") for i in (1, 2)]
    base = {
        "vstar": dict(answer="A", options=COLORS),
        "hrbench4k": dict(answer="A", options=COLORS, cycle_category="single"),
        "mmmu": dict(answer="A", options=COLORS, question_type="multiple-choice"),
        "mmbench": dict(answer="A", options=COLORS, index=3),
        "pope": dict(answer="yes", split="random"),
        "gqa": dict(answer="yes"),
        "textvqa": dict(answer="x", answers=["x"] * 10),
        "ocrbench": dict(answer="x", category="kie", answers=["x"]),
        "muirbench": dict(answer="A", options=COLORS),
        "mvbench": dict(answer="A", options=COLORS),
    }[benchmark]
    return [rec(1, prediction, **base)]


@pytest.mark.parametrize("benchmark", sorted(SCORERS))
@pytest.mark.parametrize("prediction", [None, "", "<think>unfinished"])
def test_empty_predictions_are_unparsed_and_never_crash(benchmark, prediction):
    records = _minimal(benchmark, prediction)
    out = score(benchmark, records)
    assert out["n"] == len(records)
    assert out["n_unparsed"] == len(records)
    if benchmark == "pope":  # RUCAIBox/POPE evaluate.py reads "" as "yes" (no "no"/"not" word)
        assert out["score"] == 100.0  # the minimal POPE record's label is "yes"
    elif benchmark != "mmmu":  # MMMU's official random fallback may guess right
        assert out["score"] == 0.0


@pytest.mark.parametrize("benchmark", sorted(SCORERS))
def test_correct_prediction_scores_full_marks(benchmark):
    prediction = {"mme": "Yes", "pope": "Yes, there is.", "gqa": "Yes", "textvqa": "x",
                  "ocrbench": "x"}.get(benchmark, "A")
    out = score(benchmark, _minimal(benchmark, f"<answer>{prediction}</answer>"))
    expected = {"mme": 200.0, "ocrbench": 1000.0}.get(benchmark, 100.0)
    assert out["score"] == pytest.approx(expected)
    assert out["n_unparsed"] == 0


# ---- V*Bench ordered letter patterns --------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("B", "B"),                                      # lone letter
    ("b.", "B"),                                     # a bare lower-case letter is accepted
    ("(C) red", "C"),                                # leading letter in brackets
    ("D: yellow", "D"),                              # leading letter
    ("(C) looks right, but the answer is D", "C"),   # leading letter beats "answer is"
    ("Between A and B, the answer is B", "B"),       # "answer is X"
    ("Answer: (A)", "A"),                            # "answer: X"
    ("I would pick (C) over A", "C"),                # "(X)" beats the later lone letter
    ("It has to be C. Not A", "C"),                  # "X." anywhere
    ("I choose B because it is red", "B"),           # the only lone letter
    ("OptionB", "B"),                                # the only option-letter character
    ("either A or B", None),                         # two lone letters, two characters
    ("a red car", None),                             # lower case is not a letter
    ("", None),
])
def test_extract_letter_patterns(text, expected):
    assert extract_letter(text, ABCD) == expected


def test_extract_letter_respects_option_count():
    assert extract_letter("C", ["A", "B"]) is None
    assert extract_letter("It is (C) or B", ["A", "B"]) == "B"


def test_vstar_score_and_per_task():
    records = [
        rec(1, "<answer>A</answer>", "A", COLORS, task="direct_attributes"),
        rec(2, "The answer is (B)", "B", COLORS, task="direct_attributes"),
        rec(3, "C", "D", COLORS, task="direct_attributes"),
        rec(4, None, "A", ["left", "right"], task="relative_position"),
    ]
    out = score("vstar", records)
    assert out["score"] == pytest.approx(50.0)
    assert out["n"] == 4 and out["n_unparsed"] == 1
    assert out["per_task"] == {"direct_attributes": pytest.approx(200 / 3),
                               "relative_position": 0.0}

# ---- V*Bench: lmms-eval vstar_bench/utils.py extract_answer_letter ----------------------------

@pytest.mark.parametrize("text, expected", [
    ("B", "B"),
    ("b", "B"),                                   # upper-cased first, then rule 1
    ("(c) red", "C"),                             # -> "(C) RED": rule 3 "(X)"
    ("a red car", "A"),                           # -> "A RED CAR": rule 1, any text may follow
    ("based on the image, it is red", "B"),       # -> "BASED ...": rule 1 again
    ("Blue", "B"),
    ("The answer is c", "C"),                     # rule 2 after upper-casing
    ("the correct option: d", "D"),               # rule 2 ("OPTION" then ":")
    ("I pick (C) not (D)", "C"),                  # rule 3, first match
    ("It should be C. Not A", "C"),               # rule 4 "X."
    ("my pick: d]", "D"),                         # rule 4 "X]"
    ("I think d is right", "D"),                  # rule 5 standalone (after upper-casing)
    ("OptionB", "B"),                             # rule 6: the only A-D character
    ("Either one", None),                         # "EITHER ONE": no A-D character at all
    ("", None),
])
def test_parse_vstar_follows_lmms_eval(text, expected):
    assert parse_vstar(text) == expected


def test_parse_vstar_ignores_option_count():
    # lmms-eval looks for A-D whatever the number of options: "C" on a two-option item is "C".
    assert parse_vstar("C") == "C"
    out = score("vstar", [rec(1, "c", "C", ["x", "y", "z"], task="direct_attributes"),
                          rec(2, "C", "A", ["left", "right"], task="relative_position")])
    assert out["score"] == pytest.approx(50.0) and out["n_unparsed"] == 0


# ---- one letter, else one option text (VLMEvalKit: HR-Bench, MuirBench) ---------------------

@pytest.mark.parametrize("text, expected", [
    ("B", "B"),
    ("(B) blue", "B"),
    ("A. red", "A"),
    ("B, B!", "B"),                       # one distinct letter
    ("I think it is blue", "B"),          # no letter word: option text
    ("A or B: blue", "B"),                # two letters: fall back to text
    ("red or blue", None),                # two texts
    ("D", "D"),
    ("none of these", None),
])
def test_infer_choice(text, expected):
    assert infer_choice(text, COLORS) == expected


def test_infer_choice_counts_only_existing_letters():
    assert infer_choice("D", ["red", "blue", "green"]) is None
    assert infer_choice("D or green", ["red", "blue", "green"]) == "C"


@pytest.mark.parametrize("text, expected", [
    ("Cannot determine the answer, maybe red", None),  # VLMEvalKit refusal sentence -> 'Z'
    ("Z", None),                                        # no letter, a word "Z" -> 'Z'
    ("Z: blue", None),                                  # 'Z' stops the option-text step
    ("Failed to obtain answer via API. blue", "B"),     # letter step skipped, text step runs
    ("A red circle", "A"),                              # guard off (VLMEvalKit default)
])
def test_infer_choice_vlmevalkit_rules(text, expected):
    assert infer_choice(text, COLORS) == expected


SHAPES = ["blue square", "red circle", "green triangle", "yellow star"]


# ---- MMBench: lmms-eval's static evaluation ------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    # the article: "A" alone with more than 3 words stops the lone-letter step, the written forms
    # then find "C." (the old VLMEvalKit-style guard gave nothing here, then the text "red circle": B)
    ("A red circle is shown, so the answer is C.", "C"),
    ("A cat sits here, (C)", "C"),          # "(X)" after the article
    ("A red circle is shown", None),        # article, no written letter: nothing (text step next)
    ("A red circle", "A"),                  # 3 words: the guard needs more than three
    ("A", "A"),
    ("The answer is B", "B"),               # one lone letter, not "A": no guard
    ("The answer is A. B is wrong", "B"),   # "A." is not a lone word; "B" is the only one
    ("(A) and B.", "B"),                    # "X." is tried before "(X)"
    ("B) or (C)", "B"),                     # "X)" is tried before "(X)"
    ("A. B. C.", None),                     # three "X.": no form with exactly one letter
    ("E", "E"),                             # the letter steps take A-E whatever the options
    ("b", None),                            # case kept: no upper-case letter
    ("answer:C", None),                     # ":C" must be a whole word
])
def test_mmbench_can_infer_option(text, expected):
    """lmms-eval ``lmms_eval/tasks/mmbench/mmbench_evals.py``, ``MMBench_Evaluator.can_infer_option``:
    whitespace split, exactly one of A-E as a word (unless "A" is a word of a reply of more than
    3 words), else the first of the (prefix, suffix) forms "X.", "X,", "X:", "X)", "X).", "(X)",
    "(X).", ":X", ":X,", ":X.", ":X)", ":X)." that exactly one letter takes."""
    assert can_infer_option(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("A red circle is shown, so the answer is C.", "C"),  # the letter step, before any text
    ("A red circle is shown", "B"),             # article, no written letter: the option text
    ("I think it is blue", "B"),                # no letter: the only option text found
    ("red or blue", None),                      # two option texts, then no capital letter
    ("Failed to obtain answer via API. blue", "B"),  # letter step skipped, text step runs
    ("I think it is Blue", "B"),                # SHAPES: no whole option text; extract: any "B"
    ("Cannot determine the answer", "C"),       # no refusal rule in lmms-eval; extract: any "C"
    ("B or E", "B"),                            # two lone letters; extract: "B" opens the reply
    ("answer:C", "C"),                          # extract: "C" ends the reply after ":"
    ("Z", None),                                # no 'Z' rule; Z is no choice
    ("", None),
])
def test_mmbench_choice(text, expected):
    """lmms-eval ``MMBench_Evaluator.can_infer`` (``can_infer_option``, else ``can_infer_text``:
    the only option, of ``build_choices``, whose lower-cased text is in the lower-cased reply),
    else ``eval_sub_data``'s static branch: ``extract_mcq_answer`` of
    ``lmms_eval/tasks/_task_utils/mcq_extract.py`` over the option letters."""
    options = COLORS if text in ("I think it is blue", "red or blue",
                                 "Failed to obtain answer via API. blue") else SHAPES
    assert mmbench_choice(text, options) == expected


def test_mmbench_text_step_reads_only_options_a_to_d():
    """``build_choices`` loops over "ABCD" and skips NaN options: a fifth option's text, or a
    missing one, is never matched; the letter "E" is (``can_infer_option``'s A-E)."""
    five = ["red", "blue", "green", "yellow", "purple"]
    assert mmbench_choice("purple it is", five) is None
    assert mmbench_choice("it is E", five) == "E"
    assert mmbench_choice("green", ["red", None, "green"]) == "C"
    assert build_choices(["red", float("nan"), "green"]) == {"A": "red", "C": "green"}


@pytest.mark.parametrize("text, choices, expected", [
    ("the answer is probably Blue", ABCD, "B"),  # phrase: the first "B" after it, inside a word
    ("(A) or maybe C.", ABCD, "C"),              # end (9) beats parentheses (6); "." stripped first
    ("B. Actually D", ABCD, "B"),                # start (10) beats end (9)
    ("maybe (B) or (D) hmm", ABCD, "D"),         # same format: the later position
    ("Apple", ABCD, "A"),                        # "A" then a letter: no start; anywhere: A
    ("Bob and Dan", ABCD, "D"),                  # anywhere: the later one (rfind)
    ("xyz b", ABCD, ""),                         # case kept: nothing
    ("F", None, "F"),                            # no choices given: A-H
    ("F", [], "F"),
    ("F", ABCD, ""),
    ('  "C";  ', ABCD, "C"),                    # quotes and ";" stripped: "C" alone
    ("", ABCD, ""),
])
def test_lmms_eval_extract_mcq_answer(text, choices, expected):
    """lmms-eval ``lmms_eval/tasks/_task_utils/mcq_extract.py``, ``extract_mcq_answer``: strip, strip
    ``, . ! ? ; : ' "`` in turn, pad; candidates "(X)", "X.", "X:", "X)", "X " (last occurrence),
    after an answer phrase, at the start or the end not touching a letter, else anywhere; the
    highest priority (start 10, end 9, phrase 7, parentheses 6, period 5, colon 4, ")" 3,
    space 2, anywhere 0) wins, then the later position."""
    assert extract_mcq_answer(text, choices) == expected


def test_mmbench_scorer_reads_the_article_case_as_lmms_eval():
    records = [rec(1, "A red circle is shown, so the answer is C.", "C", SHAPES, index=1),
               rec(2, "A red circle is shown", "B", SHAPES, index=2),
               rec(3, "A red circle is shown", "A", SHAPES, index=1_000_002),
               rec(4, "Cannot determine the answer", "C", SHAPES, index=3)]
    out = score("mmbench", records)
    assert out["vanilla_accuracy"] == pytest.approx(75.0)   # record 3 reads as B, not A
    assert out["n_groups"] == 3
    assert out["score"] == pytest.approx(200 / 3)           # groups 1 and 3; group 2 fails
    assert out["n_unparsed"] == 0


def test_hrbench_macro_over_cycle_categories():
    records = [
        rec(1, "A", "A", COLORS, cycle_category="single"),
        rec(2, "B", "A", COLORS, cycle_category="single"),
        rec(3, "green", "C", COLORS, meta={"cycle_category": "cross"}),
    ]
    out = score("hrbench4k", records)
    assert out["per_cycle_category"] == {"cross": 100.0, "single": 50.0}
    assert out["score"] == pytest.approx(75.0)          # (50 + 100) / 2, not 2/3
    assert out["micro_accuracy"] == pytest.approx(200 / 3)


def test_mmbench_group_with_one_wrong_rotation_scores_zero():
    records = [
        rec(1, "A", "A", COLORS, index=5),
        rec(2, "B", "B", COLORS, index=1_000_005),
        rec(3, "A", "C", COLORS, index=2_000_005),   # wrong rotation: group 5 fails
        rec(4, "D", "D", COLORS, index=7),
        rec(5, "yellow", "A", ["yellow", "red"], index=1_000_007),
    ]
    out = score("mmbench", records)
    assert out["n_groups"] == 2
    assert out["score"] == pytest.approx(50.0)
    assert out["vanilla_accuracy"] == pytest.approx(80.0)


def test_muirbench_micro_and_mvbench_macro():
    records = [rec(1, "A", "A", COLORS, task="x"), rec(2, "A", "B", COLORS, task="x"),
               rec(3, "C", "C", COLORS, task="y")]
    for name in ("muirbench", "mvbench"):
        out = score(name, records)
        assert out["score"] == pytest.approx(200 / 3)
        assert out["macro_accuracy"] == pytest.approx(75.0)
        assert out["per_task"] == {"x": 50.0, "y": 100.0}


@pytest.mark.parametrize("text, expected", [
    ("B. blue", "B"),                 # "X." + text: rule 1
    ("b.  blue", "B"),                # case-insensitive
    ("B.", "B"),                      # rule 1 needs text after "B."; rule 3 then finds "b"
    ("(C)", "C"),                     # parentheses removed, then standalone "c"
    ("I choose d", "D"),              # standalone letter, first one
    ("the answer is e or a", "E"),    # A-E: the first standalone letter wins
    ("blue", "blue"),                 # no letter: the processed text itself
    ("Between a and b.", "A"),
    ("", ""),
])
def test_mvbench_choice_follows_lmms_eval(text, expected):
    assert mvbench_choice(text) == expected


def test_mvbench_drops_empty_replies_from_the_denominator():
    records = [rec(1, "A", "A", COLORS, task="x"), rec(2, "", "B", COLORS, task="x"),
               rec(3, "B", "A", COLORS, task="y"), rec(4, None, "A", COLORS, task="y"),
               rec(5, "C", "C", COLORS, task="y"), rec(6, "<think>never closed", "A", COLORS,
                                                         task="y")]
    out = score("mvbench", records)
    # x: 1 right of 1 answered; y: 1 right of 3 answered (the unfinished think block is a
    # non-empty raw reply, so it counts, wrong). Weighted by task size (2 and 4 records).
    assert out["per_task"] == {"x": 100.0, "y": pytest.approx(100 / 3)}
    assert out["score"] == pytest.approx((2 * 100 + 4 * 100 / 3) / 6)
    assert out["macro_accuracy"] == pytest.approx((100 + 100 / 3) / 2)
    assert out["micro_accuracy"] == pytest.approx(100 * 2 / 6)
    assert out["n_answered"] == 4 and out["n_unparsed"] == 3


# ---- MMMU -----------------------------------------------------------------------------------

@pytest.mark.parametrize("reply, expected", [
    ("(B)", "B"),
    ("B", "B"),
    ("The answer is B.", "B"),
    ("(A) or maybe (C)", "C"),                                    # last bracketed candidate
    ("A B", "B"),                                                 # last spaced candidate
    ("I am fairly sure the colour here is blue", "B"),            # > 5 words: option text
])
def test_mmmu_multi_choice_parsed(reply, expected):
    letter, parsed = parse_multi_choice(reply, COLORS, random.Random(0))
    assert (letter, parsed) == (expected, True)


def test_mmmu_multi_choice_random_fallback_is_seeded():
    # "blue" alone has <= 5 words, so the text rule does not apply -> seeded random letter.
    letter, parsed = parse_multi_choice("blue", COLORS, random.Random("42:q7"))
    assert not parsed
    assert letter == random.Random("42:q7").choice(ABCD)
    records = [rec("q7", "blue", letter, COLORS, question_type="multiple-choice")]
    out = score("mmmu", records)
    assert out == {"score": 100.0, "n": 1, "n_unparsed": 1, "n_random_fallback": 1}
    records[0]["seed"] = 43
    other = random.Random("43:q7").choice(ABCD)
    assert score("mmmu", records)["score"] == (100.0 if other == letter else 0.0)


def test_mmmu_numbers():
    # Comma, scientific, then simple matches, as the official three regexes give them: the
    # simple one also finds "234" in "1,234" and "2", "3" in "2.5e3".
    assert extract_numbers("cost 1,234 or 2.5e3 or -0.75") == \
        ["1,234", "2.5e3", "234", "2", "3", "-0.75"]
    # Key tails "3.14159" (after "is ") and its number, both normalised to 3.14.
    assert parse_open("The answer is 3.14159") == [3.14]
    # Lines split at newlines only; just the reply's final "." is stripped, so line 1 keeps it.
    assert parse_open("It is Paris.\nSo the city is Paris.") == ["paris.", "paris"]


def test_mmmu_number_word_boundary():
    # The official simple-number regex ends integers with \b: "12cm" gives no number, while a
    # decimal needs no boundary ("3.5cm" gives 3.5). The old regex read 12 from "12cm".
    assert extract_numbers("12cm") == []
    assert extract_numbers("3.5cm") == ["3.5"]
    assert extract_numbers("x12 and 12") == ["12", "12"]  # no boundary is asked on the left
    assert extract_numbers("a12b") == []
    assert parse_open("The length is 12cm") == ["12cm"]
    assert open_correct(["12"], parse_open("The length is 12cm")) is False
    assert open_correct(["12"], parse_open("The length is 12 cm")) is True
    assert open_correct(["3.5"], parse_open("The length is 3.5cm")) is True


@pytest.mark.parametrize("reply, expected", [
    ("(B) and then B", "B"),                   # "(X)" forms are looked for first
    ("A. red", None),                          # no "(A)", no " A " (MMMU has no "A." rule),
    #                                            <= 5 words -> random fallback
    ("so my answer is: C", "C"),               # ":" stripped only at the ends; " C " found
    ("I would say that it is dark red, not red", "A"),  # texts: "red" occurs last -> A
])
def test_mmmu_multi_choice_official_rules(reply, expected):
    options = ["red", "dark red", "green", "yellow"]
    letter, parsed = parse_multi_choice(reply, options, random.Random(0))
    if expected is None:
        assert not parsed
    else:
        assert (letter, parsed) == (expected, True)


def test_mmmu_tie_picks_first_candidate_of_latest_start():
    # Options "red" and "dark red": "dark red" contains "red", so rfind("red") starts after
    # rfind("dark red"); the candidate whose last occurrence starts last wins -> "red" (B).
    letter, parsed = parse_multi_choice("my final reply is the dark red one here",
                                        ["dark red", "red", "blue", "green"], random.Random(0))
    assert (letter, parsed) == ("B", True)
    # Two equal option texts tie at the same start: np.argmax keeps the first candidate.
    letter, _ = parse_multi_choice("my final reply is the red one here",
                                   ["red", "red", "blue", "green"], random.Random(0))
    assert letter == "A"


@pytest.mark.parametrize("reply, refs, expected", [
    ("The answer is 3.14159", ["3.14"], True),          # rounded to 2 places
    ("The answer is 3.14159", ["3.1416"], True),
    ("The answer is 3.14159", ["3.2"], False),
    ("so the total is 1,234 dollars", ["1234"], True),  # comma number
    ("so the total is 1,234 dollars", ["234"], True),   # the official parser also sees "234"
    ("the capital is Paris", ["paris"], True),
    ("the answer is 3/2", ["1.5", "3/2"], True),
    ("x = 7\ny = 12", ["12"], True),                     # "=" counts on the last line only
    ("x = 7\ny = 12", ["7"], False),
])
def test_mmmu_open(reply, refs, expected):
    assert open_correct(refs, parse_open(reply)) is expected


def test_mmmu_score_mixes_types():
    records = [
        rec(1, "(C)", "C", COLORS, question_type="multiple-choice"),
        rec(2, "Therefore the final result is 42", "42", question_type="open"),
        rec(3, "", "['1.5', '3/2']", question_type="open"),
        rec(4, "the answer is 3/2", "['1.5', '3/2']", meta={"question_type": "open"}),
    ]
    out = score("mmmu", records)
    assert out["score"] == pytest.approx(75.0)
    assert out["n_unparsed"] == 1 and out["n_random_fallback"] == 0


# ---- GQA ------------------------------------------------------------------------------------

def test_gqa_raw_and_normalised():
    records = [rec(1, "yes", "yes"), rec(2, "Yes.", "yes"), rec(3, "the car", "car"),
               rec(4, None, "no")]
    out = score("gqa", records)
    assert out["exact_match"] == out["score"] == pytest.approx(50.0)
    assert out["exact_match_raw"] == pytest.approx(25.0)
    assert out["n_unparsed"] == 1

@pytest.mark.parametrize("reply, reference, right", [
    ("yes !", "yes", False),       # stripped first -> "yes !" -> "yes " after punctuation
    ("yes!", "yes", True),
    (" Yes. ", "yes", True),       # surrounding whitespace goes before punctuation removal
    ("yes", "Yes.", True),         # the reference is lower-cased and de-punctuated too
    ("left-hand", "lefthand", True),
])
def test_gqa_lmms_eval_order(reply, reference, right):
    assert (normalize_gqa_reply(reply) == normalize_gqa_reference(reference)) is right


def test_gqa_scorer_yes_bang():
    records = [{"id": "1", "answer": "yes", "prediction": "yes !"},
               {"id": "2", "answer": "yes", "prediction": "<answer> yes! </answer>"}]
    assert score("gqa", records)["exact_match"] == pytest.approx(50.0)


# ---- TextVQA --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("The Man's HAT!", "man 's hat"),
    ("3.14", "3.14"),               # decimal point kept
    ("the end.", "end"),            # other periods dropped
    ("Two dogs", "2 dogs"),
    ("none", "0"),
    ("dont", "don't"),
    ("left-hand", "left hand"),     # isolated mark -> space
    ("(left) - right", "left right"),  # marks touching spaces are deleted
    ("1,000", "1000"),
    ("an apple, a pear", "apple pear"),
    ("line\tone\ntwo", "line 1 2"),
])
def test_vqa_normalisation(text, expected):
    assert normalize_vqa_answer(text) == expected

def test_vqa_period_rule_stops_after_32():
    # The official PERIOD_STRIP.sub("", text, re.UNICODE) passes 32 as the count.
    assert normalize_vqa_answer("." * 40) == "." * 8
    assert normalize_vqa_answer("a." * 33) == "a" * 32 + "a."


ANSWERS = ["Red", "red.", "maroon", "dark red", "crimson", "maroon", "Maroon", "burgundy",
           "wine", "maroon!"]


def test_vqa_soft_accuracy_by_hand():
    # "red" matches refs 0 and 1 (k=2): the 8 subsets keeping both give 2/3, the 2 dropping one
    # give 1/3 -> (8 * 2/3 + 2 * 1/3) / 10 = 0.6.
    assert vqa_soft_accuracy("RED", ANSWERS) == pytest.approx(0.6)
    # "maroon" matches refs 2, 5, 6, 9 (k=4): every subset keeps >= 3 -> 1.0.
    assert vqa_soft_accuracy("the maroon", ANSWERS) == pytest.approx(1.0)
    # k=1: 9 subsets give 1/3, one gives 0 -> 0.3.
    assert vqa_soft_accuracy("crimson", ANSWERS) == pytest.approx(0.3)
    assert vqa_soft_accuracy("blue", ANSWERS) == 0.0


def test_textvqa_score():
    records = [rec(1, "<answer>RED</answer>", "red", answers=ANSWERS),
               rec(2, "maroon", "maroon", meta={"answers": ANSWERS}),
               rec(3, "", "red", answers=ANSWERS)]
    out = score("textvqa", records)
    assert out["score"] == pytest.approx(100 * 1.6 / 3)
    assert out["n_unparsed"] == 1


# ---- OCRBench -------------------------------------------------------------------------------

def test_ocr_hit_rules():
    assert ocr_hit("The sign says HELLO World.", ["hello world"], "scene_vqa")
    assert not ocr_hit("hello", ["hello world"], "scene_vqa")
    assert ocr_hit("x^{2} + 1", ["x ^ { 2 }"], "hmer")          # spaces removed on both sides
    assert not ocr_hit("x^{2}", ["X^{2}"], "hmer")              # formulas keep their case
    assert ocr_hit("Total: $5", ["$4", "$5"], "kie")             # any acceptable answer


def test_ocrbench_scaling_and_categories():
    records = [
        rec(1, "STOP", "stop", category="Regular Text Recognition", answers=["stop"]),
        rec(2, "the date is 2020", "2020", category="doc_vqa", answers=["2020"]),
        rec(3, "a^{2}", "a^{2}", category="hmer", answers="a ^ { 2 }"),
        rec(4, "", "x", category="kie", answers=["x"]),
    ]
    out = score("ocrbench", records)
    assert out["hits"] == 3 and out["score"] == pytest.approx(750.0)
    assert out["per_category_hits"] == {"text_recognition": 1, "scene_vqa": 0, "doc_vqa": 1,
                                        "kie": 0, "hmer": 1}
    assert out["per_category_accuracy"]["kie"] == 0.0
    with pytest.raises(ValueError, match="unknown OCRBench category"):
        score("ocrbench", [rec(1, "x", "x", category="poetry")])

def test_ocrbench_empty_reply_is_scored_like_the_official():
    out = score("ocrbench", [rec(1, "", "x", category="kie", answers=["x", ""])])
    assert out["hits"] == 1 and out["n_unparsed"] == 1   # "" in "" is a hit, as in VLMEvalKit


# ---- POPE -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Yes, there is a dog.", "yes"),
    ("No, there is not.", "no"),
    ("There is no dog in the image", "no"),
    ("The dog is not visible", "no"),
    ("Yes. But no cat.", "yes"),        # only the first sentence counts
    ("no.", "no"),
    ("No, there is", "no"),
    ("No,there is", "yes"),             # commas are deleted, not spaced: the word is "Nothere"
])
def test_parse_pope(text, expected):
    assert parse_pope(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("", "yes"),                        # no words "No"/"no"/"not" -> "yes" (evaluate.py)
    ("   ", "yes"),
    ("Not sure", "yes"),                # "Not" is not in the official word list
    ("It is not.", "no"),
    ("There is a dog, no cat.", "no"),  # comma deleted, "no" is a word
    ("no\ncat", "yes"),                 # split on single spaces only: the word is "no\ncat"
])
def test_parse_pope_official_cases(text, expected):
    assert parse_pope(text) == expected


def test_parse_pope_is_word_based():
    assert parse_pope("Nothing") == "yes"     # "no" must be a whole word
    assert parse_pope("Not really") == "yes"  # the official list has "No", "no", "not" only


def test_pope_metrics_by_hand():
    rnd = [("yes", "Yes"), ("yes", "No"), ("yes", "yes"), ("no", "Yes"), ("no", "no")]
    records = [rec(i, p, a, split="random") for i, (a, p) in enumerate(rnd)]
    records += [rec(10, None, "yes", meta={"split": "popular"}),   # empty -> "yes" (official)
                rec(11, "No.", "no", meta={"split": "popular"}),
                rec(12, "", "no", meta={"split": "popular"})]      # empty -> "yes": a FP
    out = score("pope", records)
    r = out["per_split"]["random"]   # TP 2, FN 1, FP 1, TN 1
    assert r["accuracy"] == pytest.approx(60.0)
    assert r["precision"] == pytest.approx(200 / 3)
    assert r["recall"] == pytest.approx(200 / 3)
    assert r["f1"] == pytest.approx(200 / 3)
    assert r["yes_ratio"] == pytest.approx(60.0)
    p = out["per_split"]["popular"]  # TP 1, FN 0, FP 1, TN 1
    assert p["accuracy"] == pytest.approx(200 / 3)
    assert p["precision"] == pytest.approx(50.0)
    assert p["recall"] == pytest.approx(100.0)
    assert p["f1"] == pytest.approx(200 / 3)        # 2 * 0.5 * 1 / 1.5
    assert p["yes_ratio"] == pytest.approx(200 / 3)
    assert "adversarial" not in out["per_split"]
    assert out["score"] == out["macro"]["accuracy"] == pytest.approx((60 + 200 / 3) / 2)
    assert out["macro"]["f1"] == pytest.approx(200 / 3)
    assert out["n_unparsed"] == 2


def test_pope_metric_with_no_predicted_yes_is_zero():
    # evaluate.py would divide by zero here; the scorer reports 0 (documented deviation).
    out = score("pope", [rec(1, "No", "yes", split="random"), rec(2, "no", "no", split="random")])
    assert out["per_split"]["random"] == {"accuracy": 50.0, "precision": 0.0, "recall": 0.0,
                                          "f1": 0.0, "yes_ratio": 0.0}


# ---- MME ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Yes", "yes"), ("no.", "no"), ("y", "yes"), ("N.", "no"), ("No, it is not", "no"),
    ("Yes, clearly", "yes"), ("nope", "no"), ("I think yes", "other"), ("x", "other"),
])
def test_parse_mme(text, expected):
    assert parse_mme(text) == expected


def test_mme_category_by_hand():
    records = [
        rec(1, "Yes", "Yes", category="existence", image_id="i1"),
        rec(2, "No", "No", category="existence", image_id="i1"),      # i1: both right
        rec(3, "Yes", "Yes", category="existence", image_id="i2"),
        rec(4, "Yes", "No", category="existence", image_id="i2"),     # i2: one right
        rec(5, "maybe", "Yes", category="code_reasoning", image_id="c1"),
        rec(6, "No", "Yes", category="code_reasoning", image_id="c1"),
    ]
    out = score("mme", records)
    ex = out["per_category"]["existence"]
    assert ex["acc"] == pytest.approx(75.0)       # (100 + 50) / 2
    assert ex["acc_plus"] == pytest.approx(50.0)  # (100 + 0) / 2
    assert ex["score"] == pytest.approx(125.0)
    assert out["per_category"]["code_reasoning"]["score"] == 0.0
    assert (out["perception"], out["cognition"], out["score"]) == (125.0, 0.0, 125.0)
    assert out["n_unparsed"] == 1


def test_mme_rejects_unpaired_and_unknown():
    with pytest.raises(ValueError, match="expected 2"):
        score("mme", [rec(1, "Yes", "Yes", category="color", image_id="a")])
    with pytest.raises(ValueError, match="unknown MME category"):
        score("mme", [rec(1, "Yes", "Yes", category="colour", image_id="a")] * 2)
