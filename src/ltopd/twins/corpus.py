"""The text the twins' tokenizer is learned from: every kind of prompt and answer the pipeline
produces (the four LT-14K styles, every world task, every benchmark twin), rendered the way the
model will see it."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ltopd.data.sources import world_config
from ltopd.data.world import STYLES, TASKS, generate_item, generate_task_item
from ltopd.models.prompt import build_target, render_prompt

CORPUS_SEED = 7_000_001  # outside LT-14K's and the benchmarks' seed spaces


def _texts(rec: dict[str, Any]) -> Iterator[str]:
    yield render_prompt({**rec, "images": []})
    yield build_target(rec, "response")
    yield build_target(rec, "answer")


def corpus(world: dict[str, Any], per_kind: int = 200, benchmarks: tuple[str, ...] = ()) -> Iterator[str]:
    """`per_kind` records of each style, task and benchmark twin, as prompt and target strings."""
    from ltopd.bench.suites import synthetic_records

    cfg = world_config(world)
    for style in STYLES:
        for i in range(per_kind):
            yield from _texts(generate_item(style, i, CORPUS_SEED, cfg))
    for task in TASKS:
        for i in range(per_kind):
            yield from _texts(generate_task_item(task, i, CORPUS_SEED, cfg))
    for name in benchmarks:
        n = per_kind - per_kind % 2  # MME and POPE need pairs
        for rec in synthetic_records(name, max(n, 2), CORPUS_SEED, world):
            yield from _texts(rec)
