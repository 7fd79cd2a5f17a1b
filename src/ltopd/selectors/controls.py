"""Controls: a seeded random subset and an evenly spaced (uniform) subset."""

from __future__ import annotations

import torch
from torch import Tensor

from .base import SelectionInputs, register


@register("random", frozenset())
def random_subset(inputs: SelectionInputs, k: int) -> Tensor:
    """``k`` tokens drawn without replacement by a ``torch.Generator`` seeded with ``inputs.seed``."""
    n = inputs.features.shape[0]
    generator = torch.Generator().manual_seed(inputs.seed)
    return torch.randperm(n, generator=generator)[:k]


def evenly_spaced(n: int, k: int) -> Tensor:
    """``k <= n`` distinct positions at the centres of ``k`` equal slices of ``range(n)``."""
    return (torch.arange(k, dtype=torch.float64) + 0.5).mul(n / k).floor().long()


@register("uniform", frozenset())
def uniform(inputs: SelectionInputs, k: int) -> Tensor:
    """Evenly spaced tokens: on the sequence, or on the grid when ``grid_hw`` is given.

    On an ``h x w`` grid: ``rows = max(round(sqrt(k h / w)), ceil(k / w))``, capped at
    ``h`` and ``k``, evenly spaced rows share the ``k`` tokens, the first ``k mod rows`` rows taking one extra;
    each row's tokens are evenly spaced across its ``w`` columns. Always exactly ``k`` tokens.
    """
    n = inputs.features.shape[0]
    if inputs.grid_hw is None:
        return evenly_spaced(n, k)
    h, w = inputs.grid_hw
    rows = min(h, k, max(round((k * h / w) ** 0.5), -(-k // w)))
    kept = []
    for i, row in enumerate(evenly_spaced(h, rows).tolist()):
        count = k // rows + (1 if i < k % rows else 0)
        kept.append(row * w + evenly_spaced(w, count))
    return torch.cat(kept)
