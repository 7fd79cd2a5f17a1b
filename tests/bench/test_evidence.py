"""Evidence-first instruction answers ("cyan, so B"): each styled benchmark's official parser reads
them as the plain answer, and the evidence is what the image shows."""

import itertools
import json

import pytest

from conftest import ROOT
from ltopd.bench.evidence import EVIDENCE, option_evidence, pope_evidence, restyle, with_evidence
from ltopd.bench.scoring import score
from ltopd.bench.suites import BENCHMARKS, synthetic_records

WORLD = {"image_size": 128}


@pytest.mark.parametrize("benchmark", sorted(EVIDENCE))
def test_the_official_parser_reads_an_evidence_first_reply_as_its_answer(benchmark):
    records = synthetic_records(benchmark, 64, 11, WORLD)
    styled = [with_evidence(r, benchmark) for r in records]
    assert sum(s["answer"] != r["answer"] for s, r in zip(styled, records)) >= 32  # most items styled
    right = score(benchmark, [{**r, "prediction": f"{s['answer']}</answer>"} for r, s in zip(records, styled)])
    assert right["score"] == 100.0 and right["n_unparsed"] == 0
    # the check can fail: a reply whose verdict is flipped (another option's letter; no letter at all
    # would not do: lmms-eval's MMBench reads the option whose text the evidence names) scores below 100
    def flipped(r: dict) -> str:
        return ("no" if r["answer"] == "yes" else "yes") if benchmark == "pope" else \
            next(x for x in "ABCD" if x != r["answer"])

    wrong = [{**r, "prediction": s["answer"].rsplit(", so ", 1)[0] + ", so " + flipped(r)}
             for r, s in zip(records, styled)]
    assert score(benchmark, wrong)["score"] < 100.0


def test_every_styled_benchmark_is_a_twin_and_the_whole_answer_parsers_are_left_out():
    assert set(EVIDENCE) <= set(BENCHMARKS)
    assert not {"mme", "gqa", "textvqa", "ocrbench"} & set(EVIDENCE)
    with pytest.raises(ValueError, match="mme.*allowed values"):
        with_evidence(synthetic_records("mme", 2, 0, WORLD)[0], "mme")


def test_vstar_replies_open_with_words_its_letter_first_parser_skips():
    from ltopd.bench.scoring.vstar import parse_vstar

    item = {"question": "What is the color of the tiny cross?", "options": ["blue", "cyan"], "answer": "B"}
    styled = with_evidence(item, "vstar")
    assert styled["answer"] == "it is cyan, so B"
    assert parse_vstar(styled["answer"]) == "B"
    assert parse_vstar("cyan, so B") == "C"  # why the default form cannot be used
    # its questions are HR-Bench's word for word: the instruction sets the twins apart
    assert styled["question"] == item["question"] + " First name what you see, then answer with the option's letter."
    assert with_evidence(item, "hrbench4k")["question"] == item["question"]


def test_option_evidence_is_the_correct_options_text_and_open_items_stay_plain():
    assert option_evidence({"options": ["red", "cyan", "blue"], "answer": "B"}) == "cyan"
    assert option_evidence({"options": [], "answer": "4"}) is None
    item = {"options": [], "answer": "4", "id": "x"}
    assert with_evidence(item, "mmmu") is item


def test_pope_evidence_names_the_colours_of_the_asked_shape_by_hand():
    scene = {"objects": [{"shape": "cross", "color": "yellow"}, {"shape": "star", "color": "green"},
                         {"shape": "cross", "color": "blue"}]}
    ask = lambda obj: {"meta": json.dumps({"object": obj, "scene": scene}), "answer": "no"}  # noqa: E731
    assert pope_evidence(ask("green cross")) == "blue yellow"
    assert pope_evidence(ask("red circle")) == "none"
    styled = with_evidence(dict(ask("green cross"), question="Is there a green cross in the image?"), "pope")
    assert styled["answer"] == "blue yellow, so no"
    # asked for in the question, which is otherwise GQA's and the world task's word for word
    assert styled["question"] == ("Is there a green cross in the image? "
                                  "First name the colour of each cross, then answer yes or no.")


def test_only_twins_sharing_a_plain_question_get_an_instruction():
    from ltopd.bench.evidence import INSTRUCTIONS, instructed

    assert set(INSTRUCTIONS) == {"pope", "vstar"} <= set(EVIDENCE)
    gqa = synthetic_records("gqa", 2, 3, WORLD)[0]
    assert instructed(gqa, "gqa") is gqa
    for r in synthetic_records("mmbench", 8, 3, WORLD):  # option lists set the choice twins apart already
        assert with_evidence(r, "mmbench")["question"] == r["question"]


def test_pope_evidence_agrees_with_the_label():
    for r in synthetic_records("pope", 64, 3, WORLD):
        color = json.loads(r["meta"])["object"].split()[0]
        assert (color in pope_evidence(r).split()) == (r["answer"] == "yes")


def test_a_stage_styles_only_its_evidence_twins_and_a_text_stage_drops_images():
    from ltopd.bench.suites.instruct import instruct_stream

    items = list(restyle(itertools.islice(instruct_stream(["pope", "gqa"], 0, WORLD), 6), ["pope"]))
    assert all(", so " in r["answer"] for r in items if r["source"] == "pope")
    assert not any(", so " in r["answer"] for r in items if r["source"] == "gqa")
    assert all(r["images"] for r in items)
    text = list(restyle(iter(items), drop_images=True))
    assert [r["answer"] for r in text] == [r["answer"] for r in items] and not any(r["images"] for r in text)
    assert list(restyle(iter(items[:2]))) == items[:2]


def test_evidence_replies_fit_the_generation_cap():
    from ltopd.bench.suites import SUITES
    from ltopd.models.loading import load_tokenizer

    tok = load_tokenizer(ROOT / "releases" / "qwen35-tiny")  # the default twin's tokenizer
    for benchmark in EVIDENCE:
        for r in synthetic_records(benchmark, 100, 9, WORLD):
            reply = with_evidence(r, benchmark)["answer"] + "</answer>"
            assert len(tok(reply, add_special_tokens=False)["input_ids"]) <= SUITES[benchmark].generation_cap


def test_config_schema_offers_exactly_the_evidence_styles():
    """The schema's `evidence` enums (a stage's, a backbone's) are the catalog's evidence-first
    benchmarks, which are the registered styles."""
    from ltopd import config
    from ltopd.catalog import evidence_benchmarks

    schema = config.schema()
    refs = {schema["$defs"]["stage"]["properties"]["evidence"]["items"]["$ref"],
            schema["properties"]["backbones"]["additionalProperties"]["properties"]["evidence"]["items"]["$ref"]}
    assert refs == {"#/$defs/evidence_benchmark"}
    assert schema["$defs"]["evidence_benchmark"]["enum"] == evidence_benchmarks() == list(EVIDENCE)
