"""Option-letter extraction shared by the choice scorers, and the RL reward's letter parser.

* :func:`infer_choice` -- VLMEvalKit's ``can_infer`` (``vlmeval/utils/matching_util.py``:
  ``can_infer_option``, then ``can_infer_text``), used by HR-Bench and MuirBench. The
  rules, in VLMEvalKit's order:

  1. a reply containing "Failed to obtain answer via API" skips the letter step;
  2. a reply containing one of VLMEvalKit's four refusal sentences is "no answer" ('Z');
  3. the characters ``.()[],:;!*#{}`` become spaces and the reply is split on whitespace;
     if exactly one option letter is among the words, that letter (VLMEvalKit's guard against
     "A" the article acts only with its VERBOSE switch on, so not here);
  4. no option letter but a word "Z": "no answer";
  5. else exactly one option text (lower-cased) inside the lower-cased reply, else nothing.

  "No answer" and nothing both return None (both score as wrong; VLMEvalKit's exact-matching
  mode records 'Z' for them). Options that are None/NaN are not choices (VLMEvalKit's
  ``build_choices``). MMBench follows lmms-eval's variant instead (:mod:`.mmbench`).
* :func:`extract_letter` -- ordered regex patterns for the RL baselines' correctness reward
  (``ltopd.train.reward``). No benchmark scorer uses it: V*Bench follows lmms-eval's own
  parser (:mod:`.vstar`).
"""

from __future__ import annotations

import math
import re

_VLM_PUNCT = ".()[],:;!*#{}"
_API_FAILURE = "Failed to obtain answer via API"
_REFUSALS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
_NO_ANSWER = object()  # VLMEvalKit's 'Z'


def extract_letter(text: str, letters: list[str]) -> str | None:
    """First option letter found by the ordered patterns, or None (the RL reward's parser).

    Order: leading letter ("B", "B.", "(B) red", "B: red"); "answer is X" / "answer: X";
    "(X)" anywhere; "X." / "X)" anywhere; a lone letter word when only one distinct letter stands
    alone; else the text's only option-letter character. Letters are upper case, except that a
    reply that is nothing but one letter ("b", "b.") is accepted in lower case. A reply opening
    with the article "A " reads as option A.
    """
    text = text.strip()
    if not text or not letters:
        return None
    cls = "[" + "".join(letters) + "]"
    bare = re.fullmatch(r"\(?([A-Za-z])\)?[.:]?", text)
    if bare and bare.group(1).upper() in letters:
        return bare.group(1).upper()
    ordered = (
        rf"^\(?({cls})\)?(?=$|[\s.:,)\]])",
        rf"(?i:answer\s*(?:is|:))\s*\(?({cls})\b",
        rf"\(({cls})\)",
        rf"\b({cls})[.)]",
    )
    for pattern in ordered:
        match = re.search(pattern, text)
        if match:
            return match.group(1)
    lone = set(re.findall(rf"\b({cls})\b", text))
    if len(lone) == 1:
        return lone.pop()
    chars = re.findall(cls, text)
    if len(chars) == 1:
        return chars[0]
    return None


def _choices(options: list) -> dict[str, str]:
    """Letter -> option text for the options that exist (None/NaN ones are skipped)."""
    out = {}
    for i, option in enumerate(options):
        if option is None or (isinstance(option, float) and math.isnan(option)):
            continue
        out[chr(ord("A") + i)] = str(option)
    return out


def _infer_option(text: str, letters: list[str]) -> object:
    """Letter, :data:`_NO_ANSWER`, or None (VLMEvalKit ``can_infer_option``)."""
    if _API_FAILURE in text:
        return None
    if any(sentence in text for sentence in _REFUSALS):
        return _NO_ANSWER
    spaced = text
    for char in _VLM_PUNCT:
        spaced = spaced.replace(char, " ")
    words = spaced.split()
    found = [letter for letter in letters if letter in words]
    if len(found) == 1:
        return found[0]
    if not found and "Z" in words:
        return _NO_ANSWER
    return None


def _infer_text(text: str, choices: dict[str, str]) -> str | None:
    """The only option whose lower-cased text is in the lower-cased reply (``can_infer_text``)."""
    lowered = text.lower()
    hits = [letter for letter, option in choices.items() if option.lower() in lowered]
    return hits[0] if len(hits) == 1 else None


def infer_choice(text: str, options: list) -> str | None:
    """VLMEvalKit ``can_infer``: one option letter, else one option text; None otherwise (the
    rule order is the module docstring's)."""
    choices = _choices(options)
    letter = _infer_option(text, list(choices))
    if letter is _NO_ANSWER:
        return None
    if letter is not None:
        return letter
    return _infer_text(text, choices)
