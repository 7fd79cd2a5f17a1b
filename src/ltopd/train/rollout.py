"""On-policy rollouts: the student samples its own responses at its visual budget.

The selection made at the rollout's prefill is returned with the responses, so the training
forwards replay exactly the context the student sampled from (implementation-facts.md).
Sampling: temperature 1, top-p 1, top-k off, stop at '</answer>' or after `max_new_tokens`.
The rollouts are data: no gradient flows through sampling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.hook import Selection


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


@torch.no_grad()
def rollout(backbone: Backbone, records: Sequence[Mapping[str, Any]], n: int, ratio: float, selector: str,
            floor: int, max_new_tokens: int, seed: int, temperature: float = 1.0) -> Rollouts:
    """``n`` sampled responses per question at keep ``ratio``; deterministic given ``seed``."""
    if n < 1:
        raise ValueError(f"rollouts per question must be >= 1, got {n}")
    reps = [r for r in records for _ in range(n)]
    was_training = backbone.model.training
    backbone.model.eval()
    batch = backbone.encode(reps)
    selection = backbone.select(batch, ratio, selector, floor=floor, seed=seed)
    torch.manual_seed(seed)
    ids = backbone.generate(batch, selection, do_sample=True, temperature=temperature, top_p=1.0, top_k=0,
                            max_new_tokens=max_new_tokens)
    backbone.model.train(was_training)
    stop, pad = backbone.stop_token_ids(), backbone.tokenizer.pad_token_id
    responses = [trim(row.tolist(), stop, pad) for row in ids]
    empty = [i for i, r in enumerate(responses) if not r]
    for i in empty:  # a zero-length sample cannot be scored; give it the stop token
        responses[i] = [stop[0]]
    return Rollouts(reps, responses, selection, n)
