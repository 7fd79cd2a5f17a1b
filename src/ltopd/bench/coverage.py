"""Evidence coverage: which merged visual tokens hold a benchmark item's evidence, and whether a
selection of kept tokens keeps it (project issue 38, item 1).

Pure functions of a twin record (its ``meta.scene``: object and text boxes, as the world
generator records them) and of the processor's merged-token grid; nothing here runs a model.

* :class:`Grid` maps canvas pixels to merged-token cells. The Qwen-style processor resizes the
  canvas to ``rows x cols`` merged tokens of ``patch * merge`` px each (a uniform scaling), so a
  cell ``(r, c)`` holds the canvas rectangle ``[c W / cols, (c + 1) W / cols) x [r H / rows, ...)``;
  its token index is ``r * cols + c`` (row-major, the order the merger emits and the selectors
  index). A region's cells are those its box overlaps by at least ``min_side`` canvas px along
  both axes (default 2: a one-pixel sliver of a box corner is not evidence).
* :func:`evidence_of` names the answer's evidence per question template: the asked objects'
  boxes, or the text block (or, for documents and tables, the band of the asked line / row,
  given the world's ``small_font_px``). ``Evidence.need`` says whether one region answers
  (``one``: the asked object, or any instance of a present "colour shape") or every region is
  needed (``every``: both objects of a relation, all objects that are counted, all crosses a
  POPE "no" must rule out). Items whose answer has no localised evidence (a count of zero, an
  absent object with no object of its shape, MME) give ``None``.
* :func:`coverage` says whether the evidence survives a selection, three ways:
  ``any`` (some kept cell holds some evidence), ``each`` (the answer's evidence is touched:
  for ``need == "one"`` some region, for ``"every"`` every region has a kept cell; this is
  ``any`` for single-object items) and ``all`` (every cell of the needed regions is kept: for
  ``"one"`` every cell of at least one region).
* :func:`oracle_cells` / :func:`oracle_selection`: the evidence cells cut or topped up to a
  budget of ``k`` tokens: the regions' cells taken round-robin (each region its best-covered
  cell first, then its next), so a cut keeps every region touched before completing any; the
  top-up takes cells from ``fill`` (e.g. the selector's own choice at the same budget) in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ltopd.bench.scoring.common import meta_of
from ltopd.data.world.palette import SHAPES, TINY, plural

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in canvas px (half-open)
NEEDS = ("one", "every")


@dataclass(frozen=True)
class Grid:
    """A canvas of ``width x height`` px seen as ``rows x cols`` merged visual tokens."""

    width: int
    height: int
    rows: int
    cols: int

    def __post_init__(self) -> None:
        if min(self.width, self.height, self.rows, self.cols) < 1:
            raise ValueError(f"grid sizes must be >= 1, got {self}")

    @property
    def n(self) -> int:
        return self.rows * self.cols

    def cell_box(self, index: int) -> Box:
        """The canvas rectangle of token ``index`` (row-major)."""
        if not 0 <= index < self.n:
            raise ValueError(f"token index {index} outside [0, {self.n})")
        r, c = divmod(index, self.cols)
        cw, ch = self.width / self.cols, self.height / self.rows
        return (c * cw, r * ch, (c + 1) * cw, (r + 1) * ch)

    def cells(self, box: Sequence[float], min_side: float = 2.0) -> dict[int, float]:
        """Token index -> overlap area (canvas px^2) of every cell ``box`` overlaps by at least
        ``min_side`` px along both axes."""
        x0, y0, x1, y1 = (float(v) for v in box)
        x0, y0, x1, y1 = max(x0, 0.0), max(y0, 0.0), min(x1, self.width), min(y1, self.height)
        cw, ch = self.width / self.cols, self.height / self.rows
        out: dict[int, float] = {}
        if x1 <= x0 or y1 <= y0:
            return out
        for r in range(int(y0 // ch), min(self.rows, int(y1 // ch) + 1)):
            oy = min(y1, (r + 1) * ch) - max(y0, r * ch)
            if oy < min_side or oy <= 0:
                continue
            for c in range(int(x0 // cw), min(self.cols, int(x1 // cw) + 1)):
                ox = min(x1, (c + 1) * cw) - max(x0, c * cw)
                if ox >= min_side and ox > 0:
                    out[r * self.cols + c] = ox * oy
        return out


@dataclass(frozen=True)
class Region:
    name: str
    box: Box


@dataclass(frozen=True)
class Evidence:
    """Where an item's answer lies: its regions and whether one or every one is needed."""

    regions: tuple[Region, ...]
    need: str = "one"

    def __post_init__(self) -> None:
        if not self.regions:
            raise ValueError("evidence needs at least one region (None stands for 'not localised')")
        if self.need not in NEEDS:
            raise ValueError(f"need must be one of {NEEDS}, got {self.need!r}")


@dataclass(frozen=True)
class Coverage:
    any: bool
    each: bool
    all: bool
    cells: int  # evidence cells (union over the regions)
    kept: int  # of them kept


def region_cells(evidence: Evidence, grid: Grid, min_side: float = 2.0) -> list[dict[int, float]]:
    """Per region: token index -> overlap area."""
    return [grid.cells(r.box, min_side) for r in evidence.regions]


def evidence_cells(evidence: Evidence, grid: Grid, min_side: float = 2.0) -> set[int]:
    return set().union(*(set(c) for c in region_cells(evidence, grid, min_side)))


def coverage(evidence: Evidence, grid: Grid, kept: Iterable[int], min_side: float = 2.0) -> Coverage:
    """Whether ``evidence`` survives the kept token indices (see the module docstring)."""
    keep = {int(i) for i in kept}
    per = [set(c) for c in region_cells(evidence, grid, min_side)]
    per = [c for c in per if c] or [set()]  # a region with no cell (off-canvas) cannot be kept
    touched = [bool(c & keep) for c in per]
    complete = [bool(c) and c <= keep for c in per]
    union = set().union(*per)
    if evidence.need == "one":
        each, full = any(touched), any(complete)
    else:
        each, full = all(touched), all(complete)
    return Coverage(any=any(touched), each=each, all=full, cells=len(union), kept=len(union & keep))


def oracle_cells(evidence: Evidence, grid: Grid, k: int, min_side: float = 2.0) -> list[int]:
    """At most ``k`` evidence cells, round-robin over the regions, each region's cells by
    overlap area (largest first, then token index); a cell shared by regions counts once."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    queues = [sorted(c, key=lambda i, c=c: (-c[i], i)) for c in region_cells(evidence, grid, min_side)]
    out: list[int] = []
    seen: set[int] = set()
    depth = 0
    while len(out) < k and any(depth < len(q) for q in queues):
        for q in queues:
            if depth < len(q) and q[depth] not in seen and len(out) < k:
                out.append(q[depth])
                seen.add(q[depth])
        depth += 1
    return out


def oracle_selection(evidence: Evidence | None, grid: Grid, k: int, fill: Sequence[int] = (),
                     min_side: float = 2.0) -> list[int]:
    """``k`` sorted token indices: the oracle's evidence cells, topped up from ``fill`` in its
    order (cells already taken skipped), then by token index if ``fill`` runs out. ``evidence``
    None (not localised): ``fill`` alone."""
    k = min(k, grid.n)
    chosen = oracle_cells(evidence, grid, k, min_side) if evidence is not None else []
    taken = set(chosen)
    for i in [*fill, *range(grid.n)]:
        if len(chosen) >= k:
            break
        if int(i) not in taken:
            chosen.append(int(i))
            taken.add(int(i))
    return sorted(chosen)


# ---------------------------------------------------------------------------------------------
# Evidence per question template

def _objects(scene: Mapping[str, Any]) -> list[dict]:
    return list(scene.get("objects") or [])


def _name(o: Mapping[str, Any]) -> str:
    return f"{o['color']} {o['shape']}"


def _regions(objs: Iterable[Mapping[str, Any]]) -> tuple[Region, ...]:
    return tuple(Region(_name(o), tuple(float(v) for v in o["bbox"])) for o in objs)


def _named(scene: Mapping[str, Any], *names: str, need: str = "every") -> Evidence | None:
    """The objects called ``names`` (each name once, as the twins' questions use unique names)."""
    objs = []
    for name in names:
        hits = [o for o in _objects(scene) if _name(o) == name]
        if not hits:
            raise ValueError(f"no {name!r} in the scene")
        objs.append(hits[0])
    return Evidence(_regions(objs), need)


def _where(scene: Mapping[str, Any], need: str, **attrs: str) -> Evidence | None:
    objs = [o for o in _objects(scene) if all(o[k] == v for k, v in attrs.items())]
    return Evidence(_regions(objs), need) if objs else None


def _tiny(scene: Mapping[str, Any]) -> dict:
    tiny = [o for o in _objects(scene) if o.get("size_class") == TINY]
    if not tiny:
        raise ValueError("no tiny object in the scene")
    return tiny[0]


def _text_block(scene: Mapping[str, Any]) -> Mapping[str, Any]:
    text = scene.get("text")
    if not text:
        raise ValueError("the scene has no text block")
    return text


def text_line_box(text: Mapping[str, Any], line: int, font_px: int) -> Box:
    """The band of line ``line`` of a document or row ``line`` of a table (row 0: the header),
    the block's full width, from the layout of ``ltopd.data.world.text`` at ``font_px``."""
    x0, y0, x1, y1 = (float(v) for v in text["bbox"])
    px = int(font_px)
    if text["kind"] == "document":
        pad, lead = px // 3, px + px // 4
        top = y0 + pad + line * lead
        return (x0, top, x1, min(y1, top + lead))
    if text["kind"] == "table":
        lead = px + px // 3
        return (x0, y0 + line * lead, x1, min(y1, y0 + (line + 1) * lead))
    raise ValueError(f"no lines in a {text['kind']!r} block")


def _text_rows(scene: Mapping[str, Any], keys: Sequence[str], font_px: int | None) -> Evidence:
    """The lines holding ``keys`` (document field names, or table item words), else the block."""
    text = _text_block(scene)
    whole = Evidence((Region(f"{text['kind']} text", tuple(float(v) for v in text["bbox"])),))
    if font_px is None or text["kind"] not in ("document", "table") or not keys:
        return whole
    lines = [str(s).upper() for s in text.get("lines") or []]
    rows = []
    for key in keys:
        k = key.upper()
        if text["kind"] == "document":
            hits = [i for i, s in enumerate(lines) if s.startswith(k + ":")]
            rows.append(hits[0] if hits else None)
        else:  # cells alternate item, quantity; row 0 is ITEM / QTY
            rows.append(lines.index(k) // 2 if k in lines else None)
    if None in rows:
        return whole
    return Evidence(tuple(Region(f"{text['kind']} line {r}", text_line_box(text, r, font_px)) for r in rows),
                    "every")


_NAME = r"(\w+ \w+)"
_PATTERNS: dict[str, re.Pattern] = {
    "color_of_shape": re.compile(r"What colou?r is the (\w+)\?"),
    "shape_of_color": re.compile(r"What shape is the (\w+) object\?"),
    "exists": re.compile(r"Is there an? (\w+) (\w+) in (?:the|this) image\?"),
    "position": re.compile(rf"Is the {_NAME} to the left of, to the right of, above or below the {_NAME}\?"),
    "gqa_rel": re.compile(rf"Is the {_NAME} to the left or to the right of the {_NAME}\?"),
    "gqa_side": re.compile(rf"On which side of the image is the {_NAME}\?"),
    "where": re.compile(rf"In which part of the image is the {_NAME}\?"),
    "hr_relative": re.compile(rf"Where is the {_NAME} relative to the {_NAME}\?"),
    "count_color": re.compile(r"How many (\w+) objects are there\?"),
    "count_shape": re.compile(r"How many (\w+) are there\?"),
    "doc_key": re.compile(r"What is the (\w+) on the document\?"),
    "table_word": re.compile(r"what is the quantity of (\w+)\?"),
    "table_sum": re.compile(r"combined quantity of (\w+) and (\w+)\?"),
}


def _match(kind: str, question: str) -> tuple[str, ...]:
    m = _PATTERNS[kind].search(question)
    if m is None:
        raise ValueError(f"question {question!r} does not match the {kind} template")
    return m.groups()


def _exists(scene: Mapping[str, Any], color: str, shape: str, answer: str) -> Evidence | None:
    """Present: any instance of the asked object; absent: every object of the asked shape
    (what an evidence-first reply names: their colours), None when there is none."""
    if answer.strip().lower().startswith("yes"):
        return _where(scene, "one", color=color, shape=shape)
    return _where(scene, "every", shape=shape)


def evidence_of(record: Mapping[str, Any], small_font_px: int | None = None,
                answer: str | None = None) -> Evidence | None:
    """The evidence of a twin record (V*Bench, HR-Bench, GQA, POPE, TextVQA, OCRBench, MMMU,
    and the world tasks MMBench asks), from its template, question and scene; None where the
    answer has no localised evidence. ``small_font_px``: the world's small font (documents and
    tables), to narrow their evidence to the asked line; ``answer``: the plain answer where the
    record's is evidence-first. Raises ValueError for a template it does not know."""
    meta = meta_of(dict(record))
    scene = meta.get("scene")
    if not scene:
        raise ValueError(f"record {record.get('id')!r} carries no scene")
    template = str(meta.get("template", ""))
    q = str(record.get("question", ""))
    answer = str(record.get("answer", "") if answer is None else answer)
    if template in ("vstar/color", "hr/color", "hr/shape"):
        return Evidence(_regions([_tiny(scene)]))
    if template == "vstar/side":
        return Evidence(_regions([_tiny(scene)]) + _named(scene, meta["reference"]).regions, "every")
    if template in ("hr/relative",):
        return _named(scene, *_match("hr_relative", q))
    if template == "color/of-shape":
        return _where(scene, "one", shape=_match("color_of_shape", q)[0])
    if template == "shape/of-color":
        return _where(scene, "one", color=_match("shape_of_color", q)[0])
    if template in ("exists/color-shape", "pope/exists"):
        color, shape = _match("exists", q)
        return _exists(scene, color, shape, answer)
    if template in ("position/relative",):
        return _named(scene, *_match("position", q))
    if template == "gqa/rel":
        return _named(scene, *_match("gqa_rel", q))
    if template == "gqa/side":
        return _named(scene, *_match("gqa_side", q))
    if template == "where/quadrant":
        return _named(scene, *_match("where", q))
    if template.startswith("small/"):
        objs = sorted(_objects(scene), key=lambda o: o["size_px"])
        return Evidence(_regions(objs[:1]))
    if template == "count/by-color":
        return _where(scene, "every", color=_match("count_color", q)[0])
    if template == "count/by-shape":
        word = _match("count_shape", q)[0]
        shape = next((s for s in SHAPES if plural(s) == word), None)
        if shape is None:
            raise ValueError(f"{word!r} is no shape's plural")
        return _where(scene, "every", shape=shape)
    if template == "read/document":
        return _text_rows(scene, _match("doc_key", q), small_font_px)
    if template in ("read/table", "ocr/doc-table"):
        return _text_rows(scene, _match("table_word", q), small_font_px)
    if template.startswith("ocr/kie-"):
        return _text_rows(scene, [template.removeprefix("ocr/kie-")], small_font_px)
    if template.startswith(("read/", "ocr/")):
        return _text_rows(scene, [], None)
    if template == "mmmu/table-sum":
        return _text_rows(scene, _match("table_sum", q), small_font_px)
    if template == "mmmu/document-multiple":
        return _text_rows(scene, ["total"], small_font_px)
    if template in ("mmmu/union", "mmmu/difference"):
        return None  # the counted objects are every object of two attribute values: left out
    raise ValueError(f"no evidence rule for template {template!r}")


__all__ = ["Box", "Coverage", "Evidence", "Grid", "Region", "coverage", "evidence_cells", "evidence_of",
           "oracle_cells", "oracle_selection", "region_cells", "text_line_box"]
