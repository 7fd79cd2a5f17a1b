"""MME twin: two yes/no questions per image, one answered "Yes" and one "No".

Covers 7 of the 14 official categories. Perception: existence, count, position, color, OCR.
Cognition: numerical_calculation (a rendered arithmetic problem, "a + b =", as in MME) and
code_reasoning (three rendered lines of Python, "what does it print"). Not covered: posters,
celebrity, scene, landmark, artwork (need real photographs), commonsense_reasoning and
text_translation (need world knowledge / a second language). Categories rotate with the image
index so each gets the same number of images; the Yes question comes first or second at random.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ltopd.data.world import COLORS, Scene, WorldConfig, pope_negatives, render_scene
from ltopd.data.world.palette import plural
from ltopd.data.world.tasks import TaskNotApplicable, relation, uniquely_named

from .synthetic import (
    bench_rng,
    draw,
    make_record,
    pick,
    text_block,
    text_pool,
    with_article,
    with_text,
)

NAME = "mme"
SUFFIX = " Please answer yes or no."
PHRASES = {"left": "on the left of", "right": "on the right of", "above": "above",
           "below": "below"}
OPPOSITE = {"left": "right", "right": "left", "above": "below", "below": "above"}
Pair = tuple[str, str]  # (question answered Yes, question answered No)


def _existence(scene: Scene, rng: np.random.Generator) -> Pair:
    present = pick(rng, sorted({o.name for o in scene.objects}))
    color, shape = pick(rng, pope_negatives(scene, "random"))
    return (f"Is there {with_article(present)} in this image?",
            f"Is there {with_article(f'{color} {shape}')} in this image?")


def _count(scene: Scene, rng: np.random.Generator) -> Pair:
    true = int(rng.integers(1, 5))
    by = ("color", "shape")[int(rng.integers(2))]
    values = sorted({getattr(o, by) for o in scene.objects})
    counts = {v: sum(getattr(o, by) == v for o in scene.objects) for v in values}
    value = pick(rng, [v for v in values if counts[v] == true])
    wrong = true + pick(rng, [d for d in (-2, -1, 1, 2) if true + d >= 1])

    def ask(k: int) -> str:
        label = f"{value} object" if by == "color" else value
        label = label if k == 1 else (f"{value} objects" if by == "color" else plural(value))
        return f"Is there {k} {label} in this image?" if k == 1 else \
            f"Are there {k} {label} in this image?"
    return ask(true), ask(wrong)


def _position(scene: Scene, rng: np.random.Generator) -> Pair:
    objs = uniquely_named(scene)
    pairs = [(a, b, r) for a in objs for b in objs if a is not b and (r := relation(a, b))]
    a, b, rel = pick(rng, pairs)
    return (f"Is the {a.name} {PHRASES[rel]} the {b.name}?",
            f"Is the {a.name} {PHRASES[OPPOSITE[rel]]} the {b.name}?")


def _color(scene: Scene, rng: np.random.Generator) -> Pair:
    shapes = [o.shape for o in scene.objects]
    obj = pick(rng, [o for o in scene.objects if shapes.count(o.shape) == 1])
    other = pick(rng, [c for c in COLORS if c != obj.color])
    return (f"Is the {obj.shape} in this image {obj.color}?",
            f"Is the {obj.shape} in this image {other}?")


def _ocr(scene: Scene, rng: np.random.Generator) -> Pair:
    if scene.text is None or scene.text.kind not in ("word", "sign", "number"):
        raise TaskNotApplicable
    value = dict(scene.text.fields)["text"]
    other = pick(rng, sorted(set(text_pool(value, rng)) - {value}))
    ask = 'Is the text in this image "{}"?'
    return ask.format(value.upper()), ask.format(other.upper())


def _arithmetic(rng: np.random.Generator) -> tuple[list[str], int, str]:
    op = "+-x"[int(rng.integers(3))]
    a, b = (int(v) for v in rng.integers(2, 50 if op != "x" else 13, size=2))
    if op == "-" and a < b:
        a, b = b, a
    value = {"+": a + b, "-": a - b, "x": a * b}[op]
    return [f"{a} {op} {b} ="], value, "Is the answer to the arithmetic question in the image {v}?"


def _code(rng: np.random.Generator) -> tuple[list[str], int, str]:
    a, b = (int(v) for v in rng.integers(2, 10, size=2))
    op = "+*"[int(rng.integers(2))]
    value = a + b if op == "+" else a * b
    return ([f"x = {a}", f"y = x {op} {b}", "print(y)"], value,
            "Is the output of the code in this image {v}?")


def _rendered(make: Callable[[np.random.Generator], tuple[list[str], int, str]], px_field: str):
    def build(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, Pair]:
        lines, value, template = make(rng)
        wrong = value + pick(rng, [d for d in (-3, -2, -1, 1, 2, 3, 10) if value + d >= 0])
        scene, _ = draw(rng, cfg, lambda sc, _: None, text=False)
        block = text_block(lines, getattr(cfg, px_field), "formula", {"text": "\n".join(lines)})
        scene = with_text(scene, block, rng, cfg.object_gap_px)
        return scene, (template.format(v=value), template.format(v=wrong))
    return build


def _scene_task(solve: Callable[[Scene, np.random.Generator], Pair], **scene_kwargs: object):
    def build(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, Pair]:
        return draw(rng, cfg, solve, **scene_kwargs)
    return build


def _ocr_scene(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, Pair]:
    kind = ("word", "sign", "number")[int(rng.integers(3))]
    return draw(rng, cfg, _ocr, text=True, text_kind=kind)


CATEGORIES = {
    "existence": _scene_task(_existence),
    "count": _scene_task(_count),
    "position": _scene_task(_position),
    "color": _scene_task(_color),
    "OCR": _ocr_scene,
    "numerical_calculation": _rendered(_arithmetic, "font_px"),
    "code_reasoning": _rendered(_code, "small_font_px"),
}


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    if n % 2:
        raise ValueError(f"mme: n must be even (two questions per image), got {n}")
    names = list(CATEGORIES)
    records: list[dict] = []
    for image in range(n // 2):
        category = names[image % len(names)]
        rng = bench_rng(NAME, seed, image)
        scene, (yes_q, no_q) = CATEGORIES[category](rng, cfg)
        picture = render_scene(scene)
        image_id = f"{category}/{image:06d}"
        pair = [("yes", yes_q, "Yes"), ("no", no_q, "No")]
        if rng.random() < 0.5:
            pair.reverse()
        for tag, q, answer in pair:
            records.append(make_record(
                NAME, f"{image:06d}-{tag}", [picture], q + SUFFIX, [], answer, category,
                {"template": f"mme/{category}", "category": category, "image_id": image_id,
                 "scene": scene.to_dict()}))
    return records
