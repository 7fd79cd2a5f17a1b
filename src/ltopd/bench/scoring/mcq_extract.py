"""lmms-eval's judge-free letter extraction, the last resort of its static MMBench evaluation.

Official code followed: EvolvingLMMs-Lab/lmms-eval ``lmms_eval/tasks/_task_utils/mcq_extract.py``
(``extract_mcq_answer``), called by ``MMBench_Evaluator.eval_sub_data`` (``mmbench_evals.py``)
when the task runs with ``eval_method="static"`` (task ``mmbench_en_dev_static``) for a reply
that ``can_infer`` could not read.

Rules, in lmms-eval's order: strip whitespace, then each of ``, . ! ? ; : ' "`` from both ends
(one pass, in that order); pad with a space each side. Every choice letter X found as "(X)",
"X.", "X:", "X)", "X " (each at its last occurrence), after an answer phrase ("the answer is",
"i choose", ...: the first occurrence of X anywhere after the phrase, inside a word included),
as the reply's first character not followed by a letter, or as its last character not preceded
by a letter, is a candidate; only when there is none, any occurrence of X (its last). The
candidate of the highest format priority (start 10, end 9, phrase 7, parentheses 6, period 5,
colon 4, right parenthesis 3, space 2, anywhere 0) wins, the later position on a tie, then the
first found. Letters are matched case-sensitively.
"""

from __future__ import annotations

# lmms-eval's list, its order kept: a phrase's candidates are collected in this order.
ANSWER_PHRASES = (
    "the answer is", "answer is", "the correct answer is", "correct answer is",
    "the best answer is", "best answer is", "the correct option is", "correct option is",
    "the best option is", "best option is", "the choice is", "choice is",
    "the correct choice is", "correct choice is", "i choose", "i select", "i pick",
    "my answer is", "my choice is",
    "옵션", "정답은", "답은", "답:",  # Korean
    "答案是", "答案为", "选",  # Chinese
    "答えは",  # Japanese
)

DEFAULT_CHOICES = ("A", "B", "C", "D", "E", "F", "G", "H")  # when the caller gives none

PRIORITY = {"start": 10, "end": 9, "phrase": 7, "parentheses": 6, "period": 5, "colon": 4,
            "right_paren": 3, "space": 2, "fallback": 0}

# (format, written form of letter X), in the order lmms-eval collects them
_WRITTEN = (("parentheses", "({})"), ("period", "{}."), ("colon", "{}:"), ("right_paren", "{})"),
            ("space", "{} "))


def extract_mcq_answer(response: str, choices: list[str] | None = None) -> str:
    """The best candidate letter among ``choices`` (A-H when none or empty), or "" (lmms-eval
    ``extract_mcq_answer``)."""
    if not response or not response.strip():
        return ""
    choices = list(choices or DEFAULT_CHOICES)
    text = response.strip()
    for char in ",.!?;:'\"":
        text = text.strip(char)
    text = f" {text} "
    found: list[tuple[str, int, str]] = []  # (letter, position, format)
    for form, written in _WRITTEN:
        for ch in choices:
            if written.format(ch) in text:
                found.append((ch, text.rfind(written.format(ch)), form))
    lowered = text.lower()
    for phrase in ANSWER_PHRASES:
        at = lowered.find(phrase)
        if at != -1:
            for ch in choices:
                pos = text.find(ch, at + len(phrase))
                if pos != -1:
                    found.append((ch, pos, "phrase"))
    inner = text.strip()
    for ch in choices:
        if inner.startswith(ch) and (len(inner) == 1 or not inner[1].isalpha()):
            found.append((ch, 0, "start"))
    for ch in choices:
        if inner.endswith(ch) and (len(inner) == 1 or not inner[-2].isalpha()):
            found.append((ch, len(text) - 1, "end"))
    if not found:
        found = [(ch, text.rfind(ch), "fallback") for ch in choices if ch in text]
    if not found:
        return ""
    # a stable sort, as lmms-eval's: equal keys keep the order found
    found.sort(key=lambda c: (PRIORITY[c[2]], c[1]), reverse=True)
    return found[0][0]
