"""The four LT-14K source styles: which tasks each asks, how it phrases them, how it answers.

- onethinker: reasoning; a short chain naming the evidence, then "So the answer is X."
- pixmo: counting with normalised points, pointing, detailed description.
- llava: conversational VQA with short natural answers.
- vision_opd: fine-grained questions about small targets and small text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .palette import plural
from .tasks import LETTERS

Responder = Callable[[str, list[str], str, dict], str]


@dataclass(frozen=True)
class Style:
    name: str
    tasks: dict[str, float]  # task -> sampling weight
    mc_prob: float  # chance that an open question with a closed answer set becomes multiple choice
    wrappers: tuple[str, ...]  # question phrasings around the task's question "{q}"
    respond: Responder  # (task, options, answer, meta) -> reference response
    questions: dict[str, str] = field(default_factory=dict)  # template -> replacement question
    scene_kwargs: dict[str, object] = field(default_factory=dict)

    def pick_task(self, rng: np.random.Generator) -> str:
        names = list(self.tasks)
        w = np.array([self.tasks[n] for n in names], dtype=float)
        return names[int(rng.choice(len(names), p=w / w.sum()))]


def _phrase(ev: dict) -> str:
    where = "in the center" if ev["region"] == "center" else f"at the {ev['region']}"
    return f"a {ev['size']} {ev['name']} {where}"


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _count_label(meta: dict, n: int = 2) -> str:
    s = meta["slots"]
    if "color" in s:
        return f"{s['color']} object" + ("" if n == 1 else "s")
    return s["shape"] if n == 1 else plural(s["shape"])


def _final(options: list[str], answer: str) -> str:
    """The answer as spoken: "B. red circle" for multiple choice, else the answer itself."""
    return f"{answer}. {options[LETTERS.index(answer)]}" if options else answer


def _chain(task: str, options: list[str], answer: str, meta: dict) -> str:
    ev, slots = meta["evidence"], meta["slots"]
    if task == "count":
        n = len(ev)
        seen = (f"I count {n} {_count_label(meta, n)}: {_join([_phrase(e) for e in ev])}." if n
                else f"I find no {_count_label(meta)} in the image.")
    elif task == "exists" and not ev:
        seen = f"I look for a {slots['color']} {slots['shape']} but find none."
    elif task == "read":
        seen = f"The {meta['text_kind']} text reads \"{ev[0]['text'].upper()}\"."
    elif task == "small_detail":
        seen = f"The smallest object is {_phrase(ev[0])}."
    else:
        seen = f"I see {_join([_phrase(e) for e in ev])}."
    return f"{seen} So the answer is {answer}."


def _pixmo(task: str, options: list[str], answer: str, meta: dict) -> str:
    ev = meta["evidence"]
    if task == "count":
        if not ev:
            return f"There are no {_count_label(meta)}. Total: 0."
        pts = "; ".join(f"({e['point'][0]:.2f}, {e['point'][1]:.2f})" for e in ev)
        return f"Counting the {_count_label(meta)}: {pts}. Total: {len(ev)}."
    if task == "point":
        return f"The {meta['slots']['name']} is at {answer}."
    if task == "describe":
        return (f"The image shows {len(ev)} object{'s' if len(ev) != 1 else ''}: "
                f"{_join([_phrase(e) for e in ev])}. In short: {answer}.")
    return _final(options, answer)


def _llava(task: str, options: list[str], answer: str, meta: dict) -> str:
    s = meta["slots"]
    if options:
        return _final(options, answer)
    if task == "color":
        return f"The {s['shape']} is {answer}."
    if task == "shape":
        return f"The {s['color']} object is a {answer}."
    if task == "count":
        n = int(answer)
        return f"There {'is' if n == 1 else 'are'} {n} {_count_label(meta, n)}."
    if task == "exists":
        obj = f"{s['color']} {s['shape']}"
        return f"Yes, there is a {obj}." if answer == "yes" else f"No, there is no {obj}."
    if task == "position":
        rel = f"to the {answer} of" if answer in ("left", "right") else answer
        return f"The {s['a']} is {rel} the {s['b']}."
    if task == "where":
        return f"It is in the {answer} part of the image."
    if task == "read":
        return f"It says \"{answer}\"."
    if task == "small_detail":
        return f"The smallest object is {answer}."
    if task == "describe":
        return f"I can see {answer}."
    return answer


def _vision_opd(task: str, options: list[str], answer: str, meta: dict) -> str:
    ev = meta["evidence"]
    if task == "read":
        look = f"Zooming in on the {meta['text_kind']}, it reads \"{ev[0]['text'].upper()}\"."
    elif ev and "region" in ev[0]:
        e = ev[0]
        look = f"Looking closely at the {e['region']}, I see a {e['size']} {e['name']}."
    else:
        look = "Looking closely over the whole image."
    return f"{look} The answer is {_final(options, answer)}."


STYLES: dict[str, Style] = {
    "onethinker": Style(
        "onethinker",
        {"color": 0.12, "shape": 0.12, "count": 0.14, "position": 0.14, "size": 0.12,
         "where": 0.12, "exists": 0.08, "small_detail": 0.08, "read": 0.08},
        mc_prob=0.7,
        wrappers=("{q}", "{q} Think it through, then answer.", "Look at the image carefully. {q}"),
        respond=_chain),
    "pixmo": Style(
        "pixmo", {"count": 0.45, "point": 0.3, "describe": 0.25},
        mc_prob=0.0,
        wrappers=("{q}", "{q} Be precise."),
        respond=_pixmo,
        questions={"describe/list": "Describe the image in detail, listing every object.",
                   "point/name": "Point to the {name} (normalised x, y)."}),
    "llava": Style(
        "llava",
        {"color": 0.12, "shape": 0.1, "exists": 0.16, "position": 0.12, "size": 0.1,
         "count": 0.1, "read": 0.12, "describe": 0.08, "where": 0.1},
        mc_prob=0.2,
        wrappers=("{q}", "{q} Answer briefly.", "Looking at the picture: {q}"),
        respond=_llava),
    "vision_opd": Style(
        "vision_opd", {"small_detail": 0.45, "read": 0.4, "where": 0.15},
        mc_prob=0.3,
        wrappers=("{q}", "Inspect the fine details. {q}"),
        respond=_vision_opd,
        scene_kwargs={"small_target": True, "small_text": True}),
}
