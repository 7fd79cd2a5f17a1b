"""Evaluation: a backbone at one or several (selector, budget) settings on one benchmark ->
predictions + metrics per setting.

The protocol is the paper's (Appendix D, ltopd.models.prompt): system message, images before
text, the empty-think + open-answer prefix, greedy decoding that stops at '</answer>' or at the
benchmark's generation cap. Scoring is the benchmark's official scorer (ltopd.bench.scoring).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ltopd.bench.scoring import check_predictions, score
from ltopd.bench.suites import SUITES
from ltopd.models.backbone import Backbone
from ltopd.models.inference import Setting, predict_settings

# Record fields copied into each prediction row, so the row alone can be re-scored
# (`ltopd score --predictions`), without the images.
ROW_FIELDS = ("id", "source", "question", "options", "answer", "task", "meta")
# Meta keys a row leaves in the record set: a twin's drawn scene (about 1.3 KB of a 1.45 KB GQA
# row) is read by no scorer, and every setting's row would repeat it (the default run's
# predictions and their MLflow copies were 1 GB, mostly scenes).
RECORD_ONLY_META = ("scene",)
END_OF_TURN = "<|im_end|>"


def clean(generated: str) -> str:
    """The generated text up to the end of the turn (the answer tags are left to the scorer)."""
    return generated.split(END_OF_TURN, 1)[0]


def row_meta(meta: Any) -> Any:
    """A record's meta as its prediction rows carry it: without RECORD_ONLY_META's keys; a meta
    that has none of them (a real benchmark's, or none) is returned as it is."""
    parsed = json.loads(meta) if isinstance(meta, str) and meta.startswith("{") else meta
    if not isinstance(parsed, dict) or not any(k in parsed for k in RECORD_ONLY_META):
        return meta
    kept = {k: v for k, v in parsed.items() if k not in RECORD_ONLY_META}
    return json.dumps(kept, ensure_ascii=False) if isinstance(meta, str) else kept


def evaluate(backbone: Backbone, records: Sequence[dict[str, Any]], benchmark: str, ratio: float,
             selector: str | None, floor: int, batch_size: int = 32, seed: int = 0,
             progress: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(prediction rows, metrics). ``ratio`` 1 keeps every visual token; below 1, ``selector``
    keeps ``max(floor, ceil(N * ratio))`` of each image's N tokens."""
    return evaluate_settings(backbone, records, benchmark, [(ratio, selector)], floor, batch_size, seed, progress)[0]


def evaluate_settings(backbone: Backbone, records: Sequence[dict[str, Any]], benchmark: str,
                      settings: Sequence[Setting], floor: int, batch_size: int = 32, seed: int = 0,
                      progress: bool = True) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """`evaluate` for several (ratio, selector) settings from one vision pass per batch
    (ltopd.models.inference.predict_settings): the same rows as evaluating each alone. Each
    setting's wall_s is its share of the pass (the pass's time over the settings it served)."""
    if benchmark not in SUITES:
        raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(SUITES))}")
    if not records:
        raise ValueError(f"{benchmark}: no records to evaluate")
    start = time.perf_counter()
    counts = [[0, 0] for _ in settings]
    per_setting = predict_settings(backbone, records, settings, floor, batch_size,
                                   max_new_tokens=SUITES[benchmark].generation_cap, seed=seed,
                                   progress=progress, desc=f"{benchmark} x{len(settings)}" if len(settings) > 1
                                   else f"{benchmark} r={settings[0][0]:g}", counts=counts)
    wall = time.perf_counter() - start
    fields = [row_fields(rec) for rec in records]  # once for every setting of the pass
    by_id = {r["id"]: r for r in records}
    return [_scored(fields, by_id, benchmark, gens, wall / len(settings), settings=len(settings), tokens=tokens)
            for gens, tokens in zip(per_setting, counts)]


def row_fields(record: dict[str, Any]) -> dict[str, Any]:
    """What a prediction row carries of its record: ROW_FIELDS, the meta without RECORD_ONLY_META."""
    return {k: row_meta(record.get(k)) if k == "meta" else record.get(k) for k in ROW_FIELDS}


def _scored(fields: Sequence[dict[str, Any]], by_id: dict[str, dict[str, Any]], benchmark: str,
            generations: Sequence[str], wall: float, settings: int,
            tokens: Sequence[int]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = [{**f, "prediction": clean(gen)} for f, gen in zip(fields, generations, strict=True)]
    check_predictions(by_id, rows)
    metrics = score(benchmark, rows)
    metrics.update(wall_s=round(wall, 3), questions_per_s=round(len(rows) / wall, 2), settings_per_pass=settings)
    # the visual tokens the language model saw, and those the images had (the kept fraction)
    metrics.update(kept_tokens=int(tokens[0]), visual_tokens=int(tokens[1]))
    return rows, metrics
