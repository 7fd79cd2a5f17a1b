"""The balanced quota sampler against the paper's numbers and brute-force properties."""
from __future__ import annotations

import math

import pytest

from ltopd.data.sampler import batch_mix, interleave, pick, scaled_quotas

PAPER = {"onethinker": 7200, "pixmo": 3000, "llava": 2800, "vision_opd": 1000}


def test_paper_quotas_fill_175_batches_of_80_evenly():
    mix = batch_mix(PAPER, 175, 80)
    assert len(mix) == 175 and all(sum(b.values()) == 80 for b in mix)
    for name, q in PAPER.items():
        counts = [b[name] for b in mix]
        assert sum(counts) == q
        assert set(counts) <= {math.floor(q / 175), math.ceil(q / 175)}  # as even as the quota allows
        running = 0
        for b, c in enumerate(counts):  # never drifts a whole item from the ideal share
            running += c
            assert abs(running - q * (b + 1) / 175) < 1.0 + 1e-9
    # worked by hand: 7200/175 = 41.14 -> 41 or 42; 2800/175 = 16 exactly
    assert {b["llava"] for b in mix} == {16}
    assert {b["onethinker"] for b in mix} == {41, 42}


@pytest.mark.parametrize("quotas, batches, size", [
    ({"a": 5, "b": 3}, 4, 2), ({"a": 1, "b": 1, "c": 1, "d": 9}, 3, 4), ({"a": 7, "b": 3, "c": 3, "d": 3}, 4, 4),
])
def test_small_cases_are_exact(quotas, batches, size):
    mix = batch_mix(quotas, batches, size)
    assert [sum(b.values()) for b in mix] == [size] * batches
    assert {k: sum(b[k] for b in mix) for k in quotas} == quotas


def test_scaled_quotas():
    assert scaled_quotas(PAPER, 0.1, 1400) == {"onethinker": 720, "pixmo": 300, "llava": 280, "vision_opd": 100}
    # 7.2, 3, 2.8, 1 -> floors 7, 3, 2, 1 (13); the remainder goes to the largest fraction (llava .8)
    assert scaled_quotas(PAPER, 0.001, 14) == {"onethinker": 7, "pixmo": 3, "llava": 3, "vision_opd": 1}
    with pytest.raises(ValueError, match="num_batches x batch_size = 15"):
        scaled_quotas(PAPER, 0.001, 15)
    with pytest.raises(ValueError, match="scale"):
        scaled_quotas(PAPER, 0.0, 0)


def test_pick_is_seeded_and_without_replacement():
    a, b = pick(100, 30, 20260824), pick(100, 30, 20260824)
    assert a == b and len(set(a)) == 30 and all(0 <= i < 100 for i in a)
    assert pick(100, 30, 20260830) != a
    assert pick(100, 30, 20260824)[:10] == pick(100, 10, 20260824)  # a prefix of the same permutation
    with pytest.raises(ValueError, match="only 5"):
        pick(5, 6, 0)


def test_interleave_spreads_sources():
    order = interleave({"a": 2, "b": 2, "c": 0})
    assert order == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    assert sorted(interleave({"x": 3, "y": 1})) == [("x", 0), ("x", 1), ("x", 2), ("y", 0)]
