"""The scene object model and its seeded sampler.

A scene is pure data (objects, one optional text block, clutter strokes, a noise seed): every
question is answered from it, and `render.render_scene` draws it deterministically.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .config import WorldConfig
from .palette import BACKGROUNDS, CLUTTER_COLORS, COLORS, MAX_NOISE, SHAPES, SIZE_CLASSES, TINY
from .text import TEXT_KINDS, TextBlock, sample_text_block

Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class Obj:
    shape: str
    color: str
    size_class: str  # small / medium / large, or "tiny" for the small target of a large scene
    size_px: int  # side of the bounding box
    cx: int
    cy: int

    @property
    def bbox(self) -> Box:
        x0, y0 = self.cx - self.size_px // 2, self.cy - self.size_px // 2
        return (x0, y0, x0 + self.size_px, y0 + self.size_px)

    @property
    def name(self) -> str:
        return f"{self.color} {self.shape}"


@dataclass(frozen=True)
class Scene:
    image_size: int
    background: tuple[int, int, int]
    objects: tuple[Obj, ...]
    text: TextBlock | None
    clutter_lines: tuple[tuple[int, int, int, int, int], ...]  # x0, y0, x1, y1, colour index
    noise_amp: float
    noise_seed: int

    def to_dict(self) -> dict:
        """JSON-ready summary of the scene (what meta stores)."""
        return {
            "image_size": self.image_size,
            "objects": [asdict(o) | {"bbox": list(o.bbox)} for o in self.objects],
            "text": None if self.text is None else {
                "kind": self.text.kind, "bbox": list(self.text.bbox),
                "fields": dict(self.text.fields), "lines": [c[0] for c in self.text.cells]},
        }


def _boxes_clear(box: Box, others: list[Box], gap: int) -> bool:
    x0, y0, x1, y1 = box
    return all(x1 + gap <= a0 or a1 + gap <= x0 or y1 + gap <= b0 or b1 + gap <= y0
               for a0, b0, a1, b1 in others)


def _size_for_class(rng: np.random.Generator, cfg: WorldConfig, k: int) -> int:
    """Sizes from the middle of the k-th third of [min, max] so the classes stay distinct."""
    lo, hi = cfg.min_object_px, cfg.max_object_px
    band = (hi - lo) / len(SIZE_CLASSES)
    a, b = lo + band * (k + 0.15), lo + band * (k + 0.85)
    return int(round(rng.uniform(a, b)))


def _place(rng: np.random.Generator, cfg: WorldConfig, w: int, h: int,
           taken: list[Box]) -> Box | None:
    margin = max(2, cfg.object_gap_px)
    s = cfg.image_size
    if w + 2 * margin > s or h + 2 * margin > s:
        return None
    for _ in range(cfg.placement_tries):
        x0 = int(rng.integers(margin, s - margin - w + 1))
        y0 = int(rng.integers(margin, s - margin - h + 1))
        box = (x0, y0, x0 + w, y0 + h)
        if _boxes_clear(box, taken, cfg.object_gap_px):
            return box
    return None


def sample_scene(rng: np.random.Generator, cfg: WorldConfig, *, text: bool | None = None,
                 text_kind: str | None = None, small_target: bool | None = None,
                 small_text: bool = False) -> Scene:
    """Sample a scene. `text` / `small_target` force (True), forbid (False) or randomise (None).

    Each scene draws from a random subset of colours and shapes, so repeated attributes (and
    counts above one) are common. Objects that cannot be placed without overlap are dropped.
    """
    s = cfg.image_size
    colors = list(COLORS)
    shapes = list(SHAPES)
    scene_colors = rng.choice(colors, size=int(rng.integers(2, len(colors) + 1)), replace=False)
    scene_shapes = rng.choice(shapes, size=int(rng.integers(2, len(shapes) + 1)), replace=False)
    n = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    want_tiny = small_target
    if want_tiny is None:
        want_tiny = n >= cfg.large_scene_objects and rng.random() < cfg.small_target_prob
    if want_tiny:
        n = max(n, min(cfg.large_scene_objects, cfg.max_objects), 2)
    want_text = rng.random() < cfg.text_prob if text is None else text

    taken: list[Box] = []
    block = None
    if want_text:
        px = cfg.small_font_px if small_text else cfg.font_px
        # a forced text gets a few draws (other kinds when free) before giving up
        for _ in range(len(TEXT_KINDS) if text else 1):
            block = sample_text_block(rng, px, cfg.small_font_px, text_kind, cfg.text_kinds)
            box = _place(rng, cfg, block.width, block.height, taken)
            if box is not None:
                block = block.at(box[0], box[1])
                taken.append(box)
                break
            block = None
        if block is None and text:
            raise ValueError(f"no {text_kind or 'text'} block fits a {s} px canvas at font "
                             f"{px} px; raise image_size or lower font_px / small_font_px")

    objects: list[Obj] = []
    for i in range(n):
        tiny = bool(want_tiny) and i == 0  # placed first so it always fits
        if tiny:
            size, cls = cfg.small_target_px, TINY
        else:
            k = int(rng.integers(len(SIZE_CLASSES)))
            size, cls = _size_for_class(rng, cfg, k), SIZE_CLASSES[k]
        color = str(scene_colors[int(rng.integers(len(scene_colors)))])
        shape = str(scene_shapes[int(rng.integers(len(scene_shapes)))])
        box = _place(rng, cfg, size, size, taken)
        if box is None:
            continue
        taken.append(box)
        objects.append(Obj(shape, color, cls, size, box[0] + size // 2, box[1] + size // 2))

    n_lines = int(round(cfg.clutter * 16))
    ends = rng.integers(0, s, size=(n_lines, 4)).tolist()
    hues = rng.integers(len(CLUTTER_COLORS), size=n_lines).tolist()
    lines = tuple((*e, h) for e, h in zip(ends, hues))
    background = BACKGROUNDS[int(rng.integers(len(BACKGROUNDS)))]
    return Scene(s, background, tuple(objects), block, lines, MAX_NOISE * cfg.clutter,
                 int(rng.integers(2**31)))
