"""Draw a Scene with PIL: background noise and faint clutter first, then objects, then text.

Objects are filled with their exact palette colour (no noise on top), so every object's centre
pixel equals its colour: tests rely on it.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from .palette import CLUTTER_COLORS, COLORS
from .scene import Obj, Scene
from .text import RULE_COLOR, TextBlock, text_mask

CLUTTER_ALPHA = 0.35  # clutter strokes stay faint: 35% of their colour over the background


def _regular(cx: float, cy: float, r: float, n: int, phase: float) -> list[tuple[float, float]]:
    return [(cx + r * math.cos(phase + 2 * math.pi * i / n),
             cy + r * math.sin(phase + 2 * math.pi * i / n)) for i in range(n)]


def _star(cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    pts = []
    for i in range(10):
        rad = r if i % 2 == 0 else 0.45 * r
        a = -math.pi / 2 + math.pi * i / 5
        pts.append((cx + rad * math.cos(a), cy + rad * math.sin(a)))
    return pts


def draw_object(draw: ImageDraw.ImageDraw, obj: Obj) -> None:
    x0, y0, x1, y1 = obj.bbox
    x1, y1 = x1 - 1, y1 - 1  # PIL boxes are inclusive
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2
    fill = COLORS[obj.color]
    if obj.shape == "circle":
        draw.ellipse((x0, y0, x1, y1), fill=fill)
    elif obj.shape == "square":
        draw.rectangle((x0, y0, x1, y1), fill=fill)
    elif obj.shape == "triangle":
        draw.polygon([(x0, y1), (x1, y1), (cx, y0)], fill=fill)
    elif obj.shape == "diamond":
        draw.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=fill)
    elif obj.shape == "hexagon":
        draw.polygon(_regular(cx, cy, r, 6, 0.0), fill=fill)
    elif obj.shape == "star":
        draw.polygon(_star(cx, cy, r), fill=fill)
    elif obj.shape == "cross":
        t = (x1 - x0) / 6
        draw.rectangle((x0, cy - t, x1, cy + t), fill=fill)
        draw.rectangle((cx - t, y0, cx + t, y1), fill=fill)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")


def draw_text_block(img: Image.Image, block: TextBlock) -> None:
    draw = ImageDraw.Draw(img)
    x0, y0, x1, y1 = block.bbox
    if block.panel is not None:
        outline = RULE_COLOR if block.kind in ("document", "table") else None
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=block.panel, outline=outline)
    for a, b, c, d in block.rules:
        draw.line((x0 + a, y0 + b, x0 + c, y0 + d), fill=RULE_COLOR)
    for text, dx, dy in block.cells:
        mask = text_mask(text, block.font_px)
        x, y = x0 + dx, y0 + dy
        img.paste(block.ink, (x, y, x + mask.width, y + mask.height), mask)


def _background(scene: Scene) -> Image.Image:
    """Background colour plus uniform grey noise in [-amp, amp] (no clipping: see palette)."""
    s = scene.image_size
    amp = int(round(scene.noise_amp))
    if amp == 0:
        return Image.new("RGB", (s, s), scene.background)
    noise = np.random.default_rng(scene.noise_seed).integers(0, 2 * amp + 1, size=(s, s),
                                                             dtype=np.uint8)
    # one 2-D add per channel: much faster than a broadcast (s, s, 1) + (3,) add
    rgb = np.stack([noise + np.uint8(c - amp) for c in scene.background], axis=-1)
    return Image.fromarray(rgb, "RGB")


def render_scene(scene: Scene) -> Image.Image:
    """The RGB image of `scene` (deterministic: same scene, same pixels)."""
    img = _background(scene)
    draw = ImageDraw.Draw(img)
    for x0, y0, x1, y1, ci in scene.clutter_lines:
        c = CLUTTER_COLORS[ci]
        faint = tuple(int(round(CLUTTER_ALPHA * a + (1 - CLUTTER_ALPHA) * b))
                      for a, b in zip(c, scene.background))
        draw.line((x0, y0, x1, y1), fill=faint, width=1)
    for obj in scene.objects:
        draw_object(draw, obj)
    if scene.text is not None:
        draw_text_block(img, scene.text)
    return img
