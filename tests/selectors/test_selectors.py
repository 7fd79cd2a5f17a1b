"""Selectors against independent references: brute force, hand-worked cases, explicit kernels."""

from __future__ import annotations

import math

import pytest
import torch

from ltopd.selectors import (
    SELECTORS,
    SelectionInputs,
    cdpruner_dense,
    keep_count,
    peak_allocated_bytes,
    relevance,
    requirements,
    select,
)


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _unit_angles(degrees: list[float]) -> torch.Tensor:
    rad = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin()], dim=1).float()


# --------------------------------------------------------------------------- keep_count, registry


@pytest.mark.parametrize(
    ("n", "ratio", "floor", "expected"),
    [
        (100, 0.05, 1, 5),
        (100, 0.07, 1, 7),  # 100 * 0.07 == 7.000000000000001 must not become 8
        (196, 0.05, 1, 10),  # ceil(9.8)
        (1024, 0.05, 1, 52),  # ceil(51.2)
        (10, 0.05, 4, 4),  # floor wins
        (3, 0.5, 8, 3),  # never more than n
        (0, 0.5, 1, 0),
        (1000, 1.0, 1, 1000),
    ],
)
def test_keep_count_table(n: int, ratio: float, floor: int, expected: int) -> None:
    assert keep_count(n, ratio, floor) == expected


@pytest.mark.parametrize(
    ("ratio", "floor", "text"),
    [(0.0, 1, "ratio=0.0"), (1.5, 1, "ratio=1.5"), (-0.1, 1, "ratio=-0.1"), (0.5, 0, "floor=0")],
)
def test_keep_count_errors_name_the_value(ratio: float, floor: int, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        keep_count(100, ratio, floor)


def test_registry_names_and_requirements() -> None:
    assert set(SELECTORS) == {"cdpruner", "divprune", "fastv", "dart", "hiprune", "random", "uniform"}
    assert requirements("cdpruner") == {"features", "query"}
    assert requirements("fastv") == {"last_query_attention"}
    assert requirements("dart") == {"key_states"}
    assert requirements("hiprune") == {"encoder_attention_object", "encoder_attention_output", "grid_hw"}
    assert requirements("random") == frozenset()
    with pytest.raises(ValueError, match="nope"):
        requirements("nope")


@pytest.mark.parametrize("name", ["cdpruner", "fastv", "dart", "hiprune"])
def test_missing_field_names_selector_and_field(name: str) -> None:
    inputs = SelectionInputs(features=_randn(0, 16, 8))
    field = sorted(requirements(name) - {"features"})[0]
    with pytest.raises(ValueError, match=f"'{name}'.*{field}"):
        select(name, inputs, 4)


@pytest.mark.parametrize("k", [0, -3])
def test_k_below_one_rejected(k: int) -> None:
    with pytest.raises(ValueError, match="k="):
        select("random", SelectionInputs(features=_randn(0, 16, 8)), k)


def test_shape_mismatch_and_nan_rejected() -> None:
    with pytest.raises(ValueError, match="last_query_attention has 15 rows"):
        select("fastv", SelectionInputs(features=_randn(0, 16, 8), last_query_attention=torch.rand(15)), 4)
    bad = _randn(0, 16, 8)
    bad[3, 2] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        select("divprune", SelectionInputs(features=bad), 4)
    with pytest.raises(ValueError, match="grid_hw"):
        select("uniform", SelectionInputs(features=_randn(0, 16, 8), grid_hw=(3, 5)), 4)


def test_k_at_least_n_keeps_everything() -> None:
    inputs = SelectionInputs(features=_randn(0, 6, 8), query=_randn(1, 8))
    assert select("cdpruner", inputs, 6).tolist() == list(range(6))
    assert select("cdpruner", inputs, 50).tolist() == list(range(6))


def _full_inputs(n: int, grid: tuple[int, int], seed: int, value: float | None = None) -> SelectionInputs:
    """All fields filled; with ``value``, every score/feature is identical (all ties)."""

    def fill(*shape: int, s: int) -> torch.Tensor:
        return torch.full(shape, value) if value is not None else _randn(seed + s, *shape)

    return SelectionInputs(
        features=fill(n, 24, s=0),
        query=fill(24, s=1),
        last_query_attention=fill(n, s=2).abs(),
        key_states=fill(n, 8, s=3),
        text_key_states=fill(5, 8, s=4),
        hidden_states=fill(n, 24, s=5),
        encoder_attention_object=fill(n, s=6).abs(),
        encoder_attention_output=fill(n, s=7).abs(),
        grid_hw=grid,
        seed=seed,
    )


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_every_selector_returns_k_sorted_unique(name: str) -> None:
    for seed, k in [(0, 1), (1, 5), (2, 17), (3, 40), (4, 41)]:
        inputs = _full_inputs(42, (6, 7), seed)
        kept = select(name, inputs, k)
        assert kept.dtype == torch.long
        assert kept.tolist() == sorted(set(kept.tolist()))
        assert len(kept) == k and 0 <= kept.min() and kept.max() < 42


@pytest.mark.parametrize("name", sorted(set(SELECTORS) - {"random", "uniform"}))
def test_all_equal_scores_pick_lowest_indices(name: str) -> None:
    assert select(name, _full_inputs(30, (5, 6), 0, value=0.5), 7).tolist() == list(range(7))


def test_inputs_untouched_and_grad_free() -> None:
    features = _randn(0, 40, 16).half().requires_grad_()
    query = _randn(1, 16)
    before = features.detach().clone()
    kept = select("cdpruner", SelectionInputs(features=features, query=query), 6)
    assert not kept.requires_grad
    assert torch.equal(features.detach(), before)
    assert features.grad is None


# --------------------------------------------------------------------------- CDPruner


def _reference_relevance(features: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    f = features.double()
    q = query.double()
    cos = (f / f.norm(dim=1, keepdim=True)) @ (q / q.norm())
    span = cos.max() - cos.min()
    if span <= 1e-6:
        return torch.ones_like(cos)
    return ((cos - cos.min()) / span).clamp(1e-6, 1.0)


def _brute_force_logdet_greedy(features: torch.Tensor, r: torch.Tensor, k: int) -> list[int]:
    """At each step try every candidate and keep the argmax of logdet L[S+j, S+j] (FP64)."""
    v = features.double() / features.double().norm(dim=1, keepdim=True)
    kernel = r[:, None] * (v @ v.T) * r[None, :] + 1e-6 * torch.eye(len(r), dtype=torch.float64)
    chosen: list[int] = []
    for _ in range(k):
        best, best_value = -1, -math.inf
        for j in range(len(r)):
            if j in chosen:
                continue
            idx = chosen + [j]
            value = torch.logdet(kernel[idx][:, idx]).item()
            if value > best_value:
                best, best_value = j, value
        chosen.append(best)
    return sorted(chosen)


@pytest.mark.parametrize("n", [12, 25, 40])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 4, 11])
def test_cdpruner_matches_brute_force_logdet(n: int, seed: int, k: int) -> None:
    features, query = _randn(seed, n, 48), _randn(seed + 100, 48)
    expected = _brute_force_logdet_greedy(features, _reference_relevance(features, query), k)
    inputs = SelectionInputs(features=features, query=query)
    assert select("cdpruner", inputs, k).tolist() == expected
    assert cdpruner_dense(inputs, k).tolist() == expected


def test_cdpruner_llava_variant_matches_brute_force() -> None:
    features, query = _randn(7, 30, 48), _randn(8, 48)
    r = _reference_relevance(features, -query)  # negated cosine == cosine with -query
    r = torch.exp(0.5 / (2 * 0.5) * r)
    expected = _brute_force_logdet_greedy(features, r, 9)
    kept = select("cdpruner", SelectionInputs(features=features, query=query), 9, negate=True, theta=0.5)
    assert kept.tolist() == expected


def test_cdpruner_matrix_free_equals_dense_at_larger_n() -> None:
    inputs = SelectionInputs(features=_randn(3, 500, 96), query=_randn(4, 96))
    assert select("cdpruner", inputs, 60).tolist() == cdpruner_dense(inputs, 60).tolist()


def test_relevance_hand_checked() -> None:
    features = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [-1.0, 0.0]])
    # cosines with (1, 0): 1, 0, 1/sqrt(2), -1 -> min-max over [-1, 1]
    r = relevance(features, torch.tensor([5.0, 0.0]))
    assert torch.allclose(r, torch.tensor([1.0, 0.5, (1 + 2**-0.5) / 2, 1e-6]), atol=1e-6)
    assert r[3].item() == pytest.approx(1e-6)  # clamped floor, not zero
    same = torch.tensor([[1.0, 1.0]] * 3 + [[1.0, 1.0 + 1e-7]])
    assert torch.equal(relevance(same, torch.tensor([0.3, -2.0])), torch.ones(4))
    assert torch.allclose(relevance(features, torch.tensor([5.0, 0.0]), theta=0.5), torch.exp(0.5 * r))


def test_cdpruner_never_allocates_n_by_n() -> None:
    n = 20_000
    inputs = SelectionInputs(features=_randn(0, n, 32), query=_randn(1, 32))
    kept, peak = peak_allocated_bytes(lambda: select("cdpruner", inputs, 100))
    assert len(kept) == 100
    assert peak < 0.01 * n * n * 4  # O(N k + N D) ~ 11 MB, never the 1.6 GB kernel
    # the measurement does see an N x N allocation when there is one
    small = SelectionInputs(features=_randn(0, 2000, 32), query=_randn(1, 32))
    _, dense_peak = peak_allocated_bytes(lambda: cdpruner_dense(small, 20))
    assert dense_peak >= 2000 * 2000 * 4


# --------------------------------------------------------------------------- DivPrune


def _brute_force_max_min(features: torch.Tensor, k: int) -> list[int]:
    f = features.double()
    f = f / f.norm(dim=1, keepdim=True)
    dist = 1.0 - f @ f.T
    n = len(f)
    nearest = [min(dist[i, j].item() for j in range(n) if j != i) for i in range(n)]
    chosen = [max(range(n), key=lambda i: (nearest[i], -i))]
    while len(chosen) < k:
        rest = [j for j in range(n) if j not in chosen]
        chosen.append(max(rest, key=lambda j: (min(dist[j, s].item() for s in chosen), -j)))
    return sorted(chosen)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize(("n", "k"), [(10, 3), (25, 8), (40, 15)])
def test_divprune_matches_brute_force(seed: int, n: int, k: int) -> None:
    features = _randn(seed, n, 6)
    assert select("divprune", SelectionInputs(features=features), k).tolist() == _brute_force_max_min(features, k)


def test_divprune_hand_case() -> None:
    # tokens at 0, 5, 90, 180, 185 deg; distance 1 - cos(angle between)
    # nearest-other distances: 0/5/180/185 deg -> 1 - cos 5 ~ 0.004; 90 deg -> 1 - cos 85 ~ 0.91: pick t2
    # min distance to {t2}: t0 1, t1 0.91, t3 1, t4 1 + sin 5 ~ 1.09: pick t4
    # min distance to {t2, t4}: t0 min(1, 1 + cos 5) = 1, t1 0.91, t3 1 - cos 5 ~ 0.004: pick t0
    features = _unit_angles([0, 5, 90, 180, 185])
    assert select("divprune", SelectionInputs(features=features), 1).tolist() == [2]
    assert select("divprune", SelectionInputs(features=features), 2).tolist() == [2, 4]
    assert select("divprune", SelectionInputs(features=features), 3).tolist() == [0, 2, 4]


# --------------------------------------------------------------------------- FastV


def test_fastv_hand_case() -> None:
    attention = torch.tensor([0.1, 0.5, 0.2, 0.5, 0.05, 0.3])
    inputs = SelectionInputs(features=torch.zeros(6, 4), last_query_attention=attention)
    assert select("fastv", inputs, 1).tolist() == [1]  # tie 0.5 / 0.5 -> lower index
    assert select("fastv", inputs, 2).tolist() == [1, 3]
    assert select("fastv", inputs, 4).tolist() == [1, 2, 3, 5]


# --------------------------------------------------------------------------- DART

# eight tokens on the unit circle; key states point the same way, scaled so that
# L1 norms rank t0 (10) > t3 (9) > t1 (8) > the rest (<= sqrt 2)
_DART_ANGLES = [0, 10, 90, 180, 170, 270, 100, 45]
_DART_SCALE = torch.tensor([10.0, 8.0 / (math.cos(math.radians(10)) + math.sin(math.radians(10))), 1, 9, 1, 1, 1, 1])


def _dart_inputs(**changes: object) -> SelectionInputs:
    features = _unit_angles(_DART_ANGLES)
    values: dict[str, object] = {"features": features, "key_states": features * _DART_SCALE[:, None]}
    values.update(changes)
    return SelectionInputs(**values)  # type: ignore[arg-type]


def test_dart_single_pivot_claims_least_similar() -> None:
    # pivot t0 (0 deg); cosines: t3 -1, t4 -0.985, t6 -0.174, then t2/t5 ~0 -> claims t3, t4, t6
    assert select("dart", _dart_inputs(), 4, n_image_pivots=1).tolist() == [0, 3, 4, 6]


def test_dart_two_pivots_uneven_quota() -> None:
    # pivots t0, t3 (by key norm); budget 3 -> quotas 2, 1
    # t0 claims t4, t6; t3 (180 deg) claims from {1, 2, 5, 7}: t1 (cos 170 = -0.985)
    assert select("dart", _dart_inputs(), 5, n_image_pivots=2).tolist() == [0, 1, 3, 4, 6]
    # k=6: quotas 2, 2 -> t3 also claims t7 (cos 135 = -0.707)
    assert select("dart", _dart_inputs(), 6, n_image_pivots=2).tolist() == [0, 1, 3, 4, 6, 7]


def test_dart_colliding_claims_go_to_the_earlier_pivot() -> None:
    # pivots t0 (0 deg, norm 10) then t1 (10 deg, norm 9) both want t3, t4; budget 3 -> quotas 2, 1.
    # t0 claims t3, t4 first; t1 then takes t5 (cos 260 = -0.17) from {2, 5, 6, 7}.
    # (Were t1 first, it would take t3, t4 and t0 would take t6 (cos 100): [0, 1, 3, 4, 6].)
    scale = torch.ones(8)
    scale[0], scale[1] = 10.0, 9.0 / (math.cos(math.radians(10)) + math.sin(math.radians(10)))
    keys = _unit_angles(_DART_ANGLES) * scale[:, None]
    assert select("dart", _dart_inputs(key_states=keys), 5, n_image_pivots=2).tolist() == [0, 1, 3, 4, 5]


def test_dart_text_pivot_compares_in_key_space() -> None:
    # image pivot t0 claims t3, t4 (quota 2); the text pivot (90 deg, the largest of two text keys)
    # claims its 1 token among the rest by key-space cosine: t5 (270 deg, cos -1)
    text = torch.tensor([[0.1, 0.1], [0.0, 5.0]])
    kept = select("dart", _dart_inputs(text_key_states=text), 4, n_image_pivots=1, n_text_pivots=1)
    assert kept.tolist() == [0, 3, 4, 5]


def test_dart_uses_hidden_states_when_given() -> None:
    inputs = _dart_inputs(hidden_states=_unit_angles(_DART_ANGLES), features=_randn(0, 8, 2))
    assert select("dart", inputs, 4, n_image_pivots=1).tolist() == [0, 3, 4, 6]


def test_dart_more_pivots_than_budget() -> None:
    assert select("dart", _dart_inputs(), 2, n_image_pivots=4).tolist() == [0, 3]


# --------------------------------------------------------------------------- HiPrune


def _hiprune_inputs(anchors: dict[int, float], output: dict[int, float],
                    grid: tuple[int, int] = (4, 4)) -> SelectionInputs:
    n = grid[0] * grid[1]
    obj, out = torch.zeros(n), torch.zeros(n)
    for i, value in anchors.items():
        obj[i] = value
    for i, value in output.items():
        out[i] = value
    return SelectionInputs(features=torch.zeros(n, 4), encoder_attention_object=obj, encoder_attention_output=out,
                           grid_hw=grid)


def test_hiprune_anchors_buffers_registers() -> None:
    # 4x4 grid, k=10, alpha=1 -> round(10 / 5) = 2 anchors: 5 (r1c1) and 6 (r1c2)
    # buffers: 5 -> 1, 4, (6 is an anchor), 9; 6 -> 2, (5), 7, 10; registers by output attention,
    # skipping the already chosen 5: 15 and 0
    inputs = _hiprune_inputs({5: 0.9, 6: 0.8, 0: 0.1}, {5: 1.0, 15: 0.7, 0: 0.6, 3: 0.2})
    assert select("hiprune", inputs, 10, alpha=1.0).tolist() == [0, 1, 2, 4, 5, 6, 7, 9, 10, 15]


def test_hiprune_buffer_overflow_truncates_in_order() -> None:
    # alpha 0.1, k=4 -> 1 anchor (5); its buffers 1, 4, 6, 9 truncated to the first three
    inputs = _hiprune_inputs({5: 0.9}, {9: 1.0})
    assert select("hiprune", inputs, 4).tolist() == [1, 4, 5, 6]


def test_hiprune_corner_anchor_has_two_buffers() -> None:
    inputs = _hiprune_inputs({0: 0.9}, {15: 0.5, 14: 0.4, 13: 0.3})
    assert select("hiprune", inputs, 5).tolist() == [0, 1, 4, 14, 15]


# --------------------------------------------------------------------------- controls


def test_random_is_seeded() -> None:
    a = select("random", SelectionInputs(features=torch.zeros(100, 2), seed=3), 10)
    b = select("random", SelectionInputs(features=torch.zeros(100, 2), seed=3), 10)
    c = select("random", SelectionInputs(features=torch.zeros(100, 2), seed=4), 10)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_uniform_sequence_and_grid() -> None:
    assert select("uniform", SelectionInputs(features=torch.zeros(10, 2)), 3).tolist() == [1, 5, 8]
    # 8x8, k=10: rows = round(sqrt 10) = 3 at 1, 4, 6 holding 4, 3, 3 tokens
    grid = SelectionInputs(features=torch.zeros(64, 2), grid_hw=(8, 8))
    assert select("uniform", grid, 10).tolist() == [9, 11, 13, 15, 33, 36, 38, 49, 52, 54]


@pytest.mark.parametrize("grid", [(1, 13), (13, 1), (7, 9), (2, 30)])
def test_uniform_grid_exact_k(grid: tuple[int, int]) -> None:
    n = grid[0] * grid[1]
    inputs = SelectionInputs(features=torch.zeros(n, 2), grid_hw=grid)
    for k in range(1, n):
        kept = select("uniform", inputs, k).tolist()
        assert len(kept) == k == len(set(kept))
