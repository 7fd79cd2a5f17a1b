"""Question tasks over a scene: TASKS maps a name to fn(scene, rng) -> TaskOutput.

Design rules that keep questions image-dependent:
- the question never names the answer, and the attribute it names is sampled independently of
  the answer (the sampler is symmetric in colours, shapes and positions);
- answers whose natural distribution is skewed (counts, yes/no) are drawn uniformly first and
  the scene is rejected (TaskNotApplicable) when it cannot realise them;
- multiple-choice answers put the correct option at a uniformly random letter.
A task that cannot be asked about a scene raises TaskNotApplicable; the generator resamples.

meta carries: template (question template key), slots (for restyling), evidence (objects the
answer rests on), choices (closed answer set, or None), plus task-specific fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from .palette import COLORS, SHAPES, plural
from .scene import Obj, Scene

TaskOutput = tuple[str, list[str], str, str, dict]
TaskFn = Callable[[Scene, np.random.Generator], TaskOutput]

LETTERS = "ABCDEFGH"
COUNT_MAX = 5  # count answers are uniform over 0..COUNT_MAX
QUADRANTS = ("top left", "top right", "bottom left", "bottom right")
POPE_SPLITS = ("random", "popular", "adversarial")


class TaskNotApplicable(Exception):
    """The scene cannot support this task's sampled question; sample another scene."""


def _pick(rng: np.random.Generator, seq: list | tuple):
    if not seq:
        raise TaskNotApplicable
    return seq[int(rng.integers(len(seq)))]


def region(obj: Obj, size: int) -> str:
    """Coarse 3x3 location word of an object's centre ("top left", "center", "bottom", ...)."""
    col = ("left", "", "right")[min(2, obj.cx * 3 // size)]
    row = ("top", "", "bottom")[min(2, obj.cy * 3 // size)]
    return " ".join(w for w in (row, col) if w) or "center"


def norm_point(obj: Obj, size: int) -> tuple[float, float]:
    return (round(obj.cx / size, 2), round(obj.cy / size, 2))


def evidence(objs: list[Obj] | tuple[Obj, ...], size: int) -> list[dict]:
    return [{"name": o.name, "size": o.size_class, "region": region(o, size),
             "point": list(norm_point(o, size)), "bbox": list(o.bbox)} for o in objs]


def uniquely_named(scene: Scene) -> list[Obj]:
    """Objects whose "colour shape" name occurs once, so "the red star" is unambiguous."""
    counts = Counter(o.name for o in scene.objects)
    return [o for o in scene.objects if counts[o.name] == 1]


def _meta(template: str, slots: dict, ev: list[dict], choices: list[str] | None,
          **extra: object) -> dict:
    return {"template": template, "slots": slots, "evidence": ev, "choices": choices, **extra}


def task_color(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    shape_counts = Counter(o.shape for o in scene.objects)
    obj = _pick(rng, [o for o in scene.objects if shape_counts[o.shape] == 1])
    q = f"What color is the {obj.shape}?"
    return q, [], obj.color, obj.color, _meta(
        "color/of-shape", {"shape": obj.shape}, evidence([obj], scene.image_size), list(COLORS))


def task_shape(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    color_counts = Counter(o.color for o in scene.objects)
    obj = _pick(rng, [o for o in scene.objects if color_counts[o.color] == 1])
    q = f"What shape is the {obj.color} object?"
    return q, [], obj.shape, obj.shape, _meta(
        "shape/of-color", {"color": obj.color}, evidence([obj], scene.image_size), list(SHAPES))


def task_count(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    target = int(rng.integers(COUNT_MAX + 1))
    by = ("color", "shape")[int(rng.integers(2))]
    pool = list(COLORS) if by == "color" else list(SHAPES)
    counts = Counter(getattr(o, by) for o in scene.objects)
    value = _pick(rng, [v for v in pool if counts[v] == target])
    matched = [o for o in scene.objects if getattr(o, by) == value]
    q = (f"How many {value} objects are there?" if by == "color"
         else f"How many {plural(value)} are there?")
    choices = [str(k) for k in range(COUNT_MAX + 1)]
    return q, [], str(target), str(target), _meta(
        f"count/by-{by}", {by: value}, evidence(matched, scene.image_size), choices, by=by)


def pope_negatives(scene: Scene, split: str) -> list[tuple[str, str]]:
    """Absent (colour, shape) pairs chosen like POPE's negative splits.

    random: any absent pair; popular: absent pairs using the scene's most frequent colour or
    shape; adversarial: absent pairs whose colour and shape both occur, on different objects.
    """
    present = {(o.color, o.shape) for o in scene.objects}
    absent = [(c, s) for c in COLORS for s in SHAPES if (c, s) not in present]
    if split == "random":
        return absent
    colors = Counter(o.color for o in scene.objects)
    shapes = Counter(o.shape for o in scene.objects)
    if split == "popular":
        top_c = {c for c, n in colors.items() if n == max(colors.values())}
        top_s = {s for s, n in shapes.items() if n == max(shapes.values())}
        return [(c, s) for c, s in absent if c in top_c or s in top_s]
    if split == "adversarial":
        return [(c, s) for c, s in absent if c in colors and s in shapes]
    raise ValueError(f"unknown POPE split {split!r}; expected one of {POPE_SPLITS}")


def task_exists(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    split = POPE_SPLITS[int(rng.integers(len(POPE_SPLITS)))]
    if rng.random() < 0.5:
        obj = _pick(rng, list(scene.objects))
        color, shape, answer = obj.color, obj.shape, "yes"
        ev = evidence([o for o in scene.objects if o.name == obj.name], scene.image_size)
    else:
        color, shape = _pick(rng, pope_negatives(scene, split))
        answer, ev = "no", []
    q = f"Is there {'an' if color[0] in 'aeiou' else 'a'} {color} {shape} in the image?"
    return q, [], answer, answer, _meta(
        "exists/color-shape", {"color": color, "shape": shape}, ev, ["yes", "no"],
        pope_split=split)


POSITIONS = ("left", "right", "above", "below")


def relation(a: Obj, b: Obj) -> str | None:
    """Where a lies relative to b, when one axis clearly dominates: the boxes are disjoint
    along it and the centre offset along it is at least twice that along the other axis."""
    dx, dy = a.cx - b.cx, a.cy - b.cy
    if abs(dx) >= 2 * abs(dy) and (a.bbox[2] <= b.bbox[0] or b.bbox[2] <= a.bbox[0]):
        return "left" if dx < 0 else "right"
    if abs(dy) >= 2 * abs(dx) and (a.bbox[3] <= b.bbox[1] or b.bbox[3] <= a.bbox[1]):
        return "above" if dy < 0 else "below"
    return None


def task_position(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    answer = POSITIONS[int(rng.integers(len(POSITIONS)))]
    objs = uniquely_named(scene)
    pairs = [(a, b) for a in objs for b in objs if a is not b and relation(a, b) == answer]
    a, b = _pick(rng, pairs)
    q = f"Is the {a.name} to the left of, to the right of, above or below the {b.name}?"
    return q, [], answer, answer, _meta(
        "position/relative", {"a": a.name, "b": b.name}, evidence([a, b], scene.image_size),
        list(POSITIONS))


def task_size(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    k = int(rng.integers(3, 5))
    objs = uniquely_named(scene)
    if len(objs) < k:
        raise TaskNotApplicable
    chosen = [objs[int(i)] for i in rng.choice(len(objs), size=k, replace=False)]
    chosen.sort(key=lambda o: -o.size_px)
    if chosen[0].size_px < 1.3 * chosen[1].size_px:  # the largest must be clearly largest
        raise TaskNotApplicable
    others = [chosen[int(i)] for i in rng.permutation(np.arange(1, k))]
    slot = int(rng.integers(k))
    order = others[:slot] + [chosen[0]] + others[slot:]
    options = [o.name for o in order]
    q = "Which of these objects is the largest?"
    return q, options, LETTERS[slot], LETTERS[slot], _meta(
        f"size/largest-of-{k}", {}, evidence(order, scene.image_size), None,
        largest=chosen[0].name)


def task_where(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    half = scene.image_size / 2
    quads = {q: [] for q in QUADRANTS}
    for o in uniquely_named(scene):
        x0, y0, x1, y1 = o.bbox
        if (x1 <= half or x0 >= half) and (y1 <= half or y0 >= half):  # wholly in one quadrant
            row, col = ("top" if y1 <= half else "bottom"), ("left" if x1 <= half else "right")
            quads[f"{row} {col}"].append(o)
    answer = QUADRANTS[int(rng.integers(4))]
    obj = _pick(rng, quads[answer])
    q = f"In which part of the image is the {obj.name}?"
    return q, [], answer, answer, _meta(
        "where/quadrant", {"name": obj.name}, evidence([obj], scene.image_size), list(QUADRANTS))


def task_point(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    obj = _pick(rng, uniquely_named(scene))
    x, y = norm_point(obj, scene.image_size)
    answer = f"({x:.2f}, {y:.2f})"
    s = scene.image_size
    box = [round(v / s, 3) for v in obj.bbox]
    return f"Point to the {obj.name}.", [], answer, answer, _meta(
        "point/name", {"name": obj.name}, evidence([obj], s), None, bbox_norm=box)


READ_QUESTIONS = {
    "word": "What word is written in the image?",
    "number": "What number is written in the image?",
    "date": "What date is written in the image?",
    "sign": "What does the sign say?",
}


def task_read(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    block = scene.text
    if block is None:
        raise TaskNotApplicable
    key, value = _pick(rng, list(block.fields))
    if block.kind == "document":
        q, template = f"What is the {key} on the document?", "read/document"
    elif block.kind == "table":
        q, template = f"In the table, what is the quantity of {key.split(':')[1]}?", "read/table"
    else:
        q, template = READ_QUESTIONS[block.kind], f"read/{block.kind}"
    ev = [{"name": f"{block.kind} text", "bbox": list(block.bbox), "text": value}]
    return q, [], value, value, _meta(template, {"field": key}, ev, None, text_kind=block.kind)


def smallest_object(scene: Scene, ratio: float = 0.75) -> Obj:
    """The object clearly smaller than all others (side <= ratio x the next smallest)."""
    objs = sorted(scene.objects, key=lambda o: o.size_px)
    if len(objs) < 2 or objs[0].size_px > ratio * objs[1].size_px:
        raise TaskNotApplicable
    return objs[0]


def task_small_detail(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    obj = smallest_object(scene)
    if rng.random() < 0.5:
        q, answer, template, choices = ("What color is the smallest object?", obj.color,
                                        "small/color", list(COLORS))
    else:
        q, answer, template, choices = ("What shape is the smallest object?", obj.shape,
                                        "small/shape", list(SHAPES))
    return q, [], answer, answer, _meta(template, {}, evidence([obj], scene.image_size), choices)


def describe_answer(scene: Scene) -> str:
    """Canonical object list: names sorted alphabetically, repeats kept, comma separated."""
    return ", ".join(sorted(o.name for o in scene.objects))


def task_describe(scene: Scene, rng: np.random.Generator) -> TaskOutput:
    if not scene.objects:
        raise TaskNotApplicable
    answer = describe_answer(scene)
    q = "List the objects in the image."
    return q, [], answer, answer, _meta(
        "describe/list", {}, evidence(scene.objects, scene.image_size), None)


TASKS: dict[str, TaskFn] = {
    "color": task_color,
    "shape": task_shape,
    "count": task_count,
    "exists": task_exists,
    "position": task_position,
    "size": task_size,
    "where": task_where,
    "point": task_point,
    "read": task_read,
    "small_detail": task_small_detail,
    "describe": task_describe,
}

# Scene-sampler arguments a task needs to be answerable at a useful rate.
SCENE_NEEDS: dict[str, dict[str, object]] = {
    "read": {"text": True},
    "small_detail": {"small_target": True},
}
