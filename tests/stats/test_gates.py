"""The question-only baseline behind the gates (ltopd.stats.gates): the uniform guess and the
answer prior, which is chosen, on which records."""

from __future__ import annotations

import json

from ltopd.stats import gates


def test_chance_guesses_by_hand() -> None:
    rows = [{"options": ["x", "y", "z"]}, {"options": []}, {"options": []}]
    prior = ["A", "yes", "w0"]
    guesses = [gates.chance_predictions(rows, prior, "mme", seed) for seed in range(40)]
    assert all(g[0] in "ABC" and g[1] in ("yes", "no") and g[2] == "w0" for g in guesses)  # open: the prior's
    assert {g[0] for g in guesses} == set("ABC") and {g[1] for g in guesses} == {"yes", "no"}
    assert gates.chance_predictions(rows, prior, "mme", 3) == guesses[3]  # seeded


def test_on_mme_pairs_a_coin_beats_every_constant_answer_and_becomes_the_baseline() -> None:
    """MME scores acc + acc+ per category: a constant answer gets 50 + 0, a coin about 50 + 25."""
    from ltopd.bench.scoring import score
    from ltopd.bench.suites import synthetic_records

    world = {"image_size": 128}
    scored, fit = synthetic_records("mme", 400, 0, world), synthetic_records("mme", 400, 1, world)
    rows, how = gates.question_only(scored, "mme", fit)
    categories = len({json.loads(r["meta"])["category"] for r in scored})
    assert how.startswith("uniform guess") and "400 records of another seed" in how
    assert score("mme", [dict(r, prediction="yes") for r in scored])["score"] == 50 * categories
    assert 60 * categories < score("mme", rows)["score"] < 90 * categories  # about 75 per category
    # where the prior is the better guesser (GQA's open answers) it stays
    _, gqa_how = gates.question_only(synthetic_records("gqa", 60, 0, world), "gqa",
                                     synthetic_records("gqa", 60, 1, world))
    assert gqa_how == "60 records of another seed"


def test_the_guesser_is_chosen_out_of_sample_and_cross_fitted_without_fit_records() -> None:
    from ltopd.bench.suites import synthetic_records

    world = {"image_size": 128}
    scored = synthetic_records("mme", 200, 0, world)
    # no fit records (real data): chosen on the scored items, the prior cross-fitted there
    rows, how = gates.question_only(scored, "mme")
    assert how.startswith("uniform guess") and "5-fold cross-fit" in how
    # an empty fit set: nothing to choose on, the prior's fallbacks answer ('yes')
    rows, how = gates.question_only(scored, "mme", [])
    assert how == "0 records of another seed" and {r["prediction"] for r in rows} == {"yes"}
