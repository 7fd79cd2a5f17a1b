"""The world's vocabulary of object attributes: named colours, shapes and size classes."""

from __future__ import annotations

# Well separated, saturated colours (pairwise RGB distance > 100); names are the canonical answers.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (205, 20, 35),
    "green": (30, 160, 50),
    "blue": (30, 70, 220),
    "yellow": (240, 225, 0),
    "purple": (135, 40, 185),
    "orange": (245, 115, 0),
    "cyan": (0, 190, 215),
}

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "diamond", "hexagon", "cross")

# Regular objects get one of three size classes; the small target of a large scene is "tiny".
SIZE_CLASSES: tuple[str, ...] = ("small", "medium", "large")
TINY = "tiny"

# Faint clutter is drawn in colours outside the object palette so it is never mistaken for one.
CLUTTER_COLORS: tuple[tuple[int, int, int], ...] = (
    (120, 100, 80),
    (100, 110, 120),
    (150, 140, 110),
    (90, 90, 90),
)

# Neutral light backgrounds: every object colour and the dark text contrast with all of them.
# Channels stay within [MAX_NOISE, 255 - MAX_NOISE] so noise never needs clipping.
MAX_NOISE = 18
BACKGROUNDS: tuple[tuple[int, int, int], ...] = (
    (236, 236, 232),
    (228, 232, 236),
    (236, 233, 224),
    (222, 226, 222),
)

TEXT_COLOR: tuple[int, int, int] = (25, 25, 30)


def plural(shape: str) -> str:
    """English plural of a shape noun ("cross" -> "crosses")."""
    return shape + "es" if shape.endswith(("s", "x", "sh", "ch")) else shape + "s"
