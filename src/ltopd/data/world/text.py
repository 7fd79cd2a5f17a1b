"""Rendered text: the word list, text-block layouts (word, number, date, sign, document, table)
and glyph masks from PIL's built-in font.

Text is drawn in capitals, which stay legible at small sizes; answers are the lowercase words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont, features

from .palette import TEXT_COLOR

WORDS: tuple[str, ...] = (
    "apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "rocket",
    "garden", "window", "candle", "forest", "bridge", "castle", "pencil", "orbit",
    "harbor", "meadow", "silver", "planet", "violin", "anchor", "market", "summit",
    "falcon", "ember", "glacier", "lantern", "mosaic", "puzzle", "quartz", "saddle",
    "timber", "velvet", "walnut", "zebra", "basket", "copper", "dragon", "island",
)
TEXT_KINDS: tuple[str, ...] = ("word", "number", "date", "sign", "document", "table")
DOC_FIELDS: tuple[str, ...] = ("name", "date", "total")

WHITE = (250, 250, 250)
PAPER = (252, 250, 243)
SIGN_PANELS: tuple[tuple[int, int, int], ...] = ((35, 55, 45), (35, 40, 85), (70, 35, 35))
RULE_COLOR = (90, 90, 90)


@dataclass(frozen=True)
class TextBlock:
    """One text element: cells of text at offsets from the block's top-left corner (x, y).

    `fields` are the readable facts ("text" for single strings, document fields, table
    quantities keyed "qty:<word>"); they are what `read` questions ask about.
    """

    kind: str
    cells: tuple[tuple[str, int, int], ...]
    width: int
    height: int
    font_px: int
    fields: tuple[tuple[str, str], ...]
    ink: tuple[int, int, int] = TEXT_COLOR
    panel: tuple[int, int, int] | None = None
    rules: tuple[tuple[int, int, int, int], ...] = ()  # relative line segments (table grid)
    x: int = 0
    y: int = 0

    @property
    def bbox(self) -> tuple[int, int, int, int]:
        return (self.x, self.y, self.x + self.width, self.y + self.height)

    def at(self, x: int, y: int) -> TextBlock:
        return replace(self, x=x, y=y)


def has_freetype() -> bool:
    return bool(features.check("freetype2"))


@lru_cache(maxsize=4096)
def text_mask(text: str, px: int, freetype: bool | None = None) -> Image.Image:
    """Greyscale ink mask of one line of text at nominal size `px` (capitals ~0.7 px tall).
    Cached and shared: callers must not modify it.

    Without FreeType the fixed bitmap font is drawn and scaled up by an integer factor so
    capitals reach the same height.
    """
    use_ft = has_freetype() if freetype is None else freetype
    if use_ft:
        font = _freetype_font(px)
        ascent, descent = font.getmetrics()
        width = max(1, math.ceil(font.getlength(text)))
        mask = Image.new("L", (width, ascent + descent), 0)
        ImageDraw.Draw(mask).text((0, 0), text, font=font, fill=255)
        return mask
    font = ImageFont.load_default_imagefont()
    w, h = _bitmap_size(font, text)
    mask = Image.new("L", (max(1, w), h), 0)
    ImageDraw.Draw(mask).text((0, 0), text, font=font, fill=255)
    k = max(1, round(0.7 * px / _bitmap_cap_height()))
    return mask.resize((mask.width * k, mask.height * k), Image.Resampling.NEAREST)


@lru_cache(maxsize=64)
def _freetype_font(px: int) -> ImageFont.FreeTypeFont:
    font = ImageFont.load_default(size=px)
    assert isinstance(font, ImageFont.FreeTypeFont)
    return font


def _bitmap_size(font: ImageFont.ImageFont, text: str) -> tuple[int, int]:
    """Width and a fixed line height (the bitmap font's 11 px cell), so lines align."""
    _, _, x1, y1 = font.getbbox(text)
    return x1, max(y1, 11)


@lru_cache(maxsize=1)
def _bitmap_cap_height() -> int:
    font = ImageFont.load_default_imagefont()
    m = font.getmask("H")
    ink = np.asarray(m).reshape(m.size[1], m.size[0]).max(axis=1) > 0
    rows = np.flatnonzero(ink)
    return int(rows[-1] - rows[0] + 1)


def text_size(text: str, px: int) -> tuple[int, int]:
    m = text_mask(text, px)
    return m.width, m.height


def _word(rng: np.random.Generator) -> str:
    return WORDS[int(rng.integers(len(WORDS)))]


def _number(rng: np.random.Generator) -> str:
    digits = int(rng.integers(2, 5))
    return str(int(rng.integers(10 ** (digits - 1), 10**digits)))


def _date(rng: np.random.Generator) -> str:
    year, month = int(rng.integers(1990, 2031)), int(rng.integers(1, 13))
    return f"{year:04d}-{month:02d}-{int(rng.integers(1, 29)):02d}"


def _single(kind: str, value: str, px: int, panel: tuple[int, int, int] | None) -> TextBlock:
    w, h = text_size(value.upper(), px)
    pad = px // 3 if panel else 0
    ink = WHITE if panel else TEXT_COLOR
    return TextBlock(kind, ((value.upper(), pad, pad),), w + 2 * pad, h + 2 * pad, px,
                     (("text", value),), ink=ink, panel=panel)


def _document(rng: np.random.Generator, px: int) -> TextBlock:
    values = {"name": _word(rng), "date": _date(rng), "total": _number(rng)}
    pad, lead = px // 3, px + px // 4
    cells, width = [], 0
    for i, key in enumerate(DOC_FIELDS):
        line = f"{key.upper()}: {values[key].upper()}"
        cells.append((line, pad, pad + i * lead))
        width = max(width, text_size(line, px)[0])
    height = pad * 2 + lead * (len(DOC_FIELDS) - 1) + text_size("H", px)[1]
    return TextBlock("document", tuple(cells), width + 2 * pad, height, px,
                     tuple(values.items()), panel=PAPER)


def _table(rng: np.random.Generator, px: int) -> TextBlock:
    names = [WORDS[int(i)] for i in rng.choice(len(WORDS), size=3, replace=False)]
    qtys = [str(int(rng.integers(1, 100))) for _ in names]
    rows = [("ITEM", "QTY")] + [(n.upper(), q) for n, q in zip(names, qtys)]
    pad, lead = px // 4, px + px // 3
    col0 = max(text_size(r[0], px)[0] for r in rows) + 2 * pad
    col1 = max(text_size(r[1], px)[0] for r in rows) + 2 * pad
    cells = []
    for i, (a, b) in enumerate(rows):
        cells += [(a, pad, pad + i * lead), (b, col0 + pad, pad + i * lead)]
    width = col0 + col1
    rules = tuple((0, i * lead, width, i * lead) for i in range(len(rows) + 1))
    rules += ((0, 0, 0, lead * len(rows)), (col0, 0, col0, lead * len(rows)),
              (width - 1, 0, width - 1, lead * len(rows)))
    fields = tuple((f"qty:{n}", q) for n, q in zip(names, qtys))
    return TextBlock("table", tuple(cells), width, lead * len(rows) + 1, px, fields,
                     panel=WHITE, rules=rules)


def sample_text_block(rng: np.random.Generator, font_px: int, small_font_px: int,
                      kind: str | None = None, kinds: tuple[str, ...] = TEXT_KINDS) -> TextBlock:
    """A text element of `kind` (when None, one of `kinds` at random), not yet placed (x = y = 0)."""
    kind = kind or kinds[int(rng.integers(len(kinds)))]
    if kind == "word":
        return _single("word", _word(rng), font_px, None)
    if kind == "number":
        return _single("number", _number(rng), font_px, None)
    if kind == "date":
        return _single("date", _date(rng), small_font_px, None)
    if kind == "sign":
        panel = SIGN_PANELS[int(rng.integers(len(SIGN_PANELS)))]
        return _single("sign", _word(rng), font_px, panel)
    if kind == "document":
        return _document(rng, small_font_px)
    if kind == "table":
        return _table(rng, small_font_px)
    raise ValueError(f"unknown text kind {kind!r}; expected one of {TEXT_KINDS}")
