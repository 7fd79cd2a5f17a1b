"""A profile's `world` section as WorldConfigs: the base world and each benchmark's own canvas.

The paper's benchmarks come at their own image sizes, so the same 5% budget keeps a different
share of each image's tokens (the floor binds on small images; implementation-facts.md, "The
regime the paper's 5% is"). A profile reproduces that with two keys beside WorldConfig's fields:

* ``object_scale``: objects are drawn at the pixel sizes of a world ``object_scale`` times larger
  than ``image_size`` (an object then spans several merged tokens, as in natural images, instead
  of about one); letters keep their sizes (a word already spans several tokens);
* ``canvas``: benchmark -> canvas side in pixels (``canvas_sides`` derives them from the paper's
  token counts). A benchmark without one is drawn on the base canvas, HR-Bench on twice it.

Objects keep their pixel sizes on every canvas, so a larger canvas holds more of them: the
object count scales with the canvas area (as real high-resolution images hold more, smaller
things), clamped to what WorldConfig allows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from .config import WorldConfig

REGIME_KEYS = ("object_scale", "canvas")  # the world section's keys that are not WorldConfig fields
MAX_OBJECTS = 30  # WorldConfig's bound


def base_world(world: Mapping[str, Any]) -> WorldConfig:
    """The world section's base WorldConfig: the default world at ``image_size``, its object
    sizes those of the default world at ``image_size * object_scale``, then the explicit overrides."""
    size = world.get("image_size", WorldConfig.image_size)
    scale = world.get("object_scale", 1)
    rest = {k: v for k, v in world.items() if k not in ("image_size", *REGIME_KEYS)}
    if scale == 1:
        return WorldConfig.for_size(size, **rest)
    plain, drawn = WorldConfig.for_size(size), WorldConfig.for_size(round(size * scale))
    values = {f.name: getattr(plain, f.name) for f in fields(plain)}
    values.update({f: getattr(drawn, f) for f in _OBJECT_FIELDS})
    return WorldConfig(**_fit(size, {**values, **rest}))


def at_canvas(cfg: WorldConfig, side: int) -> WorldConfig:
    """``cfg`` on a ``side`` px canvas: pixel sizes kept (clamped to what the canvas allows),
    the object count scaled with the area."""
    if side == cfg.image_size:
        return cfg
    area = (side / cfg.image_size) ** 2
    most = min(MAX_OBJECTS, max(1, round(cfg.max_objects * area)))
    values = {f.name: getattr(cfg, f.name) for f in fields(cfg)}
    values.update(image_size=side, max_objects=most, min_objects=min(cfg.min_objects, most),
                  large_scene_objects=min(cfg.large_scene_objects, MAX_OBJECTS))
    return WorldConfig(**_fit(side, values))


def benchmark_world(world: Mapping[str, Any], name: str, default: WorldConfig | None = None) -> WorldConfig | None:
    """The WorldConfig benchmark ``name`` is drawn in when the section gives it a canvas, else
    ``default`` (the suite's own canvas rule applies to it)."""
    side = (world.get("canvas") or {}).get(name)
    if side is None:
        return default
    return at_canvas(base_world(world), int(side))


def canvas_sides(paper_tokens: Mapping[str, float], scale: float, max_tokens: int, token_px: int) -> dict[str, int]:
    """Each benchmark's square canvas side: its token count in the paper's processor times
    ``scale``, capped at ``max_tokens`` (the miniature's max_pixels), rounded to a whole grid of
    ``token_px`` merged tokens (at least 2 x 2)."""
    if not 0 < scale <= 1 or max_tokens < 4 or token_px < 1:
        raise ValueError(f"canvas_sides: scale {scale!r} in (0, 1], max_tokens {max_tokens!r} >= 4, "
                         f"token_px {token_px!r} >= 1")
    return {b: token_px * max(2, round(math.sqrt(min(max_tokens, scale * t)))) for b, t in paper_tokens.items()}


_OBJECT_FIELDS = ("min_object_px", "max_object_px", "small_target_px", "object_gap_px")


def _fit(side: int, values: dict[str, Any]) -> dict[str, Any]:
    """Clamp the pixel fields to WorldConfig's bounds on a ``side`` px canvas (objects at most
    half the side, fonts a quarter), keeping their order."""
    v = dict(values)
    v["max_object_px"] = min(v["max_object_px"], side // 2)
    v["min_object_px"] = min(v["min_object_px"], v["max_object_px"])
    v["small_target_px"] = min(v["small_target_px"], v["min_object_px"])
    v["font_px"] = min(v["font_px"], max(12, side // 4))
    v["small_font_px"] = min(v["small_font_px"], v["font_px"])
    v["object_gap_px"] = min(v["object_gap_px"], side // 8)
    return v
