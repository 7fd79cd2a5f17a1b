"""The evaluation runner and the benchmark record store: wiring checked against the official
scorers run independently on known predictions."""
from __future__ import annotations

import json

import datasets
import pytest
from PIL import Image

from ltopd.bench import evaluate as evaluate_mod
from ltopd.bench.evaluate import clean, evaluate
from ltopd.bench.scoring import score
from ltopd.bench.store import build_records, load_saved, save_records
from ltopd.data.records import hash_record
from ltopd.grid import eval_setting
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.tokenizer import build_tokenizer

WORLD = {"image_size": 128}


@pytest.fixture(scope="module")
def vstar() -> list[dict]:
    return build_records("vstar", {"n": 6}, 0, WORLD)


def test_saved_records_round_trip_text_and_pixels(tmp_path, vstar) -> None:
    save_records(vstar, tmp_path / "vstar")
    back = load_saved(tmp_path / "vstar")
    assert [hash_record(r) for r in back] == [hash_record(r) for r in vstar]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_load_saved_names_the_missing_folder(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere: not a saved benchmark.*ltopd build-bench"):
        load_saved(tmp_path / "nowhere")


def test_real_entry_loads_the_local_dataset_and_ignores_the_seed(tmp_path) -> None:
    features = datasets.Features({"question": datasets.Value("string"), "answer": datasets.Value("string"),
                                  "category": datasets.Value("string"), "image": datasets.Image()})
    rows = {"question": ["Is there a cat in the image?"] * 2, "answer": ["yes", "no"],
            "category": ["random", "random"], "image": [Image.new("RGB", (8, 8), (9, 9, 9))] * 2}
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "pope"))
    a = build_records("pope", {"path": str(tmp_path / "pope")}, 0, WORLD)
    b = build_records("pope", {"path": str(tmp_path / "pope")}, 5, WORLD)
    assert [r["answer"] for r in a] == ["yes", "no"] and [hash_record(r) for r in a] == [hash_record(r) for r in b]
    save_records(a, tmp_path / "saved")
    assert [r["id"] for r in load_saved(tmp_path / "saved")] == [r["id"] for r in a]


def test_synthetic_entry_depends_on_the_seed() -> None:
    a = build_records("pope", {"n": 6}, 0, WORLD)
    b = build_records("pope", {"n": 6}, 1, WORLD)
    assert len(a) == len(b) == 6 and [hash_record(r) for r in a] != [hash_record(r) for r in b]


@pytest.mark.parametrize("method,budget,expected", [
    ("full", 1.0, (1.0, "cdpruner")), ("divprune", 0.05, (0.05, "divprune")),
    ("fastv", 0.2, (0.2, "fastv")), ("ltopd", 0.05, (0.05, "cdpruner")), ("sft", 0.05, (0.05, "cdpruner")),
])
def test_eval_setting(method, budget, expected) -> None:
    assert eval_setting(method, budget, "cdpruner") == expected


def test_a_trained_student_is_evaluated_with_its_training_selector() -> None:
    assert eval_setting("ltopd", 0.05, "divprune") == (0.05, "divprune")
    assert eval_setting("divprune", 0.05, "cdpruner") == (0.05, "divprune")  # a selector is itself
    with pytest.raises(ValueError, match="training.selector"):
        eval_setting("sft", 0.05)


def test_eval_setting_rejects_unknown_method_and_bad_budget() -> None:
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        eval_setting("nope", 0.1)
    with pytest.raises(ValueError, match="budget must be in"):
        eval_setting("cdpruner", 0.0)


def test_clean_cuts_at_the_end_of_turn() -> None:
    assert clean("B</answer><|im_end|>\ntrailing") == "B</answer>"
    assert clean("no end") == "no end"


def _fake_predict(answers):
    def predict(backbone, records, settings, floor, batch_size, max_new_tokens, seed, progress, desc, counts):
        predict.calls += [{"ratio": ratio, "selector": selector, "floor": floor, "cap": max_new_tokens}
                          for ratio, selector in settings]
        for tally in counts:  # as if every record had one 10-token image, 3 of them kept
            tally[0], tally[1] = tally[0] + 3 * len(records), tally[1] + 10 * len(records)
        return [[answers(r) for r in records] for _ in settings]
    predict.calls = []
    return predict


@pytest.mark.parametrize("benchmark", ["vstar", "pope", "mme", "textvqa"])
def test_evaluate_scores_reference_answers_perfectly_and_counts_unparsed(monkeypatch, benchmark) -> None:
    recs = build_records(benchmark, {"n": 8}, 0, WORLD)
    fake = _fake_predict(lambda r: f"{r['answer']}</answer><|im_end|>")
    monkeypatch.setattr(evaluate_mod, "predict_settings", fake)
    rows, metrics = evaluate(None, recs, benchmark, 0.1, "divprune", floor=3, progress=False)
    # MME: acc + acc+ (each 100) per category, summed over the categories present
    perfect = 200.0 * len(metrics["per_category"]) if benchmark == "mme" else 100.0
    assert metrics["n"] == 8 and metrics["n_unparsed"] == 0 and metrics["score"] == perfect
    assert metrics == {**score(benchmark, rows), "wall_s": metrics["wall_s"],
                       "questions_per_s": metrics["questions_per_s"], "settings_per_pass": 1,
                       "kept_tokens": 3 * 8, "visual_tokens": 10 * 8}
    assert fake.calls[0]["ratio"] == 0.1 and fake.calls[0]["selector"] == "divprune" and fake.calls[0]["floor"] == 3
    assert all("images" not in r and r["prediction"].endswith("</answer>") for r in rows)

    monkeypatch.setattr(evaluate_mod, "predict_settings", _fake_predict(lambda r: ""))
    _, empty = evaluate(None, recs, benchmark, 1.0, None, 1, progress=False)
    # POPE's evaluate.py reads an empty reply as "yes": the share of "yes" labels (balanced splits)
    assert empty["n_unparsed"] == 8 and empty["score"] == (50.0 if benchmark == "pope" else 0)


@pytest.mark.parametrize("benchmark", ["gqa", "pope", "mme", "textvqa", "hrbench4k"])
def test_prediction_rows_leave_the_scene_in_the_record_set(monkeypatch, benchmark) -> None:
    """A row's meta is its record's minus the drawn scene, and the row alone scores as the job did."""
    recs = build_records(benchmark, {"n": 8}, 0, WORLD)
    assert all("scene" in json.loads(r["meta"]) for r in recs)
    monkeypatch.setattr(evaluate_mod, "predict_settings", _fake_predict(lambda r: f"{r['answer']}</answer>"))
    rows, metrics = evaluate(None, recs, benchmark, 1.0, None, 1, progress=False)
    for rec, row in zip(recs, rows, strict=True):
        expected = {k: v for k, v in json.loads(rec["meta"]).items() if k != "scene"}
        assert json.loads(row["meta"]) == expected
    saved = [json.loads(json.dumps(r)) for r in rows]  # as read back from predictions.jsonl
    timing = ("wall_s", "questions_per_s", "settings_per_pass", "kept_tokens", "visual_tokens")
    assert score(benchmark, saved) == {k: v for k, v in metrics.items() if k not in timing}


@pytest.mark.parametrize("meta", [None, "", '{"category": "OCR", "answers": ["a"]}', {"category": "OCR"}, "[1]"])
def test_row_meta_keeps_a_meta_without_a_scene_as_it_is(meta) -> None:
    assert evaluate_mod.row_meta(meta) is meta
    assert evaluate_mod.row_meta({"scene": {}, "category": "OCR"}) == {"category": "OCR"}


def test_evaluate_rejects_unknown_benchmark_and_empty_records() -> None:
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        evaluate(None, [{"id": "x"}], "nope", 1.0, None, 1)
    with pytest.raises(ValueError, match="vstar: no records"):
        evaluate(None, [], "vstar", 1.0, None, 1)


def test_evaluate_runs_a_real_twin_end_to_end(vstar) -> None:
    """The real path: encode, select at 5%, greedy generate with the cache, score."""
    from ltopd.catalog import BENCHMARKS
    from ltopd.twins.corpus import corpus

    tok = build_tokenizer(list(corpus(WORLD, 4, BENCHMARKS)), 600)
    bb = twin_backbone("qwen35-tiny", tok, seed=0)
    rows, m = evaluate(bb, vstar, "vstar", 0.05, "cdpruner", floor=1, batch_size=4, progress=False)
    again, m2 = evaluate(bb, vstar, "vstar", 0.05, "cdpruner", floor=1, batch_size=3, progress=False)
    assert [r["prediction"] for r in rows] == [r["prediction"] for r in again]  # batching-invariant, greedy
    assert m["n"] == 6 and m["score"] == m2["score"]
    # the tokens counted: each image's merged tokens from its grid, and the paper's keep count of them
    from ltopd.selectors import keep_count

    grid = [h * w for h, w in bb.ops.grid_hw(bb.model, bb.encode(vstar).inputs)]
    assert m["visual_tokens"] == m2["visual_tokens"] == sum(grid)
    assert m["kept_tokens"] == m2["kept_tokens"] == sum(keep_count(n, 0.05, 1) for n in grid) < sum(grid)
    json.dumps(rows)  # prediction rows are plain JSON
