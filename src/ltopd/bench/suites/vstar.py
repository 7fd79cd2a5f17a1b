"""V*Bench twin: small targets in large, cluttered scenes.

As in V*Bench, two tasks: ``direct_attributes`` (the colour of the one tiny object, 4 options)
and ``relative_position`` (is the tiny object left or right of another object, 2 options, as in
the real benchmark). About 60% direct attributes (115 of 191 in V*Bench).
"""

from __future__ import annotations

import numpy as np

from ltopd.data.world import COLORS, Obj, Scene, TaskNotApplicable, WorldConfig, render_scene
from ltopd.data.world.palette import TINY
from ltopd.data.world.tasks import relation, uniquely_named

from .synthetic import bench_rng, choice_options, draw, make_record, pick

NAME = "vstar"
DIRECT_SHARE = 0.6


def tiny_object(scene: Scene) -> Obj:
    """The scene's one tiny target (sample_scene places at most one)."""
    tiny = [o for o in scene.objects if o.size_class == TINY]
    if not tiny:
        raise TaskNotApplicable
    return tiny[0]


Built = tuple[Scene, str, list[str], str, dict]  # scene, question, options, answer, meta


def _direct(rng: np.random.Generator, cfg: WorldConfig) -> Built:
    scene, tiny = draw(rng, cfg, lambda sc, _: tiny_object(sc), small_target=True)
    options, answer = choice_options(tiny.color, list(COLORS), rng)
    q = f"What is the color of the tiny {tiny.shape}?"
    return scene, q, options, answer, {"template": "vstar/color", "target": tiny.name}


def _relative(rng: np.random.Generator, cfg: WorldConfig) -> Built:
    def build(scene: Scene, trng: np.random.Generator) -> tuple[Obj, Obj, str]:
        side = ("left", "right")[int(trng.integers(2))]
        tiny = tiny_object(scene)
        others = [o for o in uniquely_named(scene) if o is not tiny and relation(tiny, o) == side]
        return tiny, pick(trng, others), side

    scene, (tiny, other, side) = draw(rng, cfg, build, small_target=True)
    options, answer = choice_options(side, ["left", "right"], rng, k=2)
    q = f"Is the tiny {tiny.name} on the left or right side of the {other.name}?"
    return scene, q, options, answer, {"template": "vstar/side", "target": tiny.name,
                                       "reference": other.name}


def item(index: int, seed: int, cfg: WorldConfig) -> dict:
    rng = bench_rng(NAME, seed, index)
    direct = rng.random() < DIRECT_SHARE
    scene, q, options, answer, meta = (_direct if direct else _relative)(rng, cfg)
    task = "direct_attributes" if direct else "relative_position"
    return make_record(NAME, f"{index:06d}", [render_scene(scene)], q, options, answer, task,
                       {**meta, "index": index, "scene": scene.to_dict()})


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    return [item(i, seed, cfg) for i in range(n)]
