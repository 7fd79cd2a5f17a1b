"""Tests of the procedural world: determinism, answers checked against the scene model with
independent reference code, hand-worked scenes, config validation, text legibility, styles,
POPE negatives and the question-only baseline."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections import Counter

import numpy as np
import pytest

from ltopd.data.world import (
    COLORS,
    SHAPES,
    STYLES,
    TASKS,
    Obj,
    Scene,
    WorldConfig,
    answer_prior_baseline,
    generate_item,
    generate_items,
    generate_task_item,
    pope_negatives,
    render_scene,
    text_mask,
)
from ltopd.data.world.palette import BACKGROUNDS, MAX_NOISE
from ltopd.data.world.tasks import TaskNotApplicable

CFG = WorldConfig()
SEED = 20260824


def meta_of(item: dict) -> dict:
    return json.loads(item["meta"])


def resolved(item: dict) -> str:
    """The answer as an option text for multiple choice, else the answer itself."""
    if item["options"]:
        return item["options"]["ABCDEFGH".index(item["answer"])]
    return item["answer"]


@pytest.fixture(scope="module")
def task_items() -> dict[str, list[dict]]:
    return {t: [generate_task_item(t, i, SEED, CFG) for i in range(16)] for t in TASKS}


@pytest.fixture(scope="module")
def style_items() -> dict[str, list[dict]]:
    return {s: generate_items(s, 60, SEED, CFG) for s in STYLES}


# ---------------------------------------------------------------- config and palette

@pytest.mark.parametrize("field,value", [
    ("image_size", 32), ("image_size", 4096), ("image_size", 256.0),
    ("max_object_px", 200), ("min_object_px", 70), ("small_target_px", 30),
    ("max_objects", 0), ("min_objects", 9), ("small_target_prob", 1.5),
    ("clutter", -0.1), ("text_prob", 2), ("font_px", 8), ("small_font_px", 30),
    ("object_gap_px", -1), ("placement_tries", 0), ("large_scene_objects", 0),
    ("clutter", True),
])
def test_config_rejects_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"WorldConfig\.{field} must be"):
        WorldConfig(**{field: value})


def test_text_kinds_restrict_the_scenes_text_and_name_the_allowed_values() -> None:
    words_only = dataclasses.replace(CFG, text_kinds=["word", "sign"])  # a YAML list
    assert words_only.text_kinds == ("word", "sign")
    kinds = Counter(json.loads(generate_task_item("read", i, SEED, words_only)["meta"])["scene"]["text"]["kind"]
                    for i in range(60))
    assert set(kinds) == {"word", "sign"}
    every = Counter(json.loads(generate_task_item("read", i, SEED, CFG)["meta"])["scene"]["text"]["kind"]
                    for i in range(60))
    assert len(every) == 6  # the default draws from all six
    for bad in ([], ["word", "poem"]):
        with pytest.raises(ValueError, match=r"world\.text_kinds: .*allowed values: a non-empty list of \['word'"):
            WorldConfig(text_kinds=bad)


def test_config_is_frozen_and_scales() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CFG.image_size = 128  # type: ignore[misc]
    small = WorldConfig.for_size(128)
    assert (small.image_size, small.max_object_px, small.min_object_px) == (128, 32, 11)
    assert small.font_px >= 12 and WorldConfig.for_size(448, clutter=0.0).clutter == 0.0


def test_palette_colours_are_well_separated_and_noise_never_clips() -> None:
    assert len(COLORS) >= 6 and len(SHAPES) >= 5
    for a, b in itertools.combinations(COLORS.values(), 2):
        assert np.linalg.norm(np.subtract(a, b)) > 100
    for bg in BACKGROUNDS:
        assert all(MAX_NOISE <= c <= 255 - MAX_NOISE for c in bg)


# ---------------------------------------------------------------- determinism and sizes

def test_same_arguments_give_identical_items_and_index_changes_them() -> None:
    a = generate_item("llava", 3, SEED, CFG)
    b = generate_item("llava", 3, SEED, CFG)
    c = generate_item("llava", 4, SEED, CFG)
    assert a["images"][0].tobytes() == b["images"][0].tobytes()
    assert {k: a[k] for k in a if k != "images"} == {k: b[k] for k in b if k != "images"}
    assert a["images"][0].tobytes() != c["images"][0].tobytes()
    assert a["id"] == "llava-000003" and a["source"] == "llava"
    # independent of other items and of where a batch starts
    batch = generate_items("llava", 3, SEED, CFG, start=2)
    assert batch[1]["meta"] == a["meta"] and batch[1]["question"] == a["question"]
    assert generate_item("llava", 3, SEED + 1, CFG)["meta"] != a["meta"]


@pytest.mark.parametrize("cfg", [WorldConfig.for_size(128), WorldConfig(image_size=320),
                                 WorldConfig.for_size(448)])
def test_images_have_the_configured_size(cfg: WorldConfig) -> None:
    for style in STYLES:
        img = generate_item(style, 0, 1, cfg)["images"][0]
        assert img.size == (cfg.image_size, cfg.image_size) and img.mode == "RGB"


def test_unknown_names_and_bad_seeds_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown style"):
        generate_item("nope", 0, 0, CFG)
    with pytest.raises(ValueError, match="unknown task"):
        generate_task_item("nope", 0, 0, CFG)
    with pytest.raises(ValueError, match="seed"):
        generate_item("llava", 0, -1, CFG)


# ---------------------------------------------------------------- answers vs the scene model

def reference_answer(item: dict) -> str:
    """Recompute the open answer from the scene stored in meta (independent of tasks.py)."""
    m = meta_of(item)
    objs = m["scene"]["objects"]
    size = m["scene"]["image_size"]
    q = item["question"]
    name = lambda o: f"{o['color']} {o['shape']}"  # noqa: E731
    task = item["task"]
    if task == "color":
        shape = re.search(r"What color is the (\w+)\?", q).group(1)
        (obj,) = [o for o in objs if o["shape"] == shape]
        return obj["color"]
    if task == "shape":
        color = re.search(r"What shape is the (\w+) object\?", q).group(1)
        (obj,) = [o for o in objs if o["color"] == color]
        return obj["shape"]
    if task == "count":
        if mc := re.search(r"How many (\w+) objects", q):
            return str(sum(o["color"] == mc.group(1) for o in objs))
        noun = re.search(r"How many (\w+) are there", q).group(1)
        singular = {s + ("es" if s.endswith("s") else "s"): s for s in SHAPES}[noun]
        return str(sum(o["shape"] == singular for o in objs))
    if task == "exists":
        c, s = re.search(r"Is there an? (\w+) (\w+) in", q).groups()
        return "yes" if any(o["color"] == c and o["shape"] == s for o in objs) else "no"
    if task == "position":
        a, b = re.search(r"Is the (\w+ \w+) to the left of.*below the (\w+ \w+)\?", q).groups()
        (oa,) = [o for o in objs if name(o) == a]
        (ob,) = [o for o in objs if name(o) == b]
        dx, dy = oa["cx"] - ob["cx"], oa["cy"] - ob["cy"]
        if abs(dx) > abs(dy):
            return "left" if dx < 0 else "right"
        return "above" if dy < 0 else "below"
    if task == "size":
        sizes = {name(o): o["size_px"] for o in objs}
        return max(item["options"], key=lambda n: sizes[n])
    if task == "where":
        n = re.search(r"is the (\w+ \w+)\?", q).group(1)
        (o,) = [o for o in objs if name(o) == n]
        row, col = ("top" if o["cy"] < size / 2 else "bottom"), ("left" if o["cx"] < size / 2 else "right")
        return f"{row} {col}"
    if task == "point":
        n = re.search(r"Point to the (\w+ \w+)", q).group(1)
        (o,) = [o for o in objs if name(o) == n]
        return f"({o['cx'] / size:.2f}, {o['cy'] / size:.2f})"
    if task == "read":
        text = m["scene"]["text"]
        if text["kind"] == "document":
            field = re.search(r"What is the (\w+) on the document", q).group(1).upper()
            (line,) = [ln for ln in text["lines"] if ln.startswith(field + ": ")]
            return line.split(": ", 1)[1].lower()
        if text["kind"] == "table":
            word = re.search(r"quantity of (\w+)\?", q).group(1).upper()
            cells = text["lines"]
            return cells[cells.index(word) + 1]
        (line,) = text["lines"]
        return line.lower()
    if task == "small_detail":
        o = min(objs, key=lambda o: o["size_px"])
        return o["color"] if "color" in q else o["shape"]
    if task == "describe":
        return ", ".join(sorted(name(o) for o in objs))
    raise AssertionError(task)


def test_every_task_answer_matches_the_scene(task_items: dict[str, list[dict]]) -> None:
    for task, items in task_items.items():
        assert items, task
        for it in items:
            assert it["task"] == task
            assert resolved(it) == reference_answer(it), (task, it["question"], it["meta"])


def test_styled_answers_match_the_scene(style_items: dict[str, list[dict]]) -> None:
    for items in style_items.values():
        for it in items:
            assert resolved(it) == reference_answer(it), (it["question"], it["meta"])


def test_rendered_pixels_agree_with_the_scene(task_items: dict[str, list[dict]]) -> None:
    palette = np.array([(r << 16) | (g << 8) | b for r, g, b in COLORS.values()])
    for it in itertools.chain.from_iterable(task_items.values()):
        img = np.asarray(it["images"][0]).astype(int)
        packed = (img[:, :, 0] << 16) | (img[:, :, 1] << 8) | img[:, :, 2]
        scene = meta_of(it)["scene"]
        inside = np.zeros(img.shape[:2], bool)
        for o in scene["objects"]:
            assert tuple(img[o["cy"], o["cx"]]) == COLORS[o["color"]]
            x0, y0, x1, y1 = o["bbox"]
            inside[y0:y1, x0:x1] = True
        # clutter, noise and text never produce an exact palette colour outside objects
        assert not (np.isin(packed, palette) & ~inside).any()


def test_text_is_rendered_where_the_scene_says(task_items: dict[str, list[dict]]) -> None:
    for it in task_items["read"]:
        img = np.asarray(it["images"][0]).astype(int)
        x0, y0, x1, y1 = meta_of(it)["scene"]["text"]["bbox"]
        patch = img[y0:y1, x0:x1]
        dark = (patch.sum(-1) < 200).sum()  # text ink or a sign panel
        assert dark > 40, it["question"]


# ---------------------------------------------------------------- hand-built scenes

def hand_scene() -> Scene:
    objs = (Obj("circle", "red", "medium", 40, 50, 50),
            Obj("square", "blue", "medium", 40, 200, 60),
            Obj("star", "red", "large", 60, 60, 200),
            Obj("triangle", "green", "tiny", 12, 200, 200))
    return Scene(256, BACKGROUNDS[0], objs, None, (), 0.0, 0)


def all_questions(task: str, scene: Scene, tries: int = 400) -> dict[str, str]:
    seen: dict[str, str] = {}
    for k in range(tries):
        try:
            q, options, ans, _, _ = TASKS[task](scene, np.random.default_rng(k))
        except TaskNotApplicable:
            continue
        seen[q] = options["ABCD".index(ans)] if options else ans
    return seen


def test_hand_worked_answers() -> None:
    s = hand_scene()
    assert all_questions("color", s) == {
        "What color is the circle?": "red", "What color is the square?": "blue",
        "What color is the star?": "red", "What color is the triangle?": "green"}
    assert all_questions("shape", s) == {
        "What shape is the blue object?": "square", "What shape is the green object?": "triangle"}
    counts = all_questions("count", s)
    assert counts["How many red objects are there?"] == "2"
    assert counts["How many circles are there?"] == "1"
    assert counts.get("How many yellow objects are there?", "0") == "0"
    assert set(counts.values()) <= {"0", "1", "2"}
    pos = all_questions("position", s)
    q = "Is the {} to the left of, to the right of, above or below the {}?"
    assert pos[q.format("red circle", "blue square")] == "left"
    assert pos[q.format("blue square", "red circle")] == "right"
    assert pos[q.format("red circle", "red star")] == "above"
    assert pos[q.format("green triangle", "blue square")] == "below"
    assert q.format("red circle", "green triangle") not in pos  # diagonal: no dominant axis
    assert all_questions("where", s) == {
        "In which part of the image is the red circle?": "top left",
        "In which part of the image is the blue square?": "top right",
        "In which part of the image is the red star?": "bottom left",
        "In which part of the image is the green triangle?": "bottom right"}
    assert all_questions("small_detail", s) == {
        "What color is the smallest object?": "green",
        "What shape is the smallest object?": "triangle"}
    assert all_questions("describe", s) == {
        "List the objects in the image.": "blue square, green triangle, red circle, red star"}
    assert set(all_questions("size", s).values()) == {"red star"}
    assert all_questions("point", s)["Point to the blue square."] == "(0.78, 0.23)"
    with pytest.raises(TaskNotApplicable):
        TASKS["read"](s, np.random.default_rng(0))


def test_hand_scene_renders_the_shapes() -> None:
    img = np.asarray(render_scene(hand_scene())).astype(int)
    assert tuple(img[50, 50]) == COLORS["red"]
    assert tuple(img[31, 31]) == BACKGROUNDS[0]  # circle: the bbox corner is background
    assert tuple(img[41, 181]) == COLORS["blue"]  # square: the bbox corner is filled
    assert tuple(img[171, 31]) == BACKGROUNDS[0]  # star: corner empty
    assert tuple(img[200, 200]) == COLORS["green"]


def test_pope_negative_splits_on_the_hand_scene() -> None:
    s = hand_scene()
    present = {(o.color, o.shape) for o in s.objects}
    adversarial = set(pope_negatives(s, "adversarial"))
    assert adversarial == {(c, sh) for c in ("red", "blue", "green")
                           for sh in ("circle", "square", "star", "triangle")} - present
    popular = set(pope_negatives(s, "popular"))
    assert len(popular) == 27 and not popular & present  # red x 7 + 4 shapes x 6 others - 4
    assert len(pope_negatives(s, "random")) == len(COLORS) * len(SHAPES) - 4


def test_generated_pope_negatives_are_absent() -> None:
    splits = Counter()
    for i in range(60):
        it = generate_task_item("exists", i, SEED, CFG)
        m = meta_of(it)
        objs = m["scene"]["objects"]
        c, s = m["slots"]["color"], m["slots"]["shape"]
        pairs = {(o["color"], o["shape"]) for o in objs}
        assert ((c, s) in pairs) == (it["answer"] == "yes")
        if it["answer"] == "no":
            splits[m["pope_split"]] += 1
            if m["pope_split"] == "adversarial":
                assert c in {o["color"] for o in objs} and s in {o["shape"] for o in objs}
    assert len(splits) == 3


# ---------------------------------------------------------------- text legibility

@pytest.mark.parametrize("freetype", [True, False])
def test_text_is_legible_at_the_configured_sizes(freetype: bool) -> None:
    for px in (CFG.font_px, CFG.small_font_px):
        for text in ("H", "8", "WORD 2024-03-17"):
            mask = np.asarray(text_mask(text, px, freetype=freetype))
            rows = np.flatnonzero(mask.max(axis=1) > 128)
            assert rows[-1] - rows[0] + 1 >= 12, (px, text, freetype)


# ---------------------------------------------------------------- styles and balance

def test_styles_use_their_tasks_and_phrasing(style_items: dict[str, list[dict]]) -> None:
    for name, items in style_items.items():
        assert {it["task"] for it in items} <= set(STYLES[name].tasks)
        assert all(it["source"] == name for it in items)
    for it in style_items["onethinker"]:
        chain = it["response"]
        assert chain.endswith(f"So the answer is {it['answer']}.")
        assert len(chain) > len(f"So the answer is {it['answer']}.") + 10
    assert any(it["options"] for it in style_items["onethinker"])
    for it in style_items["pixmo"]:
        if it["task"] == "count":
            n = int(it["answer"])
            assert it["response"].endswith(f"Total: {n}.")
            assert len(re.findall(r"\(\d\.\d\d, \d\.\d\d\)", it["response"])) == n
        if it["task"] == "describe":
            assert it["response"].endswith(f"In short: {it['answer']}.")
    for it in style_items["llava"]:
        assert resolved(it) in it["response"].lower() and len(it["response"]) < 160
    for it in style_items["vision_opd"]:
        objs = meta_of(it)["scene"]["objects"]
        assert any(o["size_class"] == "tiny" for o in objs)
        spoken = f"{it['answer']}. {resolved(it)}" if it["options"] else it["answer"]
        assert it["response"].endswith(f"The answer is {spoken}.")


def test_question_only_baseline_stays_low() -> None:
    items = [generate_item(s, i, 7, CFG) for i in range(75) for s in STYLES]
    assert answer_prior_baseline(items) < 0.4
    count = [generate_task_item("count", i, 7, CFG) for i in range(120)]
    assert max(Counter(it["answer"] for it in count).values()) / len(count) < 0.3


def test_answer_prior_baseline_is_the_majority_per_template() -> None:
    def rec(task: str, template: str, answer: str) -> dict:
        meta = json.dumps({"template": template})
        return {"task": task, "answer": answer, "options": [], "meta": meta}
    items = [rec("color", "t1", "red"), rec("color", "t1", "red"), rec("color", "t1", "blue"),
             rec("color", "t2", "blue"), rec("count", "t1", "3")]
    assert answer_prior_baseline(items) == pytest.approx(4 / 5)
