"""MMMU twin: small reasoning problems over the image (counting arithmetic, table and document
arithmetic), as multiple choice (4 options; ~70%, MMMU validation is mostly multiple choice) or
open questions with a numeric answer (``question_type`` "multiple-choice" / "open"). The
reference response is a short chain ending in the answer."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ltopd.data.world import Scene, WorldConfig, render_scene
from ltopd.data.world.palette import plural
from ltopd.data.world.tasks import TaskNotApplicable

from .synthetic import bench_rng, draw, make_record, numeric_options, pick

NAME = "mmmu"
MC_SHARE = 0.7
Problem = tuple[str, int, str, str]  # question, numeric answer, reasoning, template


def _union_count(scene: Scene, rng: np.random.Generator) -> Problem:
    color = pick(rng, sorted({o.color for o in scene.objects}))
    shape = pick(rng, sorted({o.shape for o in scene.objects}))
    a = sum(o.color == color for o in scene.objects)
    b = sum(o.shape == shape for o in scene.objects)
    both = sum(o.color == color and o.shape == shape for o in scene.objects)
    q = (f"How many objects are {color} or {plural(shape)} (or both)? "
         f"Count an object that is both only once.")
    why = f"{a} {color} objects plus {b} {plural(shape)} minus {both} counted twice"
    return q, a + b - both, why, "mmmu/union"


def _difference(scene: Scene, rng: np.random.Generator) -> Problem:
    shapes = Counter(o.shape for o in scene.objects)
    pairs = [(s, t) for s in shapes for t in shapes if shapes[s] > shapes[t]]
    s, t = pick(rng, sorted(pairs))
    q = f"How many more {plural(s)} than {plural(t)} are there in the image?"
    return q, shapes[s] - shapes[t], f"{shapes[s]} {plural(s)} minus {shapes[t]} {plural(t)}", \
        "mmmu/difference"


def _table_sum(scene: Scene, rng: np.random.Generator) -> Problem:
    if scene.text is None or scene.text.kind != "table":
        raise TaskNotApplicable
    fields = dict(scene.text.fields)
    keys = sorted(fields)
    idx = rng.choice(len(keys), size=2, replace=False)
    (k1, k2) = (keys[int(i)] for i in idx)
    v1, v2 = int(fields[k1]), int(fields[k2])
    w1, w2 = k1.split(":")[1], k2.split(":")[1]
    q = f"According to the table, what is the combined quantity of {w1} and {w2}?"
    return q, v1 + v2, f"{w1} is {v1} and {w2} is {v2}", "mmmu/table-sum"


def _document_multiple(scene: Scene, rng: np.random.Generator) -> Problem:
    if scene.text is None or scene.text.kind != "document":
        raise TaskNotApplicable
    total = int(dict(scene.text.fields)["total"])
    k = int(rng.integers(2, 4))
    q = f"If {k} copies of the document's total were paid, how much would be paid in all?"
    return q, k * total, f"the total is {total}, times {k}", "mmmu/document-multiple"


PROBLEMS = {
    "union_count": (_union_count, {}),
    "difference": (_difference, {}),
    "table_sum": (_table_sum, {"text": True, "text_kind": "table"}),
    "document_multiple": (_document_multiple, {"text": True, "text_kind": "document"}),
}


def item(index: int, seed: int, cfg: WorldConfig) -> dict:
    rng = bench_rng(NAME, seed, index)
    kinds = list(PROBLEMS)
    kind = kinds[int(rng.integers(len(kinds)))]
    solve, scene_kwargs = PROBLEMS[kind]
    scene, (q, value, why, template) = draw(rng, cfg, solve, **scene_kwargs)
    if rng.random() < MC_SHARE:
        qtype = "multiple-choice"
        options, answer = numeric_options(value, rng)
        said = f"({answer}) {value}"
    else:
        qtype, options, answer, said = "open", [], str(value), str(value)
    response = f"{why[0].upper()}{why[1:]} gives {value}. So the answer is {said}."
    return make_record(NAME, f"{index:06d}", [render_scene(scene)], q, options, answer, kind,
                       {"template": template, "question_type": qtype, "index": index,
                        "scene": scene.to_dict()}, response=response)


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    return [item(i, seed, cfg) for i in range(n)]
