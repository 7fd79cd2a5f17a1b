"""The paired unit bootstrap (ltopd.stats.bootstrap) against independent references: hand-worked
bootstrap distributions, the analytic paired SE of an accuracy difference, the delta-method SE of
a ratio, and the units and strata each official metric couples (MME pairs, MMBench circular
groups, POPE splits)."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from ltopd.bench.scoring import score
from ltopd.bench.suites import SUITES, synthetic_records
from ltopd.report.retain import retain_ratio
from ltopd.stats import bootstrap

WORLD = {"image_size": 128}


def gqa_rows(correct: list[bool], prefix: str = "q") -> list[dict]:
    """GQA rows (exact match), right or wrong as ``correct`` says."""
    return [{"id": f"{prefix}{i}", "task": "t", "meta": "{}", "options": [], "answer": "red",
             "prediction": "red" if ok else "blue"} for i, ok in enumerate(correct)]


def mme_rows(marks: list[tuple[bool, bool]], category: str = "color") -> list[dict]:
    """One MME image per pair of marks (is each of its two questions answered right)."""
    rows = []
    for img, pair in enumerate(marks):
        for q, (answer, ok) in enumerate(zip(("Yes", "No"), pair)):
            rows.append({"id": f"{category}-{img}-{q}", "task": category, "options": [], "answer": answer,
                         "meta": json.dumps({"category": category, "image_id": f"{category}/{img}"}),
                         "prediction": answer if ok else ("No" if answer == "Yes" else "Yes")})
    return rows


def mmbench_rows(groups: list[list[bool]]) -> list[dict]:
    """One MMBench circular group per list (a mark per rotation)."""
    rows = []
    for g, marks in enumerate(groups):
        for j, ok in enumerate(marks):
            rows.append({"id": f"m{g}-{j}", "task": "t", "options": ["x", "y"], "answer": "A",
                         "meta": json.dumps({"index": g + j * 1_000_000}), "prediction": "A" if ok else "B"})
    return rows


def pope_rows(marks: dict[str, list[bool]]) -> list[dict]:
    return [{"id": f"{split}{i}", "task": "t", "options": [], "answer": "yes", "meta": json.dumps({"split": split}),
             "prediction": "yes" if ok else "no"} for split, ms in marks.items() for i, ok in enumerate(ms)]


def test_units_follow_each_official_metric() -> None:
    d = bootstrap.design("mme", mme_rows([(True, True), (True, False)]) + mme_rows([(False, False)], "count"))
    assert d.members == ((0, 1), (2, 3), (4, 5)) and list(d.strata) == [0, 0, 1] and d.combine == "sum"
    d = bootstrap.design("mmbench", mmbench_rows([[True, False], [True, True, True]]))
    assert d.members == ((0, 1), (2, 3, 4)) and list(d.strata) == [0, 0]
    d = bootstrap.design("pope", pope_rows({"random": [True, True], "adversarial": [False]}))
    assert d.members == ((0,), (1,), (2,)) and list(d.strata) == [0, 0, 1] and d.combine == "mean"
    assert bootstrap.unit_key("gqa", {"id": "q7"}) == ("row", "q7")


@pytest.mark.parametrize("name", sorted(SUITES))
def test_unit_values_add_up_to_the_official_score(name: str) -> None:
    """On every twin, the aggregate of the per-unit official scores is the official score
    (unit_values raises otherwise), for a mix of right, wrong and empty predictions."""
    recs = synthetic_records(name, 28, 0, WORLD)
    rng = random.Random(1)
    rows = [{**{k: r[k] for k in ("id", "task", "meta", "options", "answer")},
             "prediction": rng.choice([r["answer"], "zz", "", "No", "B"])} for r in recs]
    d = bootstrap.design(name, rows)
    values = bootstrap.unit_values(d, rows)
    assert float(bootstrap.aggregate(d, values)) == pytest.approx(score(name, rows)["score"])


def test_mvbench_divides_by_answered_records_only() -> None:
    """MVBench's task accuracy is right / answered: one task with a right, a blank and a wrong
    reply scores 50 (not 33.3); a replicate's accuracy is a ratio of the drawn rows' sums."""
    rows = [{"id": f"v{i}", "task": "t", "options": ["x", "y"], "answer": "A", "meta": "{}", "prediction": p}
            for i, p in enumerate(["A", "  ", "B"])]
    d = bootstrap.design("mvbench", rows)
    values = bootstrap.unit_values(d, rows)
    assert values.tolist() == [[100.0, 0.0, 0.0], [1.0, 0.0, 1.0]] and float(bootstrap.aggregate(d, values)) == 50.0
    reps = bootstrap.replicates(d, values, 3000, bootstrap.pool_rng(0, "mvbench"))
    # draws of 3 rows: answered ones right/wrong in any mix, or none answered (scores 0)
    assert set(np.unique(reps)) <= {0.0, 100 / 3, 50.0, 200 / 3, 100.0} and {0.0, 50.0, 100.0} <= set(np.unique(reps))


def test_a_wrong_decomposition_is_caught() -> None:
    rows = pope_rows({"random": [True, False], "adversarial": [True]})
    d = bootstrap.design("pope", rows)
    wrong = bootstrap.Design(d.benchmark, d.ids, d.members, d.strata, "sum")  # POPE macro-averages its splits
    with pytest.raises(ValueError, match="not the aggregate of its unit scores"):
        bootstrap.unit_values(wrong, rows)


def test_hand_worked_two_item_bootstrap() -> None:
    """Two items, a right on both, b right on the second only: per-item differences (100, 0).
    A replicate draws two items with replacement: diff 100 (1/4), 50 (1/2), 0 (1/4), so the
    bootstrap SE is sqrt(1250) = 35.36 and the point estimate is 50."""
    a, b = gqa_rows([True, True]), gqa_rows([False, True])
    d = bootstrap.design("gqa", a)
    reps = bootstrap.replicates(d, np.stack([bootstrap.unit_values(d, a), bootstrap.unit_values(d, b)]), 20000,
                            bootstrap.pool_rng(0, "gqa"))
    diffs = reps[0] - reps[1]
    assert set(np.unique(diffs)) == {0.0, 50.0, 100.0}
    assert [np.mean(diffs == v) for v in (0.0, 50.0, 100.0)] == pytest.approx([0.25, 0.5, 0.25], abs=0.015)
    diff, lo, hi, se = bootstrap.paired_diff_ci(a, b, "gqa", n_boot=20000)
    assert (diff, lo, hi) == (50.0, 0.0, 100.0) and se == pytest.approx(math.sqrt(1250), rel=0.02)


def test_constant_difference_has_zero_width() -> None:
    ci = bootstrap.paired_diff_ci(gqa_rows([True] * 5), gqa_rows([False] * 5), "gqa", n_boot=200)
    assert ci == (100.0, 100.0, 100.0, 0.0)


def test_bootstrap_se_matches_the_analytic_paired_se() -> None:
    """Accuracy difference of two correlated prediction sets on n items: the bootstrap SE is
    sqrt(var(d) / n) with d the per-item difference (population variance: the bootstrap's)."""
    rng = np.random.default_rng(7)
    n = 400
    base = rng.random(n)
    a_ok, b_ok = base < 0.7, (base < 0.55) ^ (rng.random(n) < 0.1)
    a, b = gqa_rows(list(a_ok)), gqa_rows(list(b_ok))
    d = 100.0 * (a_ok.astype(float) - b_ok.astype(float))
    analytic = math.sqrt(d.var() / n)
    diff, lo, hi, se = bootstrap.paired_diff_ci(a, b, "gqa", n_boot=4000, seed=3)
    assert diff == pytest.approx(d.mean())
    assert se == pytest.approx(analytic, rel=0.05)
    assert lo < diff < hi and (hi - lo) == pytest.approx(2 * 1.96 * analytic, rel=0.1)


def test_mme_resamples_image_pairs_whole() -> None:
    """Pairs (both right) and (one right): per-pair acc + acc+ = 200 and 50, so a replicate
    (two pairs drawn) scores 200, 125 or 50 -- never a value that splits a pair. The scorer
    itself rejects a duplicated image, which is why copies never reach it."""
    rows = mme_rows([(True, True), (True, False)])
    empty = [dict(r, prediction="") for r in rows]
    d = bootstrap.design("mme", rows)
    reps = bootstrap.replicates(d, bootstrap.unit_values(d, rows), 2000, bootstrap.pool_rng(0, "mme"))
    assert set(np.unique(reps)) == {50.0, 125.0, 200.0}
    diff, lo, hi, se = bootstrap.paired_diff_ci(rows, empty, "mme", n_boot=2000)
    assert diff == 125.0 and (lo, hi) == (50.0, 200.0)
    with pytest.raises(ValueError, match="4 questions, expected 2"):
        score("mme", rows + [dict(r, id=r["id"] + "-copy") for r in rows[:2]])


def test_mmbench_resamples_circular_groups_whole() -> None:
    rows = mmbench_rows([[True, True, True], [True, False]])
    d = bootstrap.design("mmbench", rows)
    reps = bootstrap.replicates(d, bootstrap.unit_values(d, rows), 2000, bootstrap.pool_rng(0, "mmbench"))
    assert set(np.unique(reps)) == {0.0, 50.0, 100.0}  # whole groups: 0, 1 or 2 of 2 drawn groups right


def test_pope_keeps_its_splits() -> None:
    """All right on the random split, all wrong on the adversarial one: every stratified
    replicate keeps both splits' sizes, so the macro accuracy is 50 in each (SE 0)."""
    a = pope_rows({"random": [True] * 6, "adversarial": [False] * 4})
    b = [dict(r, prediction="no") for r in a]
    assert bootstrap.paired_diff_ci(a, b, "pope", n_boot=500) == (50.0, 50.0, 50.0, 0.0)


def test_seeded_and_deterministic() -> None:
    rng = np.random.default_rng(0)
    a, b = gqa_rows(list(rng.random(50) < 0.6)), gqa_rows(list(rng.random(50) < 0.4))
    assert bootstrap.paired_diff_ci(a, b, "gqa", 300, seed=1) == bootstrap.paired_diff_ci(a, b, "gqa", 300, seed=1)
    assert bootstrap.paired_diff_ci(a, b, "gqa", 300, seed=1) != bootstrap.paired_diff_ci(a, b, "gqa", 300, seed=2)
    # replicates are drawn in blocks: a prefix of a longer run is the shorter run
    d = bootstrap.design("gqa", a)
    v = bootstrap.unit_values(d, a)
    long = bootstrap.replicates(d, v, 600, bootstrap.pool_rng(1, "gqa"))
    chunk = bootstrap.replicates(d, v, bootstrap.CHUNK, bootstrap.pool_rng(1, "gqa"))
    assert np.array_equal(chunk, long[:bootstrap.CHUNK])


def test_different_items_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in items"):
        bootstrap.paired_diff_ci(gqa_rows([True] * 3), gqa_rows([True] * 3, prefix="z"), "gqa", 10)
    with pytest.raises(ValueError, match="duplicate row ids"):
        bootstrap.design("gqa", gqa_rows([True]) * 2)


def test_interval_skips_undefined_replicates() -> None:
    ci = bootstrap.interval(1.0, np.array([0.0, np.nan, 1.0, 2.0, np.inf]))
    assert ci.estimate == 1.0 and ci.se == pytest.approx(1.0) and (ci.lo, ci.hi) == pytest.approx((0.05, 1.95))
    assert math.isnan(bootstrap.interval(1.0, np.array([np.nan, 1.0])).lo)
    assert bootstrap.format_ci(bootstrap.Interval(77.43, 70.08, 84.0, 3.0)) == "[70.1, 84.0]"
    assert bootstrap.format_ci(None) == ""


def _two_benchmarks(p_full: float, p_method: float, seed: int, n: int = 300) -> tuple[dict, dict]:
    """(method, full) predictions on a GQA-like and a POPE-like set; the method is right only
    where full tokens are (a pruned model rarely fixes what the full one gets wrong)."""
    rng = np.random.default_rng(seed)
    u = {"gqa": rng.random(n), "pope": rng.random(n)}
    full = {"gqa": gqa_rows(list(u["gqa"] < p_full)),
            "pope": pope_rows({"random": list(u["pope"][: n // 2] < p_full),
                               "popular": list(u["pope"][n // 2:] < p_full)})}
    method = {"gqa": gqa_rows(list(u["gqa"] < p_method)),
              "pope": pope_rows({"random": list(u["pope"][: n // 2] < p_method),
                                 "popular": list(u["pope"][n // 2:] < p_method)})}
    return method, full


def test_retain_ratio_point_is_tables_and_full_is_exactly_100() -> None:
    method, full = _two_benchmarks(0.8, 0.5, 0)
    ci = bootstrap.retain_ratio_ci(method, full, n_boot=300)
    official = {b: score(b, rows)["score"] for b, rows in method.items()}
    reference = {b: score(b, rows)["score"] for b, rows in full.items()}
    assert ci.estimate == pytest.approx(retain_ratio(official, reference, ["gqa", "pope"])[0])
    assert ci.lo < ci.estimate < ci.hi and ci.se > 0
    assert bootstrap.retain_ratio_ci(full, full, n_boot=300) == (100.0, 100.0, 100.0, 0.0)
    # only the benchmarks asked for enter the average
    assert bootstrap.retain_ratio_ci(method, full, ["gqa"], n_boot=300).estimate == pytest.approx(
        100 * official["gqa"] / reference["gqa"])


def test_retain_ratio_se_matches_the_delta_method() -> None:
    """One benchmark, R = 100 * mean(m) / mean(f) over n items: the delta-method SE is
    100 * sqrt(var(m - r f) / n) / mean(f), with r = mean(m) / mean(f)."""
    rng = np.random.default_rng(11)
    n = 500
    u = rng.random(n)
    f, m = (u < 0.8).astype(float), (u < 0.5).astype(float) + ((u >= 0.8) & (rng.random(n) < 0.2))
    ci = bootstrap.retain_ratio_ci({"gqa": gqa_rows(list(m > 0))}, {"gqa": gqa_rows(list(f > 0))}, n_boot=4000, seed=5)
    r = m.mean() / f.mean()
    delta = 100 * math.sqrt(np.var(m - r * f) / n) / f.mean()
    assert ci.estimate == pytest.approx(100 * r) and ci.se == pytest.approx(delta, rel=0.06)


def test_retain_difference_is_paired() -> None:
    """LT-OPD - CDPruner on the same items and draws: the difference's point is the difference
    of the points, a method against itself is exactly 0, and pairing makes the difference of
    two positively correlated methods tighter than independent errors would."""
    a, full = _two_benchmarks(0.8, 0.6, 3)
    b, _ = _two_benchmarks(0.8, 0.5, 3)
    ra, rb = bootstrap.retain_ratio_ci(a, full, n_boot=1000), bootstrap.retain_ratio_ci(b, full, n_boot=1000)
    d = bootstrap.retain_diff_ci(a, b, full, n_boot=1000)
    assert d.estimate == pytest.approx(ra.estimate - rb.estimate)
    assert d.lo < d.estimate < d.hi and d.se < math.sqrt(ra.se ** 2 + rb.se ** 2)
    assert bootstrap.retain_diff_ci(a, a, full, n_boot=200) == (0.0, 0.0, 0.0, 0.0)


def test_a_shared_unit_cache_scores_each_prediction_set_once(monkeypatch) -> None:
    """The table's comparisons share one UnitCache: a prediction set's unit values are computed
    once however many comparisons read it, and the replicates are those computed without it."""
    a, full = _two_benchmarks(0.8, 0.6, 3)
    b, _ = _two_benchmarks(0.8, 0.5, 3)
    plain = bootstrap.retain_replicates({"a": a, "b": b}, full, n_boot=200)
    calls = []
    real = bootstrap.unit_values
    monkeypatch.setattr(bootstrap, "unit_values", lambda d, rows: calls.append(id(rows)) or real(d, rows))
    cache = bootstrap.UnitCache()
    first = bootstrap.retain_replicates({"a": a, "b": b}, full, n_boot=200, cache=cache)
    pair = bootstrap.retain_replicates({"x": a, "y": b}, full, n_boot=200, cache=cache)
    assert len(calls) == len(set(calls)) == 3 * len(full)  # full, a and b per benchmark, once each
    for k in plain:
        assert first[k][0] == plain[k][0] and np.array_equal(first[k][1], plain[k][1])
    assert np.array_equal(pair["x"][1], plain["a"][1]) and np.array_equal(pair["y"][1], plain["b"][1])


def test_retain_over_seeds_averages_each_seeds_own_draws() -> None:
    (m0, f0), (m1, f1) = _two_benchmarks(0.8, 0.5, 0), _two_benchmarks(0.7, 0.6, 1)
    both = bootstrap.retain_ratio_ci({0: m0, 1: m1}, {0: f0, 1: f1}, n_boot=300)
    one, two = bootstrap.retain_ratio_ci(m0, f0, n_boot=300), bootstrap.retain_ratio_ci({1: m1}, {1: f1}, n_boot=300)
    assert both.estimate == pytest.approx((one.estimate + two.estimate) / 2)
    # the same (benchmark, seed) record set gets the same draws whichever call asks
    reps = bootstrap.retain_replicates({"x": {0: m0, 1: m1}}, {0: f0, 1: f1}, n_boot=300)["x"][1]
    r0 = bootstrap.retain_replicates({"x": m0}, f0, n_boot=300)["x"][1]
    r1 = bootstrap.retain_replicates({"x": {1: m1}}, {1: f1}, n_boot=300)["x"][1]
    assert np.allclose(reps, (r0 + r1) / 2)
    with pytest.raises(ValueError, match="no full-token predictions for seed 2"):
        bootstrap.retain_ratio_ci({2: m0}, {0: f0}, n_boot=10)
    zero = {b: [dict(r, prediction="zzz") for r in rows] for b, rows in f0.items()}
    with pytest.raises(ValueError, match="no retain ratio"):
        bootstrap.retain_ratio_ci(m0, zero, n_boot=10)


def test_seed_interval_hand_worked_and_closed_form_quantiles() -> None:
    # [2, 4, 6]: mean 4, sd 2, se 2 / sqrt 3; t(2) at 0.975 in closed form (2p - 1) / sqrt(2p(1 - p))
    p = 0.975
    t2 = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    ci = bootstrap.seed_interval([2.0, 4.0, 6.0])
    assert ci.estimate == 4.0 and ci.se == pytest.approx(2 / math.sqrt(3))
    assert (ci.lo, ci.hi) == pytest.approx((4 - t2 * 2 / math.sqrt(3), 4 + t2 * 2 / math.sqrt(3)), abs=2e-3)
    # t(1) is the Cauchy distribution: quantile tan(pi (p - 1/2))
    two = bootstrap.seed_interval([1.0, 3.0])
    assert two.hi - two.estimate == pytest.approx(math.tan(math.pi * (p - 0.5)) * 1.0, abs=2e-3)
    one = bootstrap.seed_interval([5.0])
    assert one.estimate == 5.0 and math.isnan(one.lo)


def test_seed_interval_covers_the_mean_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(0)
    for n in (3, 5):
        cis = (bootstrap.seed_interval(rng.normal(1.0, 2.0, n)) for _ in range(4000))
        hits = [(ci.lo <= 1.0 <= ci.hi) for ci in cis]
        assert abs(np.mean(hits) - 0.95) < 0.015, (n, np.mean(hits))


def test_a_capped_retain_counts_a_benchmark_above_full_tokens_as_100() -> None:
    """``cap``: each benchmark's retain is at most the cap before the mean, point and replicates
    alike (hand-worked: a GQA retain of 120% counts as 100 beside POPE's own)."""
    full = {"gqa": gqa_rows([True] * 5 + [False] * 5),
            "pope": pope_rows({"random": [True] * 4, "popular": [True] * 4})}
    method = {"gqa": gqa_rows([True] * 6 + [False] * 4),
              "pope": pope_rows({"random": [True, True, False, False], "popular": [True, True, False, False]})}
    g = 100 * score("gqa", method["gqa"])["score"] / score("gqa", full["gqa"])["score"]
    p = 100 * score("pope", method["pope"])["score"] / score("pope", full["pope"])["score"]
    assert g == pytest.approx(120.0) and p < 100
    plain, reps = bootstrap.retain_replicates({"m": method}, full, n_boot=200)["m"]
    capped, creps = bootstrap.retain_replicates({"m": method}, full, n_boot=200, cap=100.0)["m"]
    assert plain == pytest.approx((g + p) / 2) and capped == pytest.approx((100.0 + p) / 2)
    # replicate by replicate: the capped average never exceeds the plain one, and equals it
    # where the resampled GQA retain stays at or below 100
    ok = ~np.isnan(reps) & ~np.isnan(creps)
    assert np.all(creps[ok] <= reps[ok] + 1e-9) and np.all(creps[ok] <= 100.0 + 1e-9)
