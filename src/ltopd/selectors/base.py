"""Shared pieces of the visual-token selectors: inputs, the registry, validation, tie-breaking.

Conventions every selector follows:
- pure function of (inputs, k, **options); computes in FP32 under ``torch.no_grad()`` on
  detached copies, so callers' graphs and dtypes are never touched;
- returns ``min(k, N)`` unique indices, sorted ascending, as a CPU-independent LongTensor on the
  device of ``features``;
- ties are broken towards the lowest token index. Rankings use a *stable* descending sort
  (``torch.argsort(..., stable=True)``), which keeps equal scores in index order; greedy picks use
  ``torch.argmax``, which is documented to return the first maximal index. (``torch.topk`` gives
  no such guarantee and is not used.)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import wraps
from typing import Protocol

import torch
from torch import Tensor


@dataclass
class SelectionInputs:
    """Everything a selector may read for ONE image (N merged visual tokens)."""

    features: Tensor  # (N, D) post-merger visual embeddings
    query: Tensor | None = None  # (D,) mean LM input embedding of question + option tokens
    last_query_attention: Tensor | None = None  # (N,) last text query -> image, head-averaged
    key_states: Tensor | None = None  # (N, Dk) image key states at LM layer K-1
    text_key_states: Tensor | None = None  # (T, Dk) text key states at that layer
    hidden_states: Tensor | None = None  # (N, D') image hidden states at layer K
    encoder_attention_object: Tensor | None = None  # (N,) at a middle "object" encoder layer
    encoder_attention_output: Tensor | None = None  # (N,) at the encoder output layer
    grid_hw: tuple[int, int] | None = None  # merged-token grid (h, w), row-major
    seed: int = 0  # for the random control


class Selector(Protocol):
    def __call__(self, inputs: SelectionInputs, k: int, **options: object) -> Tensor: ...


SELECTORS: dict[str, Selector] = {}
_REQUIREMENTS: dict[str, frozenset[str]] = {}

# Per-token fields: when given, their first dimension must equal N.
_PER_TOKEN_FIELDS = (
    "last_query_attention",
    "key_states",
    "hidden_states",
    "encoder_attention_object",
    "encoder_attention_output",
)
_FIELD_NDIM = {
    "features": 2,
    "query": 1,
    "last_query_attention": 1,
    "key_states": 2,
    "text_key_states": 2,
    "hidden_states": 2,
    "encoder_attention_object": 1,
    "encoder_attention_output": 1,
}
_FIELD_NAMES = frozenset(f.name for f in fields(SelectionInputs))


def keep_count(n: int, ratio: float, floor: int) -> int:
    """Tokens kept out of ``n`` at keep ``ratio``: ``min(n, max(floor, ceil(n * ratio)))``.

    The product is rounded to 9 decimals before the ceiling so that float noise
    (e.g. ``100 * 0.07 == 7.000000000000001``) does not add a token.
    """
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"keep_count: ratio={ratio!r} must lie in (0, 1]")
    if floor < 1:
        raise ValueError(f"keep_count: floor={floor!r} must be >= 1")
    if n < 0:
        raise ValueError(f"keep_count: n={n!r} must be >= 0")
    return min(n, max(floor, math.ceil(round(n * ratio, 9))))


def requirements(name: str) -> frozenset[str]:
    """The SelectionInputs fields selector ``name`` cannot run without."""
    _check_name(name)
    return _REQUIREMENTS[name]


def select(name: str, inputs: SelectionInputs, k: int, **options: object) -> Tensor:
    """Run selector ``name``: sorted unique kept indices, length ``min(k, N)``."""
    _check_name(name)
    return SELECTORS[name](inputs, k, **options)


def register(
    name: str, needs: frozenset[str], *, optional: frozenset[str] = frozenset(), listed: bool = True
) -> Callable[[Callable[..., Tensor]], Selector]:
    """Wrap a selector core ``fn(inputs, k, **options)``; add it to SELECTORS when ``listed``.

    ``needs`` must be given; ``optional`` fields are read when present. Only these are checked for
    NaN/inf (a full pass over large tensors); every given field is shape-checked.

    The wrapper validates ``k`` and the inputs, hands the core detached FP32 tensors (which it never writes to) with
    ``1 <= k < N`` under ``torch.no_grad()`` (``k >= N`` keeps everything without calling it),
    and checks the core's answer is ``k`` sorted unique in-range indices.
    """
    unknown = (needs | optional) - _FIELD_NAMES
    if unknown:
        raise ValueError(f"selector {name!r}: unknown requirement fields {sorted(unknown)}")

    def decorate(core: Callable[..., Tensor]) -> Selector:
        @wraps(core)
        def run(inputs: SelectionInputs, k: int, **options: object) -> Tensor:
            if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
                raise ValueError(f"selector {name!r}: k={k!r} must be an integer >= 1")
            k = int(k)
            prepared = _prepare(name, inputs, needs, needs | optional)
            n = prepared.features.shape[0]
            device = prepared.features.device
            if k >= n:
                return torch.arange(n, dtype=torch.long, device=device)
            with torch.no_grad():
                kept = core(prepared, k, **options)
            kept = torch.sort(kept.to(device=device, dtype=torch.long)).values
            if kept.numel() != k or (kept[1:] == kept[:-1]).any() or kept[0] < 0 or kept[-1] >= n:
                raise RuntimeError(f"selector {name!r} returned an invalid index set")
            return kept

        if listed:
            SELECTORS[name] = run
            _REQUIREMENTS[name] = needs
        return run

    return decorate


def stable_rank(scores: Tensor) -> Tensor:
    """Indices ordered by descending score, equal scores in ascending index order."""
    return torch.argsort(scores, descending=True, stable=True)


def top_indices(scores: Tensor, k: int) -> Tensor:
    """The ``k`` highest-scoring indices (lowest index wins ties), sorted ascending."""
    return torch.sort(stable_rank(scores)[:k]).values


def l2_normalise(x: Tensor, eps: float = 1e-6) -> Tensor:
    """Row-wise ``x / max(||x||, eps)`` (zero rows stay zero)."""
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def _check_name(name: str) -> None:
    if name not in SELECTORS:
        raise ValueError(f"unknown selector {name!r}; known: {sorted(SELECTORS)}")


def _prepare(name: str, inputs: SelectionInputs, needs: frozenset[str], reads: frozenset[str]) -> SelectionInputs:
    """Validate shapes/presence and return detached FP32 copies of the tensor fields."""
    missing = sorted(f for f in needs if getattr(inputs, f) is None)
    if missing:
        raise ValueError(f"selector {name!r} needs SelectionInputs.{missing[0]}, which is None")
    if not isinstance(inputs.features, Tensor) or inputs.features.ndim != 2:
        raise ValueError(f"selector {name!r}: features must be an (N, D) tensor")
    n = inputs.features.shape[0]
    if n < 1:
        raise ValueError(f"selector {name!r}: features has no tokens")
    values: dict[str, object] = {}
    for field in fields(SelectionInputs):
        value = getattr(inputs, field.name)
        if isinstance(value, Tensor):
            _check_tensor(name, field.name, value, n, finite=field.name in reads)
            value = value.detach().to(torch.float32)
        values[field.name] = value
    if inputs.grid_hw is not None:
        h, w = inputs.grid_hw
        if h < 1 or w < 1 or h * w != n:
            raise ValueError(f"selector {name!r}: grid_hw={inputs.grid_hw} does not hold N={n} tokens")
    return SelectionInputs(**values)  # type: ignore[arg-type]


def _check_tensor(name: str, field: str, value: Tensor, n: int, *, finite: bool) -> None:
    if value.ndim != _FIELD_NDIM[field]:
        raise ValueError(f"selector {name!r}: {field} must have {_FIELD_NDIM[field]} dims, got {tuple(value.shape)}")
    if field in _PER_TOKEN_FIELDS and value.shape[0] != n:
        raise ValueError(f"selector {name!r}: {field} has {value.shape[0]} rows, features has {n}")
    if finite and not torch.isfinite(value).all():
        raise ValueError(f"selector {name!r}: {field} contains NaN or inf")
