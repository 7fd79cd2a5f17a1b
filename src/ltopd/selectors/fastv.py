"""FastV: keep the tokens the last text query attends to most.

``last_query_attention`` is the head-averaged attention of the last query token over the image
span at an early full-attention LM layer (layer K-1, K = 2); the hook reads it, we only rank.
"""

from __future__ import annotations

from torch import Tensor

from .base import SelectionInputs, register, top_indices


@register("fastv", frozenset({"last_query_attention"}))
def fastv(inputs: SelectionInputs, k: int) -> Tensor:
    assert inputs.last_query_attention is not None  # guaranteed by the registry
    return top_indices(inputs.last_query_attention, k)
