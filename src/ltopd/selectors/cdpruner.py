"""CDPruner: conditional DPP over visual tokens, greedy MAP by the fast Cholesky update.

Kernel ``L = diag(r) V V^T diag(r) + 1e-6 I`` with ``V`` the L2-normalised features and ``r`` the
query relevance. The greedy MAP of Chen et al. (2018) keeps, for every candidate ``i``, the squared
Schur complement ``d2[i]`` of ``L`` given the picked set; picking ``argmax d2`` is the same as
picking the candidate that most increases ``logdet L[S, S]``. Each step needs one row of ``L``,
which the matrix-free path computes as one mat-vec ``r_j r * (V v_j)``: memory ``O(N k + N D)``,
the ``N x N`` kernel is never built. ``cdpruner_dense`` builds it (benchmark and tests only).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from .base import SelectionInputs, l2_normalise, register

KERNEL_RIDGE = 1e-6  # the "+ 1e-6 I" that keeps L positive definite
RELEVANCE_FLOOR = 1e-6
DEGENERATE_RANGE = 1e-6


def relevance(
    features: Tensor,
    query: Tensor,
    *,
    negate: bool = False,
    theta: float | None = None,
) -> Tensor:
    """Per-token relevance in ``[1e-6, 1]`` (or its exp-weighting when ``theta`` is given).

    cosine(features, query), min-max normalised and clamped to ``[1e-6, 1]``; all ones when the
    range is ``<= 1e-6``. ``negate`` flips the cosine first (the original LLaVA variant's negated
    CLIP similarity); ``theta`` applies that variant's ``exp(theta / (2 (1 - theta)) r)``.
    """
    if query.shape[-1] != features.shape[-1]:
        raise ValueError(f"cdpruner: query dim {query.shape[-1]} != feature dim {features.shape[-1]}")
    cos = l2_normalise(features) @ l2_normalise(query)
    if negate:
        cos = -cos
    lo, hi = cos.min(), cos.max()
    if hi - lo <= DEGENERATE_RANGE:
        r = torch.ones_like(cos)
    else:
        r = ((cos - lo) / (hi - lo)).clamp(RELEVANCE_FLOOR, 1.0)
    if theta is not None:
        if not 0.0 <= theta < 1.0:
            raise ValueError(f"cdpruner: theta={theta!r} must lie in [0, 1)")
        r = torch.exp(theta / (2.0 * (1.0 - theta)) * r)
    return r


def greedy_map(diag: Tensor, kernel_row: Callable[[int], Tensor], k: int) -> Tensor:
    """Fast greedy DPP MAP (Chen et al. 2018); returns the ``k`` picks in pick order.

    ``diag`` is ``diag(L)``; ``kernel_row(j)`` returns ``L[j, :]``. Ties go to the first index
    (``torch.argmax``). The denominator is clamped at the ridge: in exact arithmetic every Schur
    complement is ``>= lambda_min(L) >= 1e-6``, so the clamp only absorbs FP32 round-off.
    """
    n = diag.shape[0]
    d2 = diag.clone()
    c = diag.new_zeros((k, n))
    available = torch.ones(n, dtype=torch.bool, device=diag.device)
    picks = torch.empty(k, dtype=torch.long, device=diag.device)
    neg_inf = diag.new_tensor(-math.inf)
    for t in range(k):
        j = int(torch.argmax(torch.where(available, d2, neg_inf)))
        picks[t] = j
        available[j] = False
        if t == k - 1:
            break
        e = (kernel_row(j) - c[:t, j] @ c[:t]) / d2[j].clamp_min(KERNEL_RIDGE).sqrt()
        c[t] = e
        d2 -= e * e
    return picks


def _prepare_kernel_factors(inputs: SelectionInputs, options: dict) -> tuple[Tensor, Tensor]:
    v = l2_normalise(inputs.features)
    assert inputs.query is not None  # guaranteed by the registry's requirement check
    r = relevance(inputs.features, inputs.query, **options)
    return v, r


@register("cdpruner", frozenset({"features", "query"}))
def cdpruner(inputs: SelectionInputs, k: int, *, negate: bool = False, theta: float | None = None) -> Tensor:
    """Matrix-free CDPruner: one ``(N, D) @ (D,)`` product per pick."""
    v, r = _prepare_kernel_factors(inputs, {"negate": negate, "theta": theta})
    diag = r * r * (v * v).sum(dim=1) + KERNEL_RIDGE

    def row(j: int) -> Tensor:
        out = (r[j] * r) * (v @ v[j])
        out[j] += KERNEL_RIDGE
        return out

    return greedy_map(diag, row, k)


@register("cdpruner_dense", frozenset({"features", "query"}), listed=False)
def cdpruner_dense(inputs: SelectionInputs, k: int, *, negate: bool = False, theta: float | None = None) -> Tensor:
    """Reference CDPruner that materialises the ``N x N`` kernel (for tests and the benchmark)."""
    v, r = _prepare_kernel_factors(inputs, {"negate": negate, "theta": theta})
    rv = r[:, None] * v
    kernel = rv @ rv.T
    kernel.diagonal().add_(KERNEL_RIDGE)
    return greedy_map(kernel.diagonal().clone(), lambda j: kernel[j], k)
