"""The miniature's vision-encoder pretraining: dense labels on the post-merger token grid.

The paper's backbones start from vision encoders pretrained on billions of images. A twin's
2-layer tower trained from scratch only through the language model learns colour quickly but
shape hardly at all (docs/pretraining.md: after 4,300 updates the single-object shape question
was still at chance), and most benchmark questions name a shape. A `dense` pretraining stage
labels every merged-token cell of a scene with the shape and the colour of the object covering it
and with the word a text block writes there (or background), and trains the vision tower and
merger through linear heads that are thrown away afterwards, as segmentation pretraining does.
The language model gets no gradient there.

A `words` stage trains the same heads, but its text head only on the cells a word covers: in a
`dense` stage background outnumbers a word's cells about 15 to 1, and after 1,500 updates on text
scenes a frozen tower still told the 40 words apart at chance (docs/pretraining.md, "Reading").

Every family emits its merged tokens in raster order over the (h, w) grid of the whole canvas
(tested), so a cell's label comes from the scene geometry alone, whatever the canvas size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ltopd.data.world.palette import COLORS, SHAPES
from ltopd.data.world.text import WORDS
from ltopd.models.backbone import Backbone

COLOR_NAMES = tuple(COLORS)
MIN_COVER = 0.25  # an object or text block labels a cell it covers this much of (by bounding box)
WORD_KINDS = ("word", "sign")  # text blocks writing one word of WORDS; other text is one class
OTHER_TEXT = len(WORDS)


class CellLabels(NamedTuple):
    """Per-cell class ids in raster order; each head's last class is background."""

    shape: Tensor  # SHAPES index
    color: Tensor  # COLORS index
    text: Tensor  # WORDS index, OTHER_TEXT for numbers, dates, documents, tables, formulas


CLASSES = CellLabels(len(SHAPES) + 1, len(COLOR_NAMES) + 1, len(WORDS) + 2)  # type: ignore[arg-type]


def _cover(box: Sequence[float], i: int, j: int, ch: float, cw: float) -> float:
    """Fraction of cell (i, j) (ch x cw pixels) inside `box` (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box
    return (max(0.0, min(x1, (j + 1) * cw) - max(x0, j * cw))
            * max(0.0, min(y1, (i + 1) * ch) - max(y0, i * ch)) / (cw * ch))


def cell_labels(scene: Mapping[str, Any], grid_hw: tuple[int, int]) -> CellLabels:
    """Labels of an (h, w) token grid over the scene. Objects: per cell, the object holding the
    largest bounding-box cover (at least MIN_COVER, or full cover when its centre lies in the
    cell, so a small target still labels its cell); later objects win ties (drawn on top).
    Text: cells the text block covers by at least MIN_COVER."""
    h, w = grid_hw
    side = scene["image_size"]
    ch, cw = side / h, side / w
    shapes = torch.full((h, w), CLASSES.shape - 1, dtype=torch.long)
    colors = torch.full((h, w), CLASSES.color - 1, dtype=torch.long)
    text = torch.full((h, w), CLASSES.text - 1, dtype=torch.long)
    best = torch.zeros(h, w)
    for obj in scene["objects"]:
        for i in range(h):
            for j in range(w):
                cover = _cover(obj["bbox"], i, j, ch, cw)
                if j * cw <= obj["cx"] < (j + 1) * cw and i * ch <= obj["cy"] < (i + 1) * ch:
                    cover = 1.0
                if cover >= MIN_COVER and cover >= best[i, j]:
                    best[i, j] = cover
                    shapes[i, j] = SHAPES.index(obj["shape"])
                    colors[i, j] = COLOR_NAMES.index(obj["color"])
    block = scene.get("text")
    if block is not None:
        word = block["fields"].get("text") if block["kind"] in WORD_KINDS else None
        label = WORDS.index(word) if word in WORDS else OTHER_TEXT
        for i in range(h):
            for j in range(w):
                if _cover(block["bbox"], i, j, ch, cw) >= MIN_COVER:
                    text[i, j] = label
    return CellLabels(shapes.flatten(), colors.flatten(), text.flatten())


class DenseHeads(torch.nn.Module):
    """One linear classifier per label kind over post-merger tokens."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.heads = torch.nn.ModuleDict({k: torch.nn.Linear(hidden, n) for k, n in CLASSES._asdict().items()})


def record_scene(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The scene a single-image world record was rendered from (its meta's `scene`)."""
    meta = record.get("meta")
    meta = json.loads(meta) if isinstance(meta, str) else (meta or {})
    if len(record.get("images") or []) != 1 or "scene" not in meta:
        raise ValueError(f"dense stage: record {record.get('id')!r} is not a single-image world item with a scene")
    return meta["scene"]


def batch_cell_labels(backbone: Backbone, batch: Any, records: Sequence[Mapping[str, Any]]) -> list[CellLabels]:
    """Each record's cell labels over the token grid its encoded image gets in `batch`."""
    grids = backbone.ops.grid_hw(backbone.model, batch.inputs)
    return [cell_labels(record_scene(r), g) for r, g in zip(records, grids)]


def dense_loss(backbone: Backbone, records: Sequence[Mapping[str, Any]], heads: DenseHeads,
               words_only: bool = False) -> Tensor:
    """Back-propagate the sum over label kinds of the mean per-cell cross-entropy over the batch's
    tokens; returns it (detached). `words_only`: the text head's term averages over the cells a
    word of WORDS labels only (no term when the batch has none)."""
    batch = backbone.encode(records)
    tokens = torch.cat(list(backbone.image_features(batch)))
    labels = batch_cell_labels(backbone, batch, records)
    loss = torch.zeros((), device=tokens.device)
    for kind, head in heads.heads.items():
        target = torch.cat([getattr(lab, kind) for lab in labels]).to(tokens.device)
        x = tokens
        if words_only and kind == "text":
            on_word = target < len(WORDS)
            if not on_word.any():
                continue
            x, target = tokens[on_word], target[on_word]
        loss = loss + torch.nn.functional.cross_entropy(head(x), target)
    loss.backward()
    return loss.detach()
