"""TextVQA twin: reading questions with ten annotator answers.

The ten answers mimic annotator variation: most are the text itself in varied case, with an
article or a trailing period (all equal after EvalAI normalisation), and 0-3 are wrong or
partial (a misread letter or digit, a truncated value, "unanswerable"). At least seven answers
normalise to the reference, so the reference scores 1.0 and a one-off misreading scores 0.
"""

from __future__ import annotations

import numpy as np

from ltopd.data.world import TASKS, WorldConfig, render_scene

from .synthetic import bench_rng, draw, make_record, pick

NAME = "textvqa"
N_ANSWERS = 10
WRONG_COUNTS = (0, 1, 1, 2, 2, 3)  # how many of the ten answers are off


def _same(value: str, rng: np.random.Generator) -> str:
    forms = [value, value, value.upper(), value.capitalize(), value + "."]
    if not value[0].isdigit():
        forms.append(f"the {value}")
    return pick(rng, forms)


def _off(value: str, rng: np.random.Generator) -> str:
    """A wrong or partial answer that never normalises to ``value``."""
    kind = pick(rng, ("misread", "partial", "unanswerable"))
    i = int(rng.integers(len(value)))
    if kind == "unanswerable":
        return "unanswerable"
    if (kind == "partial" or value[i] == "-") and "-" in value:
        return value.split("-")[0]
    if kind == "partial" and len(value) > 2:
        return value[: len(value) // 2 + 1]
    alphabet = "0123456789" if value[i].isdigit() else "abcdefghijklmnopqrstuvwxyz"
    return value[:i] + pick(rng, [c for c in alphabet if c != value[i]]) + value[i + 1:]


def ten_answers(value: str, rng: np.random.Generator) -> list[str]:
    wrong = int(pick(rng, WRONG_COUNTS))
    answers = [_same(value, rng) for _ in range(N_ANSWERS - wrong)]
    answers += [_off(value, rng) for _ in range(wrong)]
    return [answers[int(i)] for i in rng.permutation(N_ANSWERS)]


def item(index: int, seed: int, cfg: WorldConfig) -> dict:
    rng = bench_rng(NAME, seed, index)
    scene, (q, _, value, _, meta) = draw(rng, cfg, lambda sc, trng: TASKS["read"](sc, trng),
                                         text=True)
    answers = ten_answers(value, rng)
    return make_record(NAME, f"{index:06d}", [render_scene(scene)], q, [], value, "read",
                       {"template": meta["template"], "answers": answers, "index": index,
                        "scene": scene.to_dict()})


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    return [item(i, seed, cfg) for i in range(n)]
