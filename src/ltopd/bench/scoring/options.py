"""Option-letter extraction: the two parsing rules the multiple-choice scorers share.

* :func:`extract_letter` -- ordered regex patterns (V*Bench, lmms-eval style).
* :func:`infer_choice` -- exactly one option letter, else exactly one option text
  (VLMEvalKit ``can_infer``: MMBench, HR-Bench, MuirBench, MVBench).
"""

from __future__ import annotations

import re

_MMB_PUNCT = ".()[],:;!*#{}"


def extract_letter(text: str, letters: list[str]) -> str | None:
    """First option letter found by the ordered patterns, or None.

    Order: leading letter ("B", "B.", "(B) red", "B: red"); "answer is X" / "answer: X";
    "(X)" anywhere; "X." / "X)" anywhere; a lone letter word when only one distinct letter stands
    alone; else the text's only option-letter character. Letters are upper case, except that a
    reply that is nothing but one letter ("b", "b.") is accepted in lower case. As with the
    official patterns, a reply opening with the article "A " reads as option A.
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


def infer_choice(text: str, options: list[str]) -> str | None:
    """Exactly one option letter among the words, else exactly one option text inside; or None.

    Words are split on whitespace after VLMEvalKit's punctuation ``.()[],:;!*#{}`` becomes
    spaces; letters count only up to the number of options. Texts match case-insensitively as
    substrings of the reply.
    """
    letters = [chr(ord("A") + i) for i in range(len(options))]
    spaced = text
    for char in _MMB_PUNCT:
        spaced = spaced.replace(char, " ")
    words = set(spaced.split())
    found = [letter for letter in letters if letter in words]
    if len(found) == 1:
        return found[0]
    lowered = text.lower()
    by_text = [
        letter
        for letter, option in zip(letters, options)
        if str(option).strip() and str(option).lower() in lowered
    ]
    if len(by_text) == 1:
        return by_text[0]
    return None
