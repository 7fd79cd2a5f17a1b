"""Entry points: one record (docs/design.md format) per (style or task, index, seed, cfg).

Each item has its own RNG, derived from (seed, kind, name, style, index) through numpy's
SeedSequence with CRC32 of the strings (stable across processes, unlike hash()), so items are
deterministic and independent of each other and of generation order.
"""

from __future__ import annotations

import json
import zlib

import numpy as np

from .config import WorldConfig
from .render import render_scene
from .scene import Scene, sample_scene
from .styles import STYLES, Style
from .tasks import LETTERS, SCENE_NEEDS, TASKS, TaskNotApplicable

MAX_SCENE_TRIES = 500


def item_rng(seed: int, *parts: str | int) -> np.random.Generator:
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    words = [seed] + [zlib.crc32(p.encode()) if isinstance(p, str) else int(p) for p in parts]
    return np.random.default_rng(np.random.SeedSequence(words))


def _ask(task: str, rng: np.random.Generator, cfg: WorldConfig,
         scene_kwargs: dict) -> tuple[Scene, tuple]:
    """Sample scenes until `task` can be asked about one (deterministic given rng)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(TASKS)}")
    kwargs = {**scene_kwargs, **SCENE_NEEDS.get(task, {})}
    # The task restarts from the same RNG state on every scene, so the answer it draws first
    # (a count, yes/no, a side) stays fixed while scenes are rejected: no acceptance-rate bias.
    task_seed = int(rng.integers(2**63))
    for _ in range(MAX_SCENE_TRIES):
        scene = sample_scene(rng, cfg, **kwargs)
        try:
            return scene, TASKS[task](scene, np.random.default_rng(task_seed))
        except TaskNotApplicable:
            continue
    raise RuntimeError(f"task {task!r} found no suitable scene in {MAX_SCENE_TRIES} tries; "
                       f"the WorldConfig is probably too restrictive (e.g. max_objects)")


def _to_multiple_choice(answer: str, choices: list[str],
                        rng: np.random.Generator) -> tuple[list[str], str]:
    """Correct answer at a uniformly random letter among up to 3 random distractors."""
    others = [c for c in choices if c != answer]
    k = min(4, len(choices))
    picked = [others[int(i)] for i in rng.choice(len(others), size=k - 1, replace=False)]
    slot = int(rng.integers(k))
    options = picked[:slot] + [answer] + picked[slot:]
    return options, LETTERS[slot]


def _styled(task: str, out: tuple, style: Style | None,
            rng: np.random.Generator) -> tuple[str, list[str], str, str, dict]:
    question, options, answer, response, meta = out
    meta = dict(meta)
    template = meta["template"]
    if style is None:
        meta["template_id"] = f"{template}|plain"
        return question, options, answer, response, meta
    if template in style.questions:
        question = style.questions[template].format(**meta["slots"])
    choices = meta.get("choices") or []
    if not options and len(choices) >= 3 and rng.random() < style.mc_prob:
        meta["open_answer"] = answer
        options, answer = _to_multiple_choice(answer, choices, rng)
    w = int(rng.integers(len(style.wrappers)))
    question = style.wrappers[w].format(q=question)
    meta["template_id"] = f"{template}|{style.name}|w{w}|{'mc' if options else 'open'}"
    return question, options, answer, style.respond(task, options, answer, meta), meta


def _record(rid: str, source: str, task: str, scene: Scene, parts: tuple,
            extra: dict) -> dict:
    question, options, answer, response, meta = parts
    meta = {**meta, **extra, "scene": scene.to_dict()}
    return {"id": rid, "source": source, "images": [render_scene(scene)], "question": question,
            "options": list(options), "answer": answer, "response": response, "task": task,
            "meta": json.dumps(meta, sort_keys=True)}


def generate_task_item(task: str, index: int, seed: int, cfg: WorldConfig,
                       style: str | None = None) -> dict:
    """One record of a given task, phrased in `style` (plain canonical wording when None)."""
    st = _style(style) if style is not None else None
    rng = item_rng(seed, "task", task, style or "", index)
    scene, out = _ask(task, rng, cfg, st.scene_kwargs if st else {})
    parts = _styled(task, out, st, rng)
    rid = f"{task}-{index:06d}" if style is None else f"{style}-{task}-{index:06d}"
    return _record(rid, style or "world", task, scene, parts,
                   {"seed": seed, "index": index, "style": style})


def generate_item(style: str, index: int, seed: int, cfg: WorldConfig) -> dict:
    """One record of an LT-14K source style: the style picks the task, then phrases it."""
    st = _style(style)
    rng = item_rng(seed, "style", style, index)
    task = st.pick_task(rng)
    scene, out = _ask(task, rng, cfg, st.scene_kwargs)
    parts = _styled(task, out, st, rng)
    return _record(f"{style}-{index:06d}", style, task, scene, parts,
                   {"seed": seed, "index": index, "style": style})


def generate_items(style: str, n: int, seed: int, cfg: WorldConfig, start: int = 0) -> list[dict]:
    return [generate_item(style, i, seed, cfg) for i in range(start, start + n)]


def _style(name: str) -> Style:
    if name not in STYLES:
        raise ValueError(f"unknown style {name!r}; expected one of {sorted(STYLES)}")
    return STYLES[name]
