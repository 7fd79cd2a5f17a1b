"""Budget curriculum against the authors' table, written out independently."""

from __future__ import annotations

import math

import pytest

from ltopd.train.curriculum import keep_ratio, kept_tokens, scaled_boundaries, schedule

BETA, FLOOR = 0.05, 32  # the paper's target budget and token floor (a profile gives its own)


def _authors_table(c: int) -> float:
    # implementation-facts.md: 25% for c = 0..13; 5% + 10% (1 + cos(pi (c - 13) / 87)) for
    # c = 14..99; 5% for c = 100..174.
    if c <= 13:
        return 0.25
    if c <= 99:
        return 0.05 + 0.10 * (1 + math.cos(math.pi * (c - 13) / 87))
    return 0.05


def test_paper_schedule_matches_authors_table_entry_by_entry():
    got = schedule(175, beta=BETA)
    assert len(got) == 175
    for c in range(175):
        assert got[c] == pytest.approx(_authors_table(c), abs=1e-12), c
    assert got[0] == pytest.approx(0.25) and got[174] == pytest.approx(0.05)


def _check_three_stages(values: list[float], warm: int, end: int, high: float, low: float) -> None:
    assert all(v == pytest.approx(high) for v in values[:warm])
    decay = values[warm - 1 : end + 1]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    assert all(low < v < high for v in values[warm:end])
    assert all(v == pytest.approx(low) for v in values[end:])


@pytest.mark.parametrize("total", [175, 40, 20, 12])
def test_schedule_has_three_stages(total):
    warm, end = scaled_boundaries(total)
    values = schedule(total, beta=BETA)
    print(f"\ntotal={total} warm={warm} decay_end={end}:", " ".join(f"{v:.3f}" for v in values))
    _check_three_stages(values, warm, end, 0.25, 0.05)


def test_scaled_boundaries_rounding():
    assert scaled_boundaries(175) == (14, 100)
    assert scaled_boundaries(350) == (28, 200)
    # 20 steps: 14 * 20/175 = 1.6 -> 2, 100 * 20/175 = 11.43 -> 11
    assert scaled_boundaries(20) == (2, 11)
    # 25 steps: 2.0 -> 2, 14.29 -> 14; 5 steps: 0.4 -> 0 -> forced to 1, 2.86 -> 3
    assert scaled_boundaries(25) == (2, 14)
    assert scaled_boundaries(5) == (1, 3)
    assert scaled_boundaries(1) == (1, 1)
    with pytest.raises(ValueError):
        scaled_boundaries(0)


def test_no_curriculum_is_constant_beta():
    assert schedule(30, beta=BETA, curriculum=False) == [0.05] * 30


def test_no_plateau_reaches_beta_only_at_last_step():
    values = schedule(175, beta=BETA, plateau=False)
    assert values[:14] == [pytest.approx(0.25)] * 14
    assert values[-1] == pytest.approx(0.05)
    assert all(v > 0.05 + 1e-6 for v in values[14:-1])
    # same cosine shape, stretched over 13 .. 174
    for c in range(14, 174):
        assert values[c] == pytest.approx(0.05 + 0.10 * (1 + math.cos(math.pi * (c - 13) / 161)))


def test_custom_alpha_beta_and_past_end():
    assert keep_ratio(0, 100, alpha=1.0, beta=0.1) == pytest.approx(0.3)
    assert keep_ratio(500, 175, beta=BETA) == pytest.approx(0.05)
    with pytest.raises(ValueError):
        keep_ratio(-1, 175, beta=BETA)
    with pytest.raises(TypeError, match="beta"):  # the target budget is the profile's: no default
        keep_ratio(0, 175)


def test_kept_tokens_floor_ceil_cap():
    assert kept_tokens(1000, 0.05, FLOOR) == 50
    assert kept_tokens(100, 0.07, FLOOR) == 32  # floor of 32
    assert kept_tokens(1000, 0.07, FLOOR) == 70  # no float-noise extra token
    assert kept_tokens(1001, 0.05, FLOOR) == 51  # ceil
    assert kept_tokens(20, 0.05, FLOOR) == 20  # never more than N
    assert kept_tokens(100, 0.05, 1) == 5  # the default and smoke profiles' floor of 1
