"""The EvalAI VQA answer normaliser (as used for TextVQA) and the VQA soft accuracy.

Official code followed: EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/tasks/_task_utils/
vqa_eval_metric.py`` (``EvalAIAnswerProcessor``, the TextVQA/EvalAI processor of the M4C
evaluator) and ``lmms_eval/tasks/textvqa/utils.py`` (``textvqa_process_results``).

Steps, in the official order: lower-case; drop "," and "?"; split "'s" off ("man's" ->
"man 's"); strip; newlines/tabs to spaces; strip; punctuation rule (a mark touching a space is
deleted, otherwise it becomes a space; the official "digit,digit => delete every mark" branch
can never fire because commas are already gone); every period not followed by a digit is
deleted, at most 32 of them (the official ``PERIOD_STRIP.sub("", text, re.UNICODE)`` passes
``re.UNICODE`` = 32 as the count); number words to digits; articles dropped; contractions
restored from their apostrophe-less spellings.
"""

from __future__ import annotations

import functools
import re

_PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">",
                "<", "@", "`", ",", "?", "!")
# Official pattern "(?!<=\d)(\.)(?!\d)": its first group is a look-ahead that never fires, so the
# rule is "drop every period not followed by a digit" (3.14 and .5 keep theirs, "3." does not).
_PERIOD = re.compile(r"\.(?!\d)")
_PERIOD_COUNT = int(re.UNICODE)  # 32, passed as ``count`` by the official call
_COMMA_IN_NUMBER = re.compile(r"\d,\d")
_NUMBERS = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4",
            "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
_ARTICLES = {"a", "an", "the"}

# Apostrophe-less spelling -> contraction. The official table's capitalised keys (Id've, Im,
# Ive) are omitted: the text is lower-cased first, so they can never match. The odd
# "somebody'd" -> "somebodyd" entry is the official one, kept for identical matching.
_CONTRACTIONS = {
    "aint": "ain't", "arent": "aren't", "cant": "can't", "couldve": "could've",
    "couldnt": "couldn't", "couldn'tve": "couldn't've", "couldnt've": "couldn't've",
    "didnt": "didn't", "doesnt": "doesn't", "dont": "don't", "hadnt": "hadn't",
    "hadnt've": "hadn't've", "hadn'tve": "hadn't've", "hasnt": "hasn't", "havent": "haven't",
    "hed": "he'd", "hed've": "he'd've", "he'dve": "he'd've", "hes": "he's", "howd": "how'd",
    "howll": "how'll", "hows": "how's", "isnt": "isn't", "itd": "it'd", "itd've": "it'd've",
    "it'dve": "it'd've", "itll": "it'll", "let's": "let's", "maam": "ma'am",
    "mightnt": "mightn't", "mightnt've": "mightn't've", "mightn'tve": "mightn't've",
    "mightve": "might've", "mustnt": "mustn't", "mustve": "must've", "neednt": "needn't",
    "notve": "not've", "oclock": "o'clock", "oughtnt": "oughtn't", "ow's'at": "'ow's'at",
    "'ows'at": "'ow's'at", "'ow'sat": "'ow's'at", "shant": "shan't", "shed've": "she'd've",
    "she'dve": "she'd've", "she's": "she's", "shouldve": "should've", "shouldnt": "shouldn't",
    "shouldnt've": "shouldn't've", "shouldn'tve": "shouldn't've", "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've", "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll", "somebodys": "somebody's", "someoned": "someone'd",
    "someoned've": "someone'd've", "someone'dve": "someone'd've", "someonell": "someone'll",
    "someones": "someone's", "somethingd": "something'd", "somethingd've": "something'd've",
    "something'dve": "something'd've", "somethingll": "something'll", "thats": "that's",
    "thered": "there'd", "thered've": "there'd've", "there'dve": "there'd've",
    "therere": "there're", "theres": "there's", "theyd": "they'd", "theyd've": "they'd've",
    "they'dve": "they'd've", "theyll": "they'll", "theyre": "they're", "theyve": "they've",
    "twas": "'twas", "wasnt": "wasn't", "wed've": "we'd've", "we'dve": "we'd've",
    "weve": "we've", "werent": "weren't", "whatll": "what'll", "whatre": "what're",
    "whats": "what's", "whatve": "what've", "whens": "when's", "whered": "where'd",
    "wheres": "where's", "whereve": "where've", "whod": "who'd", "whod've": "who'd've",
    "who'dve": "who'd've", "wholl": "who'll", "whos": "who's", "whove": "who've",
    "whyll": "why'll", "whyre": "why're", "whys": "why's", "wont": "won't",
    "wouldve": "would've", "wouldnt": "wouldn't", "wouldnt've": "wouldn't've",
    "wouldn'tve": "wouldn't've", "yall": "y'all", "yall'll": "y'all'll", "y'allll": "y'all'll",
    "yall'd've": "y'all'd've", "y'alld've": "y'all'd've", "y'all'dve": "y'all'd've",
    "youd": "you'd", "youd've": "you'd've", "you'dve": "you'd've", "youll": "you'll",
    "youre": "you're", "youve": "you've",
}


def process_punctuation(text: str) -> str:
    """The VQA evaluation's punctuation step (lmms-eval reuses it, e.g. for MVBench)."""
    # A mark touching a space, or any "digit,digit" in the text, is deleted; otherwise it
    # becomes a space ("left-hand" -> "left hand", "(left)" -> "left").
    delete_all = _COMMA_IN_NUMBER.search(text) is not None
    out = text
    for mark in _PUNCTUATION:
        if delete_all or mark + " " in text or " " + mark in text:
            out = out.replace(mark, "")
        else:
            out = out.replace(mark, " ")
    return _PERIOD.sub("", out, count=_PERIOD_COUNT)


def _digits_articles_contractions(text: str) -> str:
    words = [_NUMBERS.get(word, word) for word in text.lower().split()]
    words = [word for word in words if word not in _ARTICLES]
    return " ".join(_CONTRACTIONS.get(word, word) for word in words)


@functools.lru_cache(maxsize=1 << 16)  # a record's ten references are scored once per prediction set
def normalize_vqa_answer(text: str) -> str:
    """EvalAI normalisation of one answer string."""
    text = text.lower().replace(",", "").replace("?", "").replace("'s", " 's").strip()
    text = text.replace("\n", " ").replace("\t", " ").strip()
    return _digits_articles_contractions(process_punctuation(text))


def vqa_soft_accuracy(prediction: str, answers: list[str]) -> float:
    """Mean over leave-one-out subsets of the references of min(#matches / 3, 1), in [0, 1].

    Prediction and references are normalised. With ten references of which k equal the
    prediction this is 0.3 k for k <= 3 and 1.0 for k >= 4.
    """
    if not answers:
        raise ValueError("VQA accuracy needs at least one reference answer")
    pred = normalize_vqa_answer(prediction)
    refs = [normalize_vqa_answer(answer) for answer in answers]
    total = 0.0
    for left_out in range(len(refs)):
        matches = sum(1 for j, ref in enumerate(refs) if j != left_out and ref == pred)
        total += min(1.0, matches / 3.0)
    return total / len(refs)
