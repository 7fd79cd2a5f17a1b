"""DivPrune: greedy max-min diversity under the cosine distance ``1 - cos`` of the features.

First pick: the token whose distance to its nearest *other* token is largest. Each next pick
maximises its minimum distance to the picked set. Ties go to the lowest index (``argmax``).
The first step's nearest-neighbour distances are computed in row blocks, so peak memory stays
``O(block * N)`` instead of ``N x N``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import SelectionInputs, l2_normalise, register

_BLOCK_ELEMENTS = 1 << 24  # ~64 MB of FP32 similarities per block


def nearest_other_distance(v: Tensor) -> Tensor:
    """For unit rows ``v``: ``min_{j != i} (1 - v_i . v_j)`` for every ``i`` (N >= 2)."""
    n = v.shape[0]
    block = max(1, _BLOCK_ELEMENTS // n)
    out = torch.empty(n, dtype=v.dtype, device=v.device)
    for start in range(0, n, block):
        stop = min(n, start + block)
        dist = 1.0 - v[start:stop] @ v.T
        rows = torch.arange(stop - start, device=v.device)
        dist[rows, rows + start] = math.inf  # exclude the token itself
        out[start:stop] = dist.min(dim=1).values
    return out


@register("divprune", frozenset({"features"}))
def divprune(inputs: SelectionInputs, k: int) -> Tensor:
    v = l2_normalise(inputs.features)
    n = v.shape[0]
    picks = torch.empty(k, dtype=torch.long, device=v.device)
    picks[0] = torch.argmax(nearest_other_distance(v))
    available = torch.ones(n, dtype=torch.bool, device=v.device)
    available[picks[0]] = False
    min_dist = torch.full((n,), math.inf, dtype=v.dtype, device=v.device)
    neg_inf = v.new_tensor(-math.inf)
    for t in range(1, k):
        min_dist = torch.minimum(min_dist, 1.0 - v @ v[picks[t - 1]])
        j = torch.argmax(torch.where(available, min_dist, neg_inf))
        picks[t] = j
        available[j] = False
    return picks
