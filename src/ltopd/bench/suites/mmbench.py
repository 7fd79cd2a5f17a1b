"""MMBench twin with circular evaluation.

Each base question (a world task as multiple choice with 2-4 options, MMBench's range) appears
once per circular rotation of its options: rotation j shows options[j:] + options[:j], so the
answer letter moves from slot s to (s - j) mod k. Records carry ``index`` = base + j * 1_000_000
(VLMEvalKit's convention; the scorer groups by index mod 1e6). ``n`` counts records, so the
option count of the last bases is adjusted to make the groups fill exactly n (n >= 2).
"""

from __future__ import annotations

import numpy as np

from ltopd.data.world import TASKS, WorldConfig, render_scene

from .synthetic import bench_rng, choice_options, draw, letter, make_record, text_pool

NAME = "mmbench"
GROUP_MODULUS = 1_000_000
# world task -> MMBench ability (l2) name; counting has no MMBench name of its own and sits with
# object localization here.
CATEGORIES = {
    "color": "attribute_recognition",
    "shape": "attribute_recognition",
    "position": "spatial_relationship",
    "where": "object_localization",
    "count": "object_localization",
    "read": "ocr",
}
OPTION_COUNTS = (2, 3, 4)
OPTION_WEIGHTS = (0.2, 0.2, 0.6)


def _option_count(rng: np.random.Generator, remaining: int) -> int:
    if remaining <= 4:
        return remaining
    k = int(rng.choice(OPTION_COUNTS, p=OPTION_WEIGHTS))
    return k - 1 if remaining - k == 1 else k  # never leave a single record over


def base_question(base: int, seed: int, cfg: WorldConfig, k: int) -> tuple:
    """(image, question, options, answer slot, task, template) of base question ``base``."""
    rng = bench_rng(NAME, seed, base)
    tasks = list(CATEGORIES)
    task = tasks[int(rng.integers(len(tasks)))]
    scene, (q, _, answer, _, meta) = draw(rng, cfg, lambda sc, trng: TASKS[task](sc, trng))
    pool = meta["choices"] or text_pool(answer, rng)
    options, ans = choice_options(answer, pool, rng, k=k)
    return render_scene(scene), q, options, ord(ans) - ord("A"), task, meta["template"]


def rotations(options: list[str], slot: int) -> list[tuple[list[str], str]]:
    """Every circular shift of the options with its answer letter."""
    k = len(options)
    return [(options[j:] + options[:j], letter((slot - j) % k)) for j in range(k)]


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    if n == 1:
        raise ValueError("mmbench: n must be 0 or >= 2 (a base question comes with >= 2 rotations)")
    records: list[dict] = []
    base = 0
    while len(records) < n:
        k = _option_count(bench_rng(NAME, seed, base, "k"), n - len(records))
        image, q, options, slot, task, template = base_question(base, seed, cfg, k)
        for j, (opts, ans) in enumerate(rotations(options, slot)):
            index = base + j * GROUP_MODULUS
            records.append(make_record(
                NAME, f"{base:06d}-r{j}", [image], q, opts, ans, task,
                {"template": template, "index": index, "category": CATEGORIES[task],
                 "l2-category": CATEGORIES[task], "rotation": j}))
        base += 1
    return records
