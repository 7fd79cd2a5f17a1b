"""Budget-level curriculum: the student's visual keep ratio per completed update c.

The authors' table for 175 updates (alpha = 2, beta = 0.05):
    c = 0..13    : (2 alpha + 1) beta = 25%
    c = 14..99   : beta + alpha beta (1 + cos(pi (c - 13) / 87))   (25% -> 5%)
    c = 100..174 : beta                                           (final plateau)
The cosine starts from the last warm step (13 = warm_steps - 1) and reaches beta exactly at
decay_end (100), hence the period decay_end - warm_steps + 1 = 87.

Appendix H ("without the final 5% plateau") is not in our copy of the paper text; we read it
as the same cosine stretched so that it reaches beta at the last update (decay_end =
total_steps - 1), i.e. no run of updates at the target budget.
"""

from __future__ import annotations

import math
from typing import Any

PAPER_TOTAL_STEPS = 175
PAPER_WARM_STEPS = 14
PAPER_DECAY_END = 100


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def scaled_boundaries(total_steps: int) -> tuple[int, int]:
    """(warm_steps, decay_end) scaled from the paper's 14 / 100 of 175 updates.

    Each boundary is round-half-up(paper_value * total_steps / 175), then forced into
    1 <= warm_steps <= decay_end <= total_steps (so e.g. 1 step gives (1, 1): only the
    warm stage). For 175 this returns (14, 100) exactly.
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}")
    scale = total_steps / PAPER_TOTAL_STEPS
    warm = min(max(1, _round_half_up(PAPER_WARM_STEPS * scale)), total_steps)
    decay_end = min(max(warm, _round_half_up(PAPER_DECAY_END * scale)), total_steps)
    return warm, decay_end


def keep_ratio(
    step: int,
    total_steps: int,
    *,
    beta: float,
    alpha: float = 2.0,
    warm_steps: int | None = None,
    decay_end: int | None = None,
    plateau: bool = True,
    curriculum: bool = True,
) -> float:
    """Keep ratio for completed update `step` (0-based) of `total_steps` toward the target
    budget `beta` (the profile's: ltopd.grid.reduction_defaults).

    warm_steps / decay_end default to scaled_boundaries(total_steps) (14 / 100 at 175).
    curriculum=False: constant beta. plateau=False: the cosine ends at the last update
    (decay_end = total_steps - 1). Steps past the end stay at beta.
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if not curriculum:
        return beta
    default_warm, default_end = scaled_boundaries(total_steps)
    warm = default_warm if warm_steps is None else warm_steps
    end = default_end if decay_end is None else decay_end
    if not plateau:
        end = max(warm, total_steps - 1)
    if not 1 <= warm <= end:
        raise ValueError(f"need 1 <= warm_steps <= decay_end, got {warm}, {end}")
    if step < warm:
        return (2.0 * alpha + 1.0) * beta
    if step < end:
        phase = (step - (warm - 1)) / (end - warm + 1)
        return beta + alpha * beta * (1.0 + math.cos(math.pi * phase))
    return beta


def schedule(total_steps: int, *, beta: float, **kwargs: Any) -> list[float]:
    """keep_ratio for every update 0..total_steps-1 (same keyword arguments)."""
    return [keep_ratio(c, total_steps, beta=beta, **kwargs) for c in range(total_steps)]


def kept_tokens(n_visual: int, ratio: float, floor: int) -> int:
    """Visual tokens kept per image as the authors ran it: min(N, max(floor, ceil(N ratio))).

    (The paper's text says Round(r N); the released code uses ceil with a floor of 32.)
    The 1e-9 slack keeps float noise (0.07 * 100 = 7.000000000000001) from adding a token.
    """
    return min(n_visual, max(floor, math.ceil(n_visual * ratio - 1e-9)))
