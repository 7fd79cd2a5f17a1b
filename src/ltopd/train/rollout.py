"""On-policy rollouts: the student samples its own responses at its visual budget.

The selection made at the rollout's prefill is returned with the responses, so the training
forwards replay exactly the context the student sampled from (implementation-facts.md).
Sampling: temperature 1, top-p 1, top-k off, stop at '</answer>' or after `max_new_tokens`.
The rollouts are data: no gradient flows through sampling. Tokens that stand for visual inputs
(image and video placeholders, their start and end markers) are never sampled: scoring re-reads a
response as part of the input, where such a token would ask for pixels that do not exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.hook import Selection
from ltopd.train.features import ImageFeatures, repeated


@dataclass
class Rollouts:
    records: list[Mapping[str, Any]]  # each question repeated n times, grouped
    responses: list[list[int]]  # sampled ids, the stop token included when it came
    selection: Selection  # the student's kept visual tokens, per image of `records`
    group_size: int

    @property
    def lengths(self) -> list[int]:
        return [len(r) for r in self.responses]


def trim(ids: Sequence[int], stop_ids: Sequence[int], pad_id: int | None) -> list[int]:
    """Ids up to and including the first stop token; padding after an early stop dropped."""
    out: list[int] = []
    for t in ids:
        t = int(t)
        out.append(t)
        if t in stop_ids:
            return out
    while out and pad_id is not None and out[-1] == pad_id and pad_id not in stop_ids:
        out.pop()
    return out


def image_slices(records: Sequence[Mapping[str, Any]], rows: slice) -> slice:
    """The images of ``records[rows]`` in a Selection (images are in row order)."""
    counts = [len(r.get("images") or []) for r in records]
    start = sum(counts[: rows.start or 0])
    return slice(start, start + sum(counts[rows]))


def rows_of(selection: Selection, records: Sequence[Mapping[str, Any]], rows: slice) -> Selection:
    """The part of ``selection`` that belongs to ``records[rows]``."""
    return selection.part(image_slices(records, rows))


def concat(selections: Sequence[Selection]) -> Selection:
    return Selection.concat(selections)


def visual_token_ids(backbone: Backbone) -> list[int]:
    """The ids the model config names for images, videos and their markers (every family names
    them `image_*`, `video_*` or `vision_*` `token_id`/`token_index`)."""
    config = backbone.model.config.to_dict()
    ids = {int(v) for k, v in config.items() if isinstance(v, int) and not isinstance(v, bool)
           and k.endswith(("token_id", "token_index")) and k.startswith(("image", "video", "vision"))}
    return sorted(ids)


@torch.no_grad()
def rollout(backbone: Backbone, records: Sequence[Mapping[str, Any]], n: int, ratio: float, selector: str,
            floor: int, max_new_tokens: int, seed: int, temperature: float = 1.0,
            decode_batch: int | None = None, features: ImageFeatures | None = None) -> Rollouts:
    """``n`` sampled responses per question at keep ``ratio``; deterministic given ``seed``.
    ``decode_batch`` caps the sequences per generate() call (the paper's decode-batch cap).
    ``features``: the records' post-merger features from this backbone (ImageFeatures.of), so
    selection and generation run no vision pass of their own."""
    if n < 1:
        raise ValueError(f"rollouts per question must be >= 1, got {n}")
    reps = [r for r in records for _ in range(n)]
    size = decode_batch or len(reps)
    was_training = backbone.model.training
    backbone.model.eval()
    torch.manual_seed(seed)
    selections, rows = [], []
    record_of = repeated(len(records), n)
    suppress = visual_token_ids(backbone)
    for i, lo in enumerate(range(0, len(reps), size)):
        batch = backbone.encode(reps[lo:lo + size])
        feats = None if features is None else features.rows(record_of[lo:lo + size])
        sel = backbone.select(batch, ratio, selector, floor=floor, seed=seed + i, features=feats)
        ids = backbone.generate(batch, sel, feats, do_sample=True, temperature=temperature, top_p=1.0,
                            top_k=0, max_new_tokens=max_new_tokens, suppress_tokens=suppress)
        selections.append(sel)
        rows.extend(ids)
    backbone.model.train(was_training)
    selection = concat(selections)
    stop, pad = backbone.stop_token_ids(), backbone.tokenizer.pad_token_id
    responses = [trim(row.tolist(), stop, pad) for row in rows]
    empty = [i for i, r in enumerate(responses) if not r]
    for i in empty:  # a zero-length sample cannot be scored; give it the stop token
        responses[i] = [stop[0]]
    return Rollouts(reps, responses, selection, n)
