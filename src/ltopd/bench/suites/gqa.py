"""GQA twin: short open answers about colour, shape, existence and position (normalised exact
match). Question types are drawn uniformly; answers within a type are drawn uniformly first
(yes/no, left/right) or follow the world's symmetric sampler (colours, shapes)."""

from __future__ import annotations

import numpy as np

from ltopd.data.world import TASKS, Obj, Scene, WorldConfig, render_scene
from ltopd.data.world.tasks import relation, uniquely_named

from .synthetic import bench_rng, draw, make_record, pick

NAME = "gqa"
SIDES = ("left", "right")


def _world_task(task: str):
    def ask(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, str, str, str]:
        scene, (q, _, answer, _, meta) = draw(rng, cfg, lambda sc, trng: TASKS[task](sc, trng))
        return scene, q, answer, meta["template"]
    return ask


def _relation(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, str, str, str]:
    def build(scene: Scene, trng: np.random.Generator) -> tuple[Obj, Obj, str]:
        side = SIDES[int(trng.integers(2))]
        objs = uniquely_named(scene)
        return pick(trng, [(a, b, side) for a in objs for b in objs
                           if a is not b and relation(a, b) == side])

    scene, (a, b, side) = draw(rng, cfg, build)
    return scene, f"Is the {a.name} to the left or to the right of the {b.name}?", side, "gqa/rel"


def _image_side(rng: np.random.Generator, cfg: WorldConfig) -> tuple[Scene, str, str, str]:
    def build(scene: Scene, trng: np.random.Generator) -> tuple[Obj, str]:
        side = SIDES[int(trng.integers(2))]
        s = scene.image_size
        objs = [o for o in uniquely_named(scene)
                if (o.bbox[2] <= s // 3 if side == "left" else o.bbox[0] >= s - s // 3)]
        return pick(trng, objs), side

    scene, (obj, side) = draw(rng, cfg, build)
    return scene, f"On which side of the image is the {obj.name}?", side, "gqa/side"


QUESTION_TYPES = {
    "color": _world_task("color"),
    "shape": _world_task("shape"),
    "exists": _world_task("exists"),
    "relation": _relation,
    "side": _image_side,
}


def item(index: int, seed: int, cfg: WorldConfig) -> dict:
    rng = bench_rng(NAME, seed, index)
    kinds = list(QUESTION_TYPES)
    kind = kinds[int(rng.integers(len(kinds)))]
    scene, q, answer, template = QUESTION_TYPES[kind](rng, cfg)
    return make_record(NAME, f"{index:06d}", [render_scene(scene)], q, [], answer, kind,
                       {"template": template, "index": index, "scene": scene.to_dict()})


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    return [item(i, seed, cfg) for i in range(n)]
