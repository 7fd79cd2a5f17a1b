"""Multi-image twins: MuirBench (2-4 images per question) and MVBench (a short "video" of 3-4
frames). All multiple choice with the answer at a uniformly random letter.

MuirBench tasks: ``image_text_matching`` (which image shows a named object: it is in exactly one
image), ``counting`` (objects of a kind over all images), ``difference_spotting`` (which object
of the first image is missing from the second).
MVBench tasks: ``moving_direction`` (one object moves in a straight line across the frames,
the others stay) and ``appearance_order`` (objects appear one per frame; in which order).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import permutations

import numpy as np

from ltopd.data.world import Obj, Scene, TaskNotApplicable, WorldConfig, render_scene
from ltopd.data.world.palette import plural
from ltopd.data.world.tasks import uniquely_named

from .synthetic import (
    bench_rng,
    choice_options,
    draw,
    letter,
    make_record,
    moved,
    numeric_options,
    pick,
    with_article,
)

Question = tuple[list, str, list[str], str, dict]  # images, question, options, answer, meta
ORDINALS = ("first", "second", "third", "fourth")


# ------------------------------------------------------------------ MuirBench

def _matching(rng: np.random.Generator, cfg: WorldConfig) -> Question:
    k = int(rng.integers(2, 5))
    slot = int(rng.integers(k))
    target_scene, obj = draw(rng, cfg, lambda sc, trng: pick(trng, list(sc.objects)))
    scenes = []
    for i in range(k):
        if i == slot:
            scenes.append(target_scene)
            continue
        def without(sc: Scene, _: np.random.Generator) -> None:
            if any(o.name == obj.name for o in sc.objects):
                raise TaskNotApplicable
        scenes.append(draw(rng, cfg, without)[0])
    options = [f"Image {i + 1}" for i in range(k)]
    q = f"Which image shows {with_article(obj.name)}?"
    return [render_scene(s) for s in scenes], q, options, letter(slot), \
        {"template": "muir/matching", "target": obj.name, "scenes": [s.to_dict() for s in scenes]}


def _counting(rng: np.random.Generator, cfg: WorldConfig) -> Question:
    k = int(rng.integers(2, 4))
    scenes = [draw(rng, cfg, lambda sc, _: None)[0] for _ in range(k)]
    shape = pick(rng, sorted({o.shape for s in scenes for o in s.objects}))
    total = sum(o.shape == shape for s in scenes for o in s.objects)
    options, answer = numeric_options(total, rng)
    q = f"How many {plural(shape)} are there in all {k} images together?"
    return [render_scene(s) for s in scenes], q, options, answer, \
        {"template": "muir/counting", "shape": shape, "scenes": [s.to_dict() for s in scenes]}


def _difference(rng: np.random.Generator, cfg: WorldConfig) -> Question:
    def build(scene: Scene, trng: np.random.Generator) -> Obj:
        objs = uniquely_named(scene)
        if len(objs) < 3:
            raise TaskNotApplicable
        return pick(trng, objs)
    scene, gone = draw(rng, cfg, build)
    after = replace(scene, objects=tuple(o for o in scene.objects if o is not gone))
    names = [o.name for o in uniquely_named(scene)]
    options, answer = choice_options(gone.name, names, rng)
    q = "Which object is in the first image but missing from the second image?"
    return [render_scene(scene), render_scene(after)], q, options, answer, \
        {"template": "muir/difference", "removed": gone.name}


MUIR_TASKS = {"image_text_matching": _matching, "counting": _counting,
              "difference_spotting": _difference}


# ------------------------------------------------------------------ MVBench

DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}


def _path_clear(scene: Scene, obj: Obj, dx: int, dy: int, frames: int) -> Scene:
    """The scene with objects crossing ``obj``'s swept box removed (so it never hides)."""
    end = moved(obj, dx * (frames - 1), dy * (frames - 1))
    x0, y0 = min(obj.bbox[0], end.bbox[0]), min(obj.bbox[1], end.bbox[1])
    x1, y1 = max(obj.bbox[2], end.bbox[2]), max(obj.bbox[3], end.bbox[3])
    s = scene.image_size
    if x0 < 0 or y0 < 0 or x1 > s or y1 > s:
        raise TaskNotApplicable
    keep = tuple(o for o in scene.objects if o is obj or o.bbox[2] <= x0 or x1 <= o.bbox[0]
                 or o.bbox[3] <= y0 or y1 <= o.bbox[1])
    return replace(scene, objects=keep)


def _direction(rng: np.random.Generator, cfg: WorldConfig) -> Question:
    frames = int(rng.integers(3, 5))
    step = max(2, cfg.image_size // 10)

    def build(scene: Scene, trng: np.random.Generator) -> tuple[Scene, Obj, str]:
        way = list(DIRECTIONS)[int(trng.integers(len(DIRECTIONS)))]
        obj = pick(trng, uniquely_named(scene))
        dx, dy = (step * v for v in DIRECTIONS[way])
        return _path_clear(scene, obj, dx, dy, frames), obj, way

    _, (scene, obj, way) = draw(rng, cfg, build, text=False)
    dx, dy = (step * v for v in DIRECTIONS[way])
    images = []
    for f in range(frames):
        now = tuple(moved(o, dx * f, dy * f) if o is obj else o for o in scene.objects)
        images.append(render_scene(replace(scene, objects=now)))
    options, answer = choice_options(way, list(DIRECTIONS), rng)
    q = (f"The images are frames of a video in time order. In which direction does the "
         f"{obj.name} move?")
    track = [[obj.cx + dx * f, obj.cy + dy * f] for f in range(frames)]
    return images, q, options, answer, {"template": "mv/direction", "object": obj.name,
                                        "color": obj.color, "track": track}


def _order(rng: np.random.Generator, cfg: WorldConfig) -> Question:
    def build(scene: Scene, trng: np.random.Generator) -> list[Obj]:
        objs = uniquely_named(scene)
        if len(objs) < 3:
            raise TaskNotApplicable
        return [objs[int(i)] for i in trng.choice(len(objs), 3, replace=False)]

    scene, seq = draw(rng, cfg, build, text=False)
    rest = tuple(o for o in scene.objects if o not in seq)
    images = [render_scene(replace(scene, objects=rest + tuple(seq[: f + 1]))) for f in range(3)]
    orders = [", then ".join(o.name for o in p) for p in permutations(seq)]
    options, answer = choice_options(orders[0], orders, rng)
    named = sorted(o.name for o in seq)  # alphabetical, so the question does not leak the order
    q = ("The images are frames of a video in time order. In which order do the "
         f"{named[0]}, the {named[1]} and the {named[2]} appear?")
    return images, q, options, answer, {"template": "mv/order",
                                        "order": [o.name for o in seq]}


MV_TASKS = {"moving_direction": _direction, "appearance_order": _order}


def _suite(name: str, tasks: dict):
    def item(index: int, seed: int, cfg: WorldConfig) -> dict:
        rng = bench_rng(name, seed, index)
        task = list(tasks)[index % len(tasks)]
        images, q, options, answer, meta = tasks[task](rng, cfg)
        return make_record(name, f"{index:06d}", images, q, options, answer, task,
                           {**meta, "index": index, "n_images": len(images)})

    def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
        return [item(i, seed, cfg) for i in range(n)]
    return synthetic


muirbench = _suite("muirbench", MUIR_TASKS)
mvbench = _suite("mvbench", MV_TASKS)
