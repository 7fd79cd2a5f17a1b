"""Shared machinery of the synthetic benchmark twins: seeds, scene search, options, records.

Seed space. Every twin item draws from ``item_rng(bench_seed(name, seed), "bench", name, index,
...)``. ``bench_seed`` puts CRC32("ltopd-eval/<name>") above bit 40 of the user seed, so
(a) two benchmarks with the same seed get different streams, (b) no evaluation seed equals an
LT-14K source seed (20260824 / 20260830: every derived seed is >= 2**40), and (c) the entropy
words start ``(derived, "bench", ...)`` where LT-14K's start ``(seed, "style", ...)`` and
``generate_task_item``'s ``(seed, "task", ...)``, so no twin scene repeats a training scene.
Benchmark-specific fields (``category``, ``split``, ``answers``, ...) live in ``meta``, which
the scorers read through ``field`` (top level or meta), keeping the design.md record schema.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import numpy as np

from ltopd.data.world import (
    WORDS,
    Obj,
    Scene,
    TaskNotApplicable,
    TextBlock,
    WorldConfig,
    item_rng,
    sample_scene,
    text_mask,
)
from ltopd.data.world.palette import TEXT_COLOR

TRAIN_SEEDS = (20260824, 20260830)  # LT-14K source seeds the evaluation space must avoid
MAX_SCENE_TRIES = 500
PAPER = (252, 250, 243)
T = TypeVar("T")


def bench_seed(name: str, seed: int) -> int:
    """The evaluation seed of benchmark ``name`` for user ``seed`` (see the module docstring)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**40:
        raise ValueError(f"{name}: seed must be an integer in [0, 2**40), got {seed!r}")
    return ((zlib.crc32(f"ltopd-eval/{name}".encode()) | 1) << 40) + seed


def bench_rng(name: str, seed: int, index: int, *parts: str | int) -> np.random.Generator:
    return item_rng(bench_seed(name, seed), "bench", name, index, *parts)


def draw(rng: np.random.Generator, cfg: WorldConfig,
         build: Callable[[Scene, np.random.Generator], T],
         **scene_kwargs: object) -> tuple[Scene, T]:
    """Sample scenes until ``build(scene, task_rng)`` accepts one (it raises TaskNotApplicable).

    ``task_rng`` restarts from the same state for every scene, so an answer drawn first inside
    ``build`` (a side, a count) stays fixed while scenes are rejected: no acceptance bias.
    """
    task_seed = int(rng.integers(2**63))
    for _ in range(MAX_SCENE_TRIES):
        scene = sample_scene(rng, cfg, **scene_kwargs)  # type: ignore[arg-type]
        try:
            return scene, build(scene, np.random.default_rng(task_seed))
        except TaskNotApplicable:
            continue
    raise RuntimeError(f"no suitable scene in {MAX_SCENE_TRIES} tries; the world config is "
                       f"probably too restrictive (e.g. max_objects, image_size)")


def pick(rng: np.random.Generator, seq: list[T] | tuple[T, ...]) -> T:
    if not seq:
        raise TaskNotApplicable
    return seq[int(rng.integers(len(seq)))]


def with_article(phrase: str) -> str:
    """``phrase`` with its indefinite article ("an orange star", "a red circle")."""
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def letter(i: int) -> str:
    return chr(ord("A") + i)


def choice_options(answer: str, pool: list[str], rng: np.random.Generator,
                   k: int = 4) -> tuple[list[str], str]:
    """``k`` options: the answer at a uniformly random slot among distractors drawn from
    ``pool`` (answer excluded, duplicates removed). Returns (options, answer letter)."""
    others = sorted({p for p in pool if p != answer})
    k = min(k, len(others) + 1)
    if k < 2:
        raise ValueError(f"no distractors for answer {answer!r}")
    picked = [others[int(i)] for i in rng.choice(len(others), size=k - 1, replace=False)]
    slot = int(rng.integers(k))
    return picked[:slot] + [answer] + picked[slot:], letter(slot)


def numeric_options(value: int, rng: np.random.Generator, k: int = 4,
                    low: int = 0) -> tuple[list[str], str]:
    """``k`` consecutive integers around ``value`` with its rank among them uniform (clipped
    at ``low``), shown in random order: neither the middle nor the extremes give it away."""
    start = max(low, value - int(rng.integers(k)))
    return choice_options(str(value), [str(start + j) for j in range(k)], rng, k=k)


def text_pool(value: str, rng: np.random.Generator, n: int = 8) -> list[str]:
    """Distractors of the same kind as a read answer: other words, numbers, dates."""
    if value in WORDS:
        return [w for w in WORDS if w != value]
    if value.isdigit():
        lo, hi = 10 ** (len(value) - 1), 10 ** len(value)
        return [str(int(v)) for v in rng.integers(max(1, lo), hi, size=n)]
    if len(value) == 10 and value[4] == "-":  # yyyy-mm-dd
        y, m, d = (int(p) for p in value.split("-"))
        return [f"{y + dy:04d}-{(m + dm - 1) % 12 + 1:02d}-{d:02d}"
                for dy, dm in ((1, 0), (-1, 0), (0, 1), (0, 3), (2, 2), (-2, 5))]
    raise ValueError(f"no distractor family for read answer {value!r}")


def text_block(lines: list[str], px: int, kind: str, fields: dict[str, str]) -> TextBlock:
    """A paper panel holding ``lines`` of text (any characters the font has) at ``px``."""
    pad, lead = px // 3, px + px // 4
    widths = [text_mask(line, px).width for line in lines]
    cells = tuple((line, pad, pad + i * lead) for i, line in enumerate(lines))
    height = 2 * pad + lead * (len(lines) - 1) + text_mask("Hg", px).height
    return TextBlock(kind, cells, max(widths) + 2 * pad, height, px, tuple(fields.items()),
                     ink=TEXT_COLOR, panel=PAPER)


def with_text(scene: Scene, block: TextBlock, rng: np.random.Generator, gap: int) -> Scene:
    """``scene`` with ``block`` at a random spot; objects it would touch are removed."""
    s = scene.image_size
    if block.width + 2 * gap > s or block.height + 2 * gap > s:
        raise ValueError(f"a {block.width}x{block.height} px {block.kind} block does not fit a "
                         f"{s} px canvas; raise image_size or lower font_px / small_font_px")
    x = int(rng.integers(gap, s - gap - block.width + 1))
    y = int(rng.integers(gap, s - gap - block.height + 1))
    placed = block.at(x, y)
    x0, y0, x1, y1 = placed.bbox
    keep = tuple(o for o in scene.objects
                 if o.bbox[2] + gap <= x0 or x1 + gap <= o.bbox[0]
                 or o.bbox[3] + gap <= y0 or y1 + gap <= o.bbox[1])
    return replace(scene, objects=keep, text=placed)


def moved(obj: Obj, dx: int, dy: int) -> Obj:
    return replace(obj, cx=obj.cx + dx, cy=obj.cy + dy)


def make_record(name: str, rid: str, images: list, question: str, options: list[str],
                answer: str, task: str, meta: dict, response: str | None = None) -> dict:
    """A design.md record; ``meta`` must hold ``template`` (the blind-baseline group key)."""
    if "template" not in meta:
        raise ValueError("meta needs a 'template'")
    return {"id": f"{name}-{rid}", "source": name, "images": list(images), "question": question,
            "options": list(options), "answer": answer,
            "response": response if response is not None else answer, "task": task,
            "meta": json.dumps({"benchmark": name, **meta}, sort_keys=True)}

