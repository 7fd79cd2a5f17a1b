"""DART: duplication-aware selection around pivot tokens.

Pivots are the tokens with the largest L1 norm of their layer K-1 key states: up to
``n_image_pivots`` image tokens and, when ``text_key_states`` is given, up to ``n_text_pivots``
text tokens. Every pivot then claims its quota of the still unclaimed, non-pivot image tokens
that are *least* cosine-similar to it. Kept: the image pivots plus every claimed token.

Details the method leaves open, fixed here:
- budget: exactly ``k``. Image pivots are capped at ``k``; the ``k - #image pivots`` claims are
  split over the P pivots as ``(k - #image pivots) // P``, the first ``remainder`` pivots taking one
  more. Pivot order: image pivots by descending key norm, then text pivots likewise.
- collisions: pivots claim in that order from a shared pool; a claimed token leaves the pool, so
  no two pivots claim the same token and the total is exact (the pool always suffices: it holds
  ``N - #image pivots >= k - #image pivots`` tokens).
- similarity space: image pivots compare on ``hidden_states`` (layer K), falling back to
  ``features``. The interface gives text tokens only as key states, so text pivots compare with
  the image tokens' key states.
- ties (equal norms or similarities) go to the lowest index.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import SelectionInputs, l2_normalise, register, stable_rank


@register(
    "dart",
    frozenset({"key_states"}),
    optional=frozenset({"text_key_states", "hidden_states", "features"}),
)
def dart(inputs: SelectionInputs, k: int, *, n_image_pivots: int = 4, n_text_pivots: int = 4) -> Tensor:
    if n_image_pivots < 0 or n_text_pivots < 0:
        raise ValueError(f"dart: pivot counts must be >= 0, got {n_image_pivots}, {n_text_pivots}")
    keys = inputs.key_states
    assert keys is not None  # guaranteed by the registry
    image_space = l2_normalise(inputs.hidden_states if inputs.hidden_states is not None else inputs.features)
    key_space = l2_normalise(keys)

    image_pivots = stable_rank(keys.abs().sum(dim=1))[: min(n_image_pivots, k)]
    pivot_vectors = [(image_space, image_space[i]) for i in image_pivots.tolist()]
    text = inputs.text_key_states
    if text is not None and text.shape[0] > 0 and n_text_pivots > 0:
        if text.shape[1] != keys.shape[1]:
            raise ValueError(f"dart: text_key_states dim {text.shape[1]} != key_states dim {keys.shape[1]}")
        text_pivots = stable_rank(text.abs().sum(dim=1))[:n_text_pivots]
        pivot_vectors += [(key_space, l2_normalise(text[i])) for i in text_pivots.tolist()]
    if not pivot_vectors:
        raise ValueError("dart: no pivots (n_image_pivots=0 and no text pivots)")

    budget = k - image_pivots.numel()
    base, extra = divmod(budget, len(pivot_vectors))
    claimable = torch.ones(keys.shape[0], dtype=torch.bool, device=keys.device)
    claimable[image_pivots] = False
    kept = [image_pivots]
    for p, (space, pivot) in enumerate(pivot_vectors):
        quota = base + (1 if p < extra else 0)
        if quota == 0:
            continue
        similarity = torch.where(claimable, space @ pivot, space.new_tensor(math.inf))
        claimed = stable_rank(-similarity)[:quota]  # least similar first, lowest index on ties
        claimable[claimed] = False
        kept.append(claimed)
    return torch.cat(kept)
