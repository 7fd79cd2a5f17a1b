"""MMMU (validation): instance accuracy x 100 with the official answer parsers.

Official code followed: MMMU-Benchmark/MMMU, ``mmmu/utils/eval_utils.py`` (earlier
``eval/utils/eval_utils.py`` / ``eval/eval_utils.py``): ``parse_multi_choice_response``,
``parse_open_response``, ``extract_numbers``, ``normalize_str``, ``eval_open``.

Reads: ``answer`` (option letter for multiple choice; text for open questions -- a string that
is a Python list literal such as "['1.5', '3/2']" gives several acceptable answers, as the
official answer file lists them), ``options``, ``question_type`` ("multiple-choice" / "open"; if
absent, multiple-choice when options exist), optional ``seed`` (int, default
:data:`DEFAULT_SEED`) for the random fallback.

Multiple choice (``parse_multi_choice_response``): the characters , . ! ? ; : ' are stripped
from both ends in that order (one ``str.strip`` per character), the reply is padded with a
space on each side; candidates are the letters written "(A)"; if none, the letters written
" A " (spaces both sides); if none and the padded reply has more than five words, the options
whose lower-cased text is inside the lower-cased reply. One candidate -> it; several -> the one
whose last occurrence (``rfind`` of "(A)", " A " or the option text) starts last, the first
such candidate on a tie (``np.argmax``); none -> a random letter, as the official script does.
Deliberate deviation: the random draw uses a generator seeded by (seed, record id) instead of
the script's global ``random.seed(42)`` stream, so it does not depend on record order; such
replies are counted in ``n_unparsed`` and ``n_random_fallback`` and score whatever the random
letter scores. (lmms-eval's copy of this function also accepts "A " without a leading space
and "A."; the MMMU repository does not, and neither do we.)

Open (``parse_open_response``): the reply is stripped, its "."s stripped from both ends,
lower-cased and cut at newlines (the official split pattern's ". " + capital branch can never
fire on lower-cased text); in each line the shortest tail after a key phrase ("could be ", "so ",
"is ", "thus ", "therefore ", "final ", "answer ", "result ", and "=" on the last line) is a
candidate unless it is a lone punctuation mark (an empty tail is replaced by any later tail);
no candidate -> the whole reply. The numbers in the candidates are added: ``extract_numbers``'s
three regexes -- comma-grouped numbers with word boundaries, scientific notation, and simple
numbers, where a decimal ("3.5") needs no boundary but an integer must end at a word boundary
("12cm" gives no number; "3.5cm" gives "3.5"). ``normalize_str``: a string ``float`` accepts
(after deleting commas) becomes that number rounded to 2 places; other text is lower-cased, a
one-character text becoming the two forms " x" and "x ". ``eval_open``: a numeric candidate is
right if it equals a normalised reference number; a text candidate if a normalised text
reference is a substring of it.
"""

from __future__ import annotations

import ast
import random
import re

from .common import field, pct, prediction_text, require_records

DEFAULT_SEED = 42
_KEY_PHRASES = ("could be ", "so ", "is ", "thus ", "therefore ", "final ", "answer ", "result ")
_NUM_COMMAS = r"-?\b\d{1,3}(?:,\d{3})+\b"
_NUM_SCIENTIFIC = r"-?\d+(?:\.\d+)?[eE][+-]?\d+"
_NUM_SIMPLE = r"-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d])"


def parse_multi_choice(reply: str, options: list[str], rng: random.Random) -> tuple[str, bool]:
    """(letter, True if it was parsed) -- False means the seeded random fallback chose it."""
    letters = [chr(ord("A") + i) for i in range(len(options))]
    text = reply
    for char in ",.!?;:'":
        text = text.strip(char)
    text = f" {text} "
    bracketed = [c for c in letters if f"({c})" in text]
    spaced = [] if bracketed else [c for c in letters if f" {c} " in text]
    by_text: list[str] = []
    if not bracketed and not spaced and len(text.split()) > 5:
        by_text = [c for c, o in zip(letters, options) if str(o).lower() in text.lower()]
    if bracketed:
        cands, where = bracketed, [text.rfind(f"({c})") for c in bracketed]
    elif spaced:
        cands, where = spaced, [text.rfind(f" {c} ") for c in spaced]
    elif by_text:
        index = dict(zip(letters, options))
        cands, where = by_text, [text.lower().rfind(str(index[c]).lower()) for c in by_text]
    else:
        return rng.choice(letters), False
    return cands[where.index(max(where))], True


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def _normalize(text: str) -> list[float | str]:
    text = text.strip()
    if _is_number(text):
        return [round(float(text.replace(",", "")), 2)]
    text = text.lower()
    return [" " + text, text + " "] if len(text) == 1 else [text]


def extract_numbers(text: str) -> list[str]:
    """All comma-grouped, then scientific, then simple numbers (the official three regexes)."""
    return (re.findall(_NUM_COMMAS, text) + re.findall(_NUM_SCIENTIFIC, text)
            + re.findall(_NUM_SIMPLE, text))


def _key_candidates(reply: str) -> list[str]:
    text = reply.strip().strip(".").lower()
    # The official split pattern is r"\.\s(?=[A-Z])|\n" applied to lower-cased text, so only
    # newlines ever split.
    lines = text.split("\n")
    found: list[str] = []
    for i, line in enumerate(lines):
        phrases = _KEY_PHRASES + (("=",) if i == len(lines) - 1 else ())
        shortest = ""
        for phrase in phrases:
            if phrase in line:
                tail = line.split(phrase)[-1].strip()
                # Official quirk: an empty tail is replaced by any later one, even a longer one.
                if not shortest or len(tail) < len(shortest):
                    shortest = tail
        if shortest and shortest not in (":", ",", ".", "!", "?", ";", "'"):
            found.append(shortest)
    return found or [text]


def parse_open(reply: str) -> list[float | str]:
    """Candidate answers of an open reply, normalised (floats rounded to 2 places, or text)."""
    keys = _key_candidates(reply)
    raw = keys + [n for key in keys for n in extract_numbers(key)]
    out: list[float | str] = []
    for item in raw:
        for norm in _normalize(item):
            if norm not in out:
                out.append(norm)
    return out


def open_correct(references: list[str], candidates: list[float | str]) -> bool:
    refs = [norm for ref in references for norm in _normalize(str(ref))]
    for cand in candidates:
        if isinstance(cand, str):
            if any(isinstance(ref, str) and ref in cand for ref in refs):
                return True
        elif cand in refs:
            return True
    return False


def _references(answer: object) -> list[str]:
    text = str(answer).strip()
    if text.startswith("["):
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return [text]
        if isinstance(parsed, list):
            return [str(x) for x in parsed]
    return [text]


def score_mmmu(records: list[dict]) -> dict:
    require_records("mmmu", records)
    correct: list[bool] = []
    unparsed = fallback = 0
    for record in records:
        reply = prediction_text(record)
        options = list(record.get("options") or [])
        kind = str(field(record, "question_type", "multiple-choice" if options else "open"))
        if kind == "multiple-choice":
            if not options:
                raise ValueError(f"record {record.get('id')!r}: multiple-choice without options")
            rng = random.Random(f"{field(record, 'seed', DEFAULT_SEED)}:{record.get('id')}")
            letter, parsed = parse_multi_choice(reply, options, rng)
            fallback += not parsed
            unparsed += not parsed
            correct.append(letter == str(record["answer"]).strip().upper())
        elif kind == "open":
            if not reply:
                unparsed += 1
                correct.append(False)
                continue
            correct.append(open_correct(_references(record["answer"]), parse_open(reply)))
        else:
            raise ValueError(f"record {record.get('id')!r}: unknown MMMU question_type {kind!r}")
    return {
        "score": pct(sum(correct), len(records)),
        "n": len(records),
        "n_unparsed": unparsed,
        "n_random_fallback": fallback,
    }
