"""HR-Bench 4K twin: by default a canvas twice the configured size (objects keep their pixel size,
so they are small relative to it) with up to twice as many objects (``large_canvas``, the
catalog's default canvas of the benchmark; a profile's ``world.canvas`` sets it instead); 4
options per question.

cycle_category ``single`` (fine-grained single-instance perception: colour or shape of the tiny
object) and ``cross`` (cross-instance perception: where one object lies relative to another),
alternating by index so both categories weigh equally in the macro mean.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ltopd.data.world import COLORS, SHAPES, Obj, Scene, WorldConfig, render_scene
from ltopd.data.world.tasks import POSITIONS, relation, uniquely_named

from .synthetic import bench_rng, choice_options, draw, make_record, pick
from .vstar import tiny_object

NAME = "hrbench4k"
MAX_CANVAS = 2048


def large_canvas(cfg: WorldConfig) -> WorldConfig:
    return replace(cfg, image_size=min(MAX_CANVAS, 2 * cfg.image_size),
                   max_objects=min(30, 2 * cfg.max_objects))


def _single(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, str, list[str], str, str]:
    scene, tiny = draw(rng, cfg, lambda sc, _: tiny_object(sc), small_target=True)
    if rng.random() < 0.5:
        options, answer = choice_options(tiny.color, list(COLORS), rng)
        return scene, f"What is the color of the tiny {tiny.shape}?", options, answer, "hr/color"
    options, answer = choice_options(tiny.shape, list(SHAPES), rng)
    return scene, f"What is the shape of the tiny {tiny.color} object?", options, answer, "hr/shape"


def _cross(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, str, list[str], str, str]:
    def build(scene: Scene, trng: np.random.Generator) -> tuple[Obj, Obj, str]:
        rel = POSITIONS[int(trng.integers(len(POSITIONS)))]
        objs = uniquely_named(scene)
        return pick(trng, [(a, b, rel) for a in objs for b in objs
                           if a is not b and relation(a, b) == rel])

    scene, (a, b, rel) = draw(rng, cfg, build)
    options, answer = choice_options(rel, list(POSITIONS), rng)
    q = f"Where is the {a.name} relative to the {b.name}?"
    return scene, q, options, answer, "hr/relative"


def item(index: int, seed: int, cfg: WorldConfig) -> dict:
    rng = bench_rng(NAME, seed, index)
    category = ("single", "cross")[index % 2]
    scene, q, options, answer, template = (_single if category == "single" else _cross)(rng, cfg)
    return make_record(NAME, f"{index:06d}", [render_scene(scene)], q, options, answer, category,
                       {"template": template, "cycle_category": category,
                        "category": {"single": "FSP", "cross": "FCP"}[category],
                        "index": index, "scene": scene.to_dict()})


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    return [item(i, seed, cfg) for i in range(n)]
