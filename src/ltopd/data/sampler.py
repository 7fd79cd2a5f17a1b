"""Deterministic balanced quota sampling (LT-14K, Appendix B).

The paper realises fixed per-source quotas over 175 batches of 80 questions with every batch's
source mix as even as the quotas allow. Here: each source gets floor(q/B) per batch, and the
remaining slots of each batch go to the sources furthest behind their ideal cumulative share
q * (b+1) / B, so each source's per-batch count is floor(q/B) or ceil(q/B) and its running total
never drifts more than one item from the ideal.
"""
from __future__ import annotations

import math

import numpy as np


def scaled_quotas(quotas: dict[str, int], scale: float, total: int) -> dict[str, int]:
    """Scale quotas by `scale` (largest-remainder rounding); they must then sum to `total`."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    raw = {k: q * scale for k, q in quotas.items()}
    out = {k: math.floor(v) for k, v in raw.items()}
    target = round(sum(raw.values()))
    # hand the rounding remainder to the largest fractional parts (ties: declaration order)
    for k in sorted(raw, key=lambda k: -(raw[k] - out[k]))[: target - sum(out.values())]:
        out[k] += 1
    if sum(out.values()) != total:
        raise ValueError(
            f"quotas {quotas} scaled by {scale} give {sum(out.values())} questions "
            f"({out}), but num_batches x batch_size = {total}; change scale or the batch shape"
        )
    return out


def batch_mix(quotas: dict[str, int], num_batches: int, batch_size: int) -> list[dict[str, int]]:
    """Per-batch source counts realising `quotas` exactly, each batch exactly `batch_size`."""
    names = list(quotas)
    if sum(quotas.values()) != num_batches * batch_size:
        raise ValueError(f"quotas sum to {sum(quotas.values())}, need {num_batches} x {batch_size}")
    base = {k: quotas[k] // num_batches for k in names}
    extras_left = {k: quotas[k] - base[k] * num_batches for k in names}
    given = dict.fromkeys(names, 0)  # extras handed out so far
    total_extra = {k: extras_left[k] for k in names}
    slots = batch_size - sum(base.values())
    mix = []
    for b in range(num_batches):
        batches_left = num_batches - b

        def priority(i: int, b: int = b, batches_left: int = batches_left):  # bound now (B023)
            k = names[i]
            urgent = extras_left[k] >= batches_left  # must take one now to finish in time
            deficit = total_extra[k] * (b + 1) / num_batches - given[k]
            return (not urgent, -deficit, i)

        eligible = [i for i, k in enumerate(names) if extras_left[k] > 0]
        chosen = {names[i] for i in sorted(eligible, key=priority)[:slots]}
        counts = {}
        for k in names:
            extra = int(k in chosen)
            counts[k] = base[k] + extra
            extras_left[k] -= extra
            given[k] += extra
        mix.append(counts)
    return mix


def pick(pool_size: int, n: int, seed: int) -> list[int]:
    """The first n indices of a seeded permutation of the pool (sampling without replacement)."""
    if n > pool_size:
        raise ValueError(f"need {n} items but the source has only {pool_size}")
    return np.random.default_rng(seed).permutation(pool_size)[:n].tolist()


def interleave(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Order one batch so sources are spread evenly: (source, k-th item of that source)."""
    slots = [((j + 0.5) / c, i, name, j) for i, (name, c) in enumerate(counts.items()) for j in range(c)]
    return [(name, j) for _, _, name, j in sorted(slots)]
