"""WorldConfig: every knob of the synthetic world, validated at construction."""

from __future__ import annotations

from dataclasses import dataclass

from .text import TEXT_KINDS


@dataclass(frozen=True)
class WorldConfig:
    """Knobs of the procedural world. Pixel sizes refer to the square canvas of `image_size`.

    `for_size` scales the pixel fields of the default 256 px world to another resolution.
    """

    image_size: int = 256  # canvas side in pixels
    min_object_px: int = 22  # bounding-box side of the smallest regular object
    max_object_px: int = 64  # bounding-box side of the largest object
    small_target_px: int = 12  # side of the occasional small target (below min_object_px)
    min_objects: int = 2
    max_objects: int = 8
    large_scene_objects: int = 5  # scenes with at least this many objects may get a small target
    small_target_prob: float = 0.35  # chance of a small target in a large scene
    clutter: float = 0.3  # 0 = clean background, 1 = heavy faint lines and noise
    text_prob: float = 0.35  # chance that a scene carries one text element
    text_kinds: tuple[str, ...] = TEXT_KINDS  # the kinds a scene's text is drawn from (uniformly)
    font_px: int = 22  # nominal font size of ordinary text (capitals are ~0.7 of it)
    small_font_px: int = 18  # nominal font size of small text (documents, tables, fine detail)
    object_gap_px: int = 4  # minimum free margin between objects and text blocks
    placement_tries: int = 60  # random placements tried per object before it is dropped

    def __post_init__(self) -> None:
        s = self.image_size
        _int_range("image_size", s, 64, 2048)
        _int_range("max_object_px", self.max_object_px, 8, s // 2)
        _int_range("min_object_px", self.min_object_px, 6, self.max_object_px)
        _int_range("small_target_px", self.small_target_px, 4, self.min_object_px)
        _int_range("max_objects", self.max_objects, 1, 30)
        _int_range("min_objects", self.min_objects, 1, self.max_objects)
        _int_range("large_scene_objects", self.large_scene_objects, 1, 30)
        _float_range("small_target_prob", self.small_target_prob, 0.0, 1.0)
        _float_range("clutter", self.clutter, 0.0, 1.0)
        _float_range("text_prob", self.text_prob, 0.0, 1.0)
        object.__setattr__(self, "text_kinds", tuple(self.text_kinds))  # a YAML list too
        bad = [k for k in self.text_kinds if k not in TEXT_KINDS]
        if not self.text_kinds or bad:
            raise ValueError(f"world.text_kinds: {list(self.text_kinds)}; allowed values: a non-empty list of "
                             f"{list(TEXT_KINDS)}")
        _int_range("font_px", self.font_px, 12, max(12, s // 4))
        _int_range("small_font_px", self.small_font_px, 12, self.font_px)
        _int_range("object_gap_px", self.object_gap_px, 0, s // 8)
        _int_range("placement_tries", self.placement_tries, 1, 10_000)

    @classmethod
    def for_size(cls, image_size: int, **overrides: object) -> WorldConfig:
        """The default world rescaled to `image_size` (fonts never below 12 px), plus overrides."""
        base = cls()
        k = image_size / base.image_size
        scaled: dict[str, object] = {
            "image_size": image_size,
            "min_object_px": max(6, round(base.min_object_px * k)),
            "max_object_px": max(8, round(base.max_object_px * k)),
            "small_target_px": max(4, round(base.small_target_px * k)),
            "font_px": max(12, round(base.font_px * k)),
            "small_font_px": max(12, round(base.small_font_px * k)),
            "object_gap_px": max(1, round(base.object_gap_px * k)),
        }
        scaled.update(overrides)
        return cls(**scaled)  # type: ignore[arg-type]


def _int_range(name: str, value: object, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"WorldConfig.{name} must be an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"WorldConfig.{name} must be in [{lo}, {hi}], got {value}")


def _float_range(name: str, value: object, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"WorldConfig.{name} must be a number in [{lo}, {hi}], got {value!r}")
    if not lo <= float(value) <= hi:
        raise ValueError(f"WorldConfig.{name} must be in [{lo}, {hi}], got {value}")
