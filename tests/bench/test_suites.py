"""Tests of the benchmark suites: synthetic twins checked against their scene data and the
official scorers (reference answers score perfectly, wrong ones zero), determinism, the
held-out seed space, per-benchmark structure (MMBench rotations, MME pairs, POPE balance,
TextVQA answers, multi-image frames), and real-format fixtures (VLMEvalKit TSV with base64
PNGs, a saved `datasets` dataset, parquet)."""

from __future__ import annotations

import base64
import io
import json
from collections import Counter, defaultdict

import datasets
import pytest
from PIL import Image

from ltopd.bench.scoring import score
from ltopd.bench.scoring.common import field
from ltopd.bench.scoring.mme import COGNITION, PERCEPTION
from ltopd.bench.scoring.vqa_norm import vqa_soft_accuracy
from ltopd.bench.store import save_records
from ltopd.bench.suites import (
    SUITES,
    RealFormatError,
    bench_seed,
    load_records,
    synthetic_records,
)
from ltopd.bench.suites.baseline import (
    blind_predictions,
    blind_predictions_oos,
    cross_fit_predictions,
    fit_blind,
    load_fit_records,
    question_only_score,
    question_only_score_oos,
)
from ltopd.bench.suites.synthetic import TRAIN_SEEDS
from ltopd.data.records import hash_record
from ltopd.data.world import COLORS, SHAPES
from ltopd.data.world.palette import plural

WORLD = {"image_size": 128}
N = 60
NAMES = sorted(SUITES)
MULTIPLE_CHOICE = ("vstar", "hrbench4k", "mmbench", "muirbench", "mvbench")
# the fields each scorer reads besides "answer" (module docstrings of bench/scoring)
SCORER_FIELDS = {
    "vstar": ("options", "task"), "hrbench4k": ("options", "cycle_category"),
    "gqa": (), "mmmu": ("question_type",), "mmbench": ("options", "index"),
    "mme": ("category", "image_id"), "pope": ("split",), "textvqa": ("answers",),
    "ocrbench": ("category", "answers"), "muirbench": ("options", "task"),
    "mvbench": ("options", "task"),
}
PERFECT = {"ocrbench": 1000.0}
SINGULAR = {plural(s): s for s in SHAPES}


@pytest.fixture(scope="module")
def twins() -> dict[str, list[dict]]:
    return {name: synthetic_records(name, N, 0, WORLD) for name in NAMES}


def meta(rec: dict) -> dict:
    return json.loads(rec["meta"])


def wrong(rec: dict, name: str) -> str:
    """A prediction that must be wrong under every scorer."""
    if rec["options"] and (name != "mmmu" or field(rec, "question_type") == "multiple-choice"):
        k = len(rec["options"])
        return chr(ord("A") + (ord(rec["answer"]) - ord("A") + 1) % k)
    if name in ("mme", "pope"):
        return {"yes": "No", "no": "Yes"}[rec["answer"].lower()]
    return "qqqq"


def scored(name: str, recs: list[dict], preds: list[str]) -> dict:
    return score(name, [dict(r, prediction=p) for r, p in zip(recs, preds)])


# ------------------------------------------------------------------ every twin

@pytest.mark.parametrize("name", NAMES)
def test_twin_has_n_records_unique_ids_and_scorer_fields(twins, name: str) -> None:
    recs = twins[name]
    assert len(recs) == N
    assert len({r["id"] for r in recs}) == N
    for r in recs:
        assert r["source"] == name and r["question"] and r["answer"] and r["task"]
        assert r["images"] and all(isinstance(i, Image.Image) for i in r["images"])
        for f in SCORER_FIELDS[name]:
            assert field(r, f) not in ("", [], None), (r["id"], f)
        if name in MULTIPLE_CHOICE:
            assert 2 <= len(r["options"]) <= 4 and len(set(r["options"])) == len(r["options"])
            assert r["answer"] in "ABCD"[: len(r["options"])]
        if name == "mmmu":
            assert bool(r["options"]) == (field(r, "question_type") == "multiple-choice")
    assert 8 <= SUITES[name].generation_cap <= 64


@pytest.mark.parametrize("name", NAMES)
def test_reference_answers_score_perfectly_and_wrong_answers_zero(twins, name: str) -> None:
    recs = twins[name]
    right = scored(name, recs, [r["answer"] for r in recs])
    off = scored(name, recs, [wrong(r, name) for r in recs])
    if name == "mme":
        n_categories = len({field(r, "category") for r in recs})
        assert right["score"] == pytest.approx(200.0 * n_categories)
    else:
        assert right["score"] == pytest.approx(PERFECT.get(name, 100.0))
    assert off["score"] == 0.0
    assert right["n_unparsed"] == 0


@pytest.mark.parametrize("name", NAMES)
def test_question_only_baseline_stays_low(twins, name: str) -> None:
    """The best image-blind guesser (majority answer per question template, fitted on the set
    itself) stays far below a perfect score; MMBench's circular rule defeats it entirely."""
    blind = question_only_score(name, twins[name])
    top = 200.0 * 7 if name == "mme" else PERFECT.get(name, 100.0)
    assert blind <= (0.0 if name == "mmbench" else 0.55 * top), blind


@pytest.mark.parametrize("name", NAMES)
def test_out_of_sample_baseline_stays_low_and_below_memorising(twins, name: str) -> None:
    """Fitted on the twin's records at another seed (the pipeline's fit seed), the blind guesser
    cannot memorise the scored set's answers: far below a perfect score, and on the open-answer
    twins (OCRBench, TextVQA) far below the in-sample guesser."""
    fit = synthetic_records(name, N, 1000, WORLD)
    oos = question_only_score_oos(name, twins[name], fit)
    top = 200.0 * 7 if name == "mme" else PERFECT.get(name, 100.0)
    assert oos <= (0.0 if name == "mmbench" else 0.55 * top), oos
    if name in ("ocrbench", "textvqa"):
        assert oos < 0.5 * question_only_score(name, twins[name])


def _rec(task: str, template: str, answer: str, options: list[str] = ()) -> dict:
    return {"id": f"{task}-{template}-{answer}", "task": task, "meta": json.dumps({"template": template}),
            "options": list(options), "answer": answer}


def test_blind_guesser_fallbacks_hand_worked() -> None:
    fit = [_rec("color", "t1", "red"), _rec("color", "t1", "red"), _rec("color", "t1", "blue"),
           _rec("color", "t2", "green"), _rec("color", "t2", "blue"),  # tie: alphabetically first
           _rec("count", "c1", "3"), _rec("mc", "m1", "B", ["x", "y", "z"])]
    guesser = fit_blind(fit)
    assert guesser.guess(_rec("color", "t1", "?")) == "red"         # its group
    assert guesser.guess(_rec("color", "t2", "?")) == "blue"        # its group, tie -> "blue" < "green"
    # unseen template: the task's (blue 2 = red 2 -> blue)
    assert guesser.guess(_rec("color", "t9", "?")) == "blue"
    assert guesser.guess(_rec("size", "s1", "?")) == "blue"         # unseen task: all open records' (blue 2, red 2)
    assert guesser.guess(_rec("mc", "m9", "?", ["x", "y", "z"])) == "B"
    assert guesser.guess(_rec("mc", "m1", "?", ["x"])) == "A"       # B is no option of a one-option record
    assert guesser.guess(_rec("other", "o", "?", ["x", "y"])) == "B"  # records with options: their answers
    empty = fit_blind([])
    assert empty.guess(_rec("a", "b", "?")) == "yes" and empty.guess(_rec("a", "b", "?", ["x", "y"])) == "A"
    # order of the fit records does not matter
    assert blind_predictions_oos(fit[:3], fit) == blind_predictions_oos(fit[:3], fit[::-1]) == ["red"] * 3
    # in sample, a one-record group is answered by itself (the optimistic bound)
    assert blind_predictions([_rec("color", "t5", "pink")]) == ["pink"]


def test_cross_fit_never_sees_the_scored_fold() -> None:
    """Each record its own template and answer: in sample every guess is right; cross-fitted,
    a record's template is unseen (its fold is held out), so no guess is its own answer."""
    recs = [_rec("t", f"tpl{i}", f"ans{i}") for i in range(20)]
    assert blind_predictions(recs) == [r["answer"] for r in recs]
    preds = cross_fit_predictions(recs, k=5, seed=0)
    assert all(p != r["answer"] for p, r in zip(preds, recs))
    assert preds == cross_fit_predictions(recs, k=5, seed=0)
    with pytest.raises(ValueError, match="k >= 2"):
        cross_fit_predictions(recs, k=1)


def test_cross_fit_keeps_a_group_in_one_fold() -> None:
    """Twenty pairs, each pair its own template and answer (an MME image's two questions, say):
    split across folds, a record would be answered from its pair-mate; kept together, never."""
    recs = [dict(_rec("t", f"tpl{i}", f"ans{i}"), id=f"{i}-{j}") for i in range(20) for j in range(2)]
    groups = [r["id"].split("-")[0] for r in recs]
    together = cross_fit_predictions(recs, k=5, seed=0, groups=groups)
    assert all(p != r["answer"] for p, r in zip(together, recs))
    apart = cross_fit_predictions(recs, k=5, seed=0)
    assert any(p == r["answer"] for p, r in zip(apart, recs))
    assert question_only_score_oos("gqa", recs, groups=groups) == 0.0


def test_fit_records_load_without_images(tmp_path) -> None:
    recs = synthetic_records("vstar", 4, 1000, WORLD)
    save_records(recs, tmp_path / "fit")
    loaded = load_fit_records(tmp_path / "fit")
    assert [r["answer"] for r in loaded] == [r["answer"] for r in recs]
    assert all("images" not in r and r["meta"] and r["task"] for r in loaded)
    with pytest.raises(FileNotFoundError, match="not a saved benchmark"):
        load_fit_records(tmp_path / "nowhere")


@pytest.mark.parametrize("name", NAMES)
def test_twin_is_deterministic_and_seed_dependent(twins, name: str) -> None:
    n = 6 if name != "mme" else 14
    again = synthetic_records(name, n, 0, WORLD)
    assert [hash_record(r) for r in again] == \
        [hash_record(r) for r in synthetic_records(name, n, 0, WORLD)]
    if name != "mmbench":  # MMBench fits its last groups' option counts to n
        assert [hash_record(r) for r in again] == [hash_record(r) for r in twins[name][:n]]
    other = synthetic_records(name, n, 1, WORLD)
    assert [hash_record(r) for r in other] != [hash_record(r) for r in again]


def test_evaluation_seeds_avoid_training_seeds_and_differ_per_benchmark() -> None:
    for seed in (0, 1, *TRAIN_SEEDS):
        derived = [bench_seed(n, seed) for n in NAMES]
        assert len(set(derived)) == len(NAMES)
        assert all(d >= 2**40 and d not in TRAIN_SEEDS for d in derived)
    with pytest.raises(ValueError, match="seed"):
        bench_seed("pope", -1)


# ------------------------------------------------------------------ single-image structure

def test_vstar_targets_are_the_tiny_object_and_the_answer_is_its_colour(twins) -> None:
    for r in twins["vstar"]:
        if r["task"] != "direct_attributes":
            continue
        tiny = [o for o in meta(r)["scene"]["objects"] if o["size_class"] == "tiny"]
        assert len(tiny) == 1 and tiny[0]["shape"] in r["question"]
        assert r["options"][ord(r["answer"]) - 65] == tiny[0]["color"]
        x, y = tiny[0]["cx"], tiny[0]["cy"]
        assert r["images"][0].getpixel((x, y)) == COLORS[tiny[0]["color"]]


def test_hrbench_uses_a_doubled_canvas_and_balanced_cycle_categories(twins) -> None:
    recs = twins["hrbench4k"]
    assert all(r["images"][0].size == (256, 256) for r in recs)
    assert Counter(field(r, "cycle_category") for r in recs) == {"single": N // 2, "cross": N // 2}


def test_mmbench_rotations_carry_one_base_question_with_rotated_options(twins) -> None:
    groups: dict[int, list[dict]] = defaultdict(list)
    for r in twins["mmbench"]:
        groups[int(field(r, "index")) % 1_000_000].append(r)
    for members in groups.values():
        k = len(members[0]["options"])
        assert len(members) == k and {r["question"] for r in members} == {members[0]["question"]}
        base = next(r for r in members if int(field(r, "index")) < 1_000_000)["options"]
        texts = set()
        for r in members:
            j = int(field(r, "index")) // 1_000_000
            assert r["options"] == base[j:] + base[:j]
            texts.add(r["options"][ord(r["answer"]) - 65])
        assert len(texts) == 1  # the same answer text behind every rotated letter
        assert len({r["answer"] for r in members}) == k
    # one wrong rotation sinks its group only
    recs = twins["mmbench"]
    first = min(groups)
    preds = [wrong(r, "mmbench") if r is groups[first][0] else r["answer"] for r in recs]
    out = scored("mmbench", recs, preds)
    assert out["score"] == pytest.approx(100.0 * (len(groups) - 1) / len(groups))
    assert out["vanilla_accuracy"] == pytest.approx(100.0 * (N - 1) / N)


def test_mme_has_one_yes_and_one_no_question_per_image(twins) -> None:
    recs = twins["mme"]
    by_image: dict[str, list[dict]] = defaultdict(list)
    for r in recs:
        by_image[field(r, "image_id")].append(r)
    assert all(sorted(x["answer"] for x in v) == ["No", "Yes"] for v in by_image.values())
    cats = {field(r, "category") for r in recs}
    assert cats == {"existence", "count", "position", "color", "OCR", "numerical_calculation",
                    "code_reasoning"}
    assert cats <= set(PERCEPTION + COGNITION)
    # always "yes": acc 50 and acc+ 0 in every category -> 50 per category
    assert scored("mme", recs, ["yes"] * len(recs))["score"] == pytest.approx(50.0 * len(cats))


def test_mme_answers_agree_with_the_scene(twins) -> None:
    for r in twins["mme"]:
        objs = meta(r)["scene"]["objects"]
        if field(r, "category") == "existence":
            name = r["question"].split("Is there ")[1].split(" in this image")[0].split(" ", 1)[1]
            assert (name in {f"{o['color']} {o['shape']}" for o in objs}) == (r["answer"] == "Yes")
        if field(r, "category") == "count":
            words = r["question"].split()
            k, label = int(words[2]), words[3]
            shape = SINGULAR.get(label, label)
            n = sum(o["color"] == label if label in COLORS else o["shape"] == shape for o in objs)
            assert (n == k) == (r["answer"] == "Yes"), r["question"]


def test_pope_splits_are_balanced_and_answers_match_the_scene(twins) -> None:
    recs = twins["pope"]
    per_split = Counter((field(r, "split"), r["answer"]) for r in recs)
    sizes = Counter(field(r, "split") for r in recs)
    for split in ("random", "popular", "adversarial"):
        assert per_split[(split, "yes")] == per_split[(split, "no")] > 0
    assert max(sizes.values()) - min(sizes.values()) <= 2
    for r in recs:
        m = meta(r)
        objs = m["scene"]["objects"]
        names = {f"{o['color']} {o['shape']}" for o in objs}
        assert (m["object"] in names) == (r["answer"] == "yes")
        if r["answer"] == "no" and m["split"] == "adversarial":
            color, shape = m["object"].split()
            assert color in {o["color"] for o in objs} and shape in {o["shape"] for o in objs}
    # every image is asked about in all three splits
    splits_of = defaultdict(set)
    for r in recs:
        splits_of[field(r, "image_id")].add(field(r, "split"))
    assert all(len(s) == 3 for s in list(splits_of.values())[:-1])


def test_textvqa_ten_answers_with_a_majority_for_the_reference(twins) -> None:
    def simple(a: str) -> str:  # case, trailing period and article only
        a = a.lower().rstrip(".")
        return a[4:] if a.startswith("the ") else a

    for r in twins["textvqa"]:
        answers = field(r, "answers")
        assert len(answers) == 10
        assert sum(simple(a) == r["answer"] for a in answers) >= 7
        assert vqa_soft_accuracy(r["answer"], answers) == 1.0
        assert r["answer"] in meta(r)["scene"]["text"]["fields"].values()


def test_ocrbench_covers_five_categories_in_official_proportions(twins) -> None:
    counts = Counter(field(r, "category") for r in twins["ocrbench"])
    assert counts == {"text_recognition": 18, "scene_vqa": 12, "doc_vqa": 12, "kie": 12,
                      "hmer": 6}
    for r in twins["ocrbench"]:
        if field(r, "category") == "hmer":
            assert r["answer"] in meta(r)["scene"]["text"]["lines"]


def test_mmmu_has_both_question_types_with_correct_arithmetic(twins) -> None:
    recs = twins["mmmu"]
    kinds = Counter(field(r, "question_type") for r in recs)
    assert kinds["multiple-choice"] > kinds["open"] > 0
    for r in recs:
        value = r["options"][ord(r["answer"]) - 65] if r["options"] else r["answer"]
        objs = meta(r)["scene"]["objects"]
        if r["task"] == "difference":
            words = r["question"].split()
            n = Counter(o["shape"] for o in objs)
            assert int(value) == n[SINGULAR[words[3]]] - n[SINGULAR[words[5]]]


# ------------------------------------------------------------------ multi-image

def test_multi_image_records_have_several_images_and_check_out(twins) -> None:
    for r in twins["muirbench"]:
        assert 2 <= len(r["images"]) <= 4
        m = meta(r)
        if r["task"] == "image_text_matching":
            holds = [m["target"] in {f"{o['color']} {o['shape']}" for o in s["objects"]}
                     for s in m["scenes"]]
            assert holds == [i == ord(r["answer"]) - 65 for i in range(len(holds))]
        if r["task"] == "counting":
            total = sum(o["shape"] == m["shape"] for s in m["scenes"] for o in s["objects"])
            assert r["options"][ord(r["answer"]) - 65] == str(total)
    for r in twins["mvbench"]:
        assert 3 <= len(r["images"]) <= 4
        m = meta(r)
        if r["task"] == "moving_direction":
            (x0, y0), (x1, y1) = m["track"][0], m["track"][-1]
            way = r["options"][ord(r["answer"]) - 65]
            expected = {"left": x1 < x0, "right": x1 > x0, "up": y1 < y0, "down": y1 > y0}
            assert expected[way] and sum(expected.values()) == 1
            for img, (x, y) in zip(r["images"], m["track"]):  # the object is drawn there
                assert img.getpixel((x, y)) == COLORS[m["color"]]


# ------------------------------------------------------------------ real formats

def _png(color: tuple[int, int, int], size: tuple[int, int] = (16, 12)) -> Image.Image:
    return Image.new("RGB", size, color)


def _b64(img: Image.Image) -> str:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _tsv(path, header: list[str], rows: list[list[object]]) -> None:
    lines = ["\t".join(header)] + ["\t".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def test_vlmevalkit_mmbench_tsv_loads_with_image_references_and_rotations(tmp_path) -> None:
    red, blue = _png((200, 0, 0)), _png((0, 0, 200))
    header = ["index", "question", "hint", "A", "B", "C", "D", "answer", "category",
              "l2-category", "image"]
    _tsv(tmp_path / "mmb.tsv", header, [
        [0, "Colour?", "nan", "red", "blue", "", "", "A", "attribute_recognition", "attr",
         _b64(red)],
        [1000000, "Colour?", "nan", "blue", "red", "", "", "B", "attribute_recognition",
         "attr", "0"],  # refers to row index 0's image, as VLMEvalKit does
        [1, "Which?", "Look left", "x", "y", "z", "", "C", "ocr", "ocr", _b64(blue)],
    ])
    recs = load_records("mmbench", tmp_path / "mmb.tsv")
    assert [r["id"] for r in recs] == ["mmbench-0", "mmbench-1000000", "mmbench-1"]
    assert recs[1]["images"][0].getpixel((3, 3)) == (200, 0, 0)
    assert recs[2]["options"] == ["x", "y", "z"] and recs[2]["question"].startswith("Hint: ")
    out = scored("mmbench", recs, [r["answer"] for r in recs])
    assert out["n_groups"] == 2 and out["score"] == 100.0


def test_mmbench_without_circular_copies_gets_rotations(tmp_path) -> None:
    header = ["index", "question", "A", "B", "C", "answer", "image"]
    _tsv(tmp_path / "m.tsv", header, [[7, "Q?", "p", "q", "r", "B", _b64(_png((1, 2, 3)))]])
    recs = load_records("mmbench", tmp_path / "m.tsv")
    assert [field(r, "index") for r in recs] == [7, 1000007, 2000007]
    assert [r["options"][ord(r["answer"]) - 65] for r in recs] == ["q", "q", "q"]


def test_vlmevalkit_mme_tsv_pairs_questions_by_image(tmp_path) -> None:
    header = ["index", "question", "answer", "category", "image"]
    img = _b64(_png((9, 9, 9)))
    _tsv(tmp_path / "mme.tsv", header, [
        [0, "Is it grey? Please answer yes or no.", "Yes", "color", img],
        [1, "Is it red? Please answer yes or no.", "No", "color", "0"],
        [2, "Is there text? Please answer yes or no.", "no", "OCR", img],
        [3, "Is there a panel? Please answer yes or no.", "yes", "OCR", "2"],
    ])
    recs = load_records("mme", tmp_path / "mme.tsv")
    assert [field(r, "image_id") for r in recs] == ["0", "0", "2", "2"]
    assert [r["answer"] for r in recs] == ["Yes", "No", "No", "Yes"]
    assert scored("mme", recs, [r["answer"] for r in recs])["score"] == 400.0


def test_saved_dataset_pope_and_missing_column_errors(tmp_path) -> None:
    features = datasets.Features({"question": datasets.Value("string"),
                                  "answer": datasets.Value("string"),
                                  "category": datasets.Value("string"),
                                  "image": datasets.Image()})
    rows = {"question": ["Is there a cat in the image?", "Is there a dog in the image?"],
            "answer": ["yes", "no"], "category": ["adversarial", "popular"],
            "image": [_png((10, 20, 30)), _png((40, 50, 60))]}
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "pope"))
    recs = load_records("pope", tmp_path / "pope")
    assert [field(r, "split") for r in recs] == ["adversarial", "popular"]
    assert recs[1]["images"][0].getpixel((0, 0)) == (40, 50, 60)
    assert scored("pope", recs, ["Yes", "No"])["score"] == 100.0

    bad = {k: v for k, v in rows.items() if k != "category"}
    datasets.Dataset.from_dict(bad).save_to_disk(str(tmp_path / "pope_bad"))
    with pytest.raises(RealFormatError, match=r"pope_bad.*'split' / 'category'"):
        load_records("pope", tmp_path / "pope_bad")
    _tsv(tmp_path / "v.tsv", ["index", "question", "A", "B", "image"],
         [[0, "Q?", "l", "r", _b64(_png((0, 0, 0)))]])
    with pytest.raises(RealFormatError, match=r"v\.tsv.*missing column 'answer'"):
        load_records("vstar", tmp_path / "v.tsv")


def test_parquet_textvqa_ocrbench_mmmu_and_muirbench(tmp_path) -> None:
    img = _png((5, 6, 7))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    png = {"bytes": buf.getvalue(), "path": None}
    ten = ["Stop", "stop", "the stop", "stop", "stop", "top", "stop", "STOP", "stop", "stop"]
    datasets.Dataset.from_dict({"question": ["what does it say?"], "answers": [ten],
                                "image": [png]}).to_parquet(str(tmp_path / "t.parquet"))
    recs = load_records("textvqa", tmp_path / "t.parquet")
    assert field(recs[0], "answers") == ten and recs[0]["answer"] == "stop"
    assert scored("textvqa", recs, ["STOP"])["score"] == 100.0

    (tmp_path / "ocr").mkdir()
    datasets.Dataset.from_dict({
        "question": ["what is written?", "formula?"], "answer": [["Hello"], ["x^2+1"]],
        "question_type": ["Regular Text Recognition",
                          "Handwritten Mathematical Expression Recognition"],
        "image": [png, png]}).to_parquet(str(tmp_path / "ocr" / "part-0.parquet"))
    recs = load_records("ocrbench", tmp_path / "ocr")
    assert [field(r, "category") for r in recs][1].startswith("Handwritten")
    assert scored("ocrbench", recs, ["it says hello", "x^2 + 1"])["hits"] == 2

    features = datasets.Features({"id": datasets.Value("string"),
                                  "question": datasets.Value("string"),
                                  "options": datasets.Value("string"),
                                  "answer": datasets.Value("string"),
                                  "question_type": datasets.Value("string"),
                                  "image_1": datasets.Image(), "image_2": datasets.Image()})
    datasets.Dataset.from_dict({
        "id": ["v1", "v2"], "question": ["<image 1> pick", "<image 1> value?"],
        "options": ["['1', '2', '3']", "[]"], "answer": ["C", "2.5"],
        "question_type": ["multiple-choice", "open"], "image_1": [img, img],
        "image_2": [img, None]}, features=features).save_to_disk(str(tmp_path / "mmmu"))
    recs = load_records("mmmu", tmp_path / "mmmu")
    assert [len(r["images"]) for r in recs] == [2, 1] and recs[0]["options"] == ["1", "2", "3"]
    assert scored("mmmu", recs, ["C", "2.5"])["score"] == 100.0

    datasets.Dataset.from_dict({
        "idx": ["m0"], "task": ["Counting"], "question": ["How many?"],
        "options": [["1", "2"]], "answer": ["B"], "image_list": [[png, png, png]],
    }).to_parquet(str(tmp_path / "muir.parquet"))
    recs = load_records("muirbench", tmp_path / "muir.parquet")
    assert len(recs[0]["images"]) == 3 and recs[0]["task"] == "Counting"
    assert scored("muirbench", recs, ["B"])["score"] == 100.0


def test_unknown_benchmark_and_odd_pair_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown benchmark"):
        synthetic_records("nope", 2, 0, WORLD)
    for name in ("mme", "pope"):
        with pytest.raises(ValueError, match="even"):
            synthetic_records(name, 3, 0, WORLD)
    with pytest.raises(ValueError, match=">= 2"):
        synthetic_records("mmbench", 1, 0, WORLD)
