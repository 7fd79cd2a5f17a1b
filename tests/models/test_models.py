"""Tokenizer, prompt protocol, processor, twins and checkpoint loading."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image

from ltopd.models.loading import load_backbone, load_tokenizer, save_backbone
from ltopd.models.processor import ImageTextProcessor, build_image_processor
from ltopd.models.prompt import build_messages, build_target, extract_answer, render_prompt
from ltopd.models.special_tokens import SPECIAL_TOKENS
from ltopd.twins.architectures import build_twin, twin_backbone, twin_config
from ltopd.twins.tokenizer import build_tokenizer

CORPUS = ["What colour is the square? A. red B. blue. How many circles are there? 3"] * 30
RECORD = {
    "question": " What colour? ",
    "options": ["red", "blue"],
    "images": [Image.new("RGB", (64, 64))],
    "answer": "A",
}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(CORPUS, 400)


def test_tokenizer_is_deterministic_with_single_special_tokens(tok):
    again = build_tokenizer(CORPUS, 400)
    assert tok.get_vocab() == again.get_vocab()
    for token in SPECIAL_TOKENS:
        assert tok(token, add_special_tokens=False)["input_ids"] == [tok.convert_tokens_to_ids(token)]
    assert tok.padding_side == "left" and tok.pad_token == "<|endoftext|>"
    text = "What colour?<answer>red</answer>"
    assert tok.decode(tok(text)["input_ids"]) == text


def test_prompt_protocol_by_hand(tok):
    expected = (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What colour?\nA. red\nB. blue<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n<answer>"
    )
    assert render_prompt(RECORD) == expected
    assert tok.apply_chat_template(build_messages(RECORD), tokenize=False, add_generation_prompt=True) == expected
    assert build_target(RECORD) == "A</answer>"
    assert extract_answer(" B </answer> junk") == "B"


def test_processor_expands_placeholders_and_round_trips(tok, tmp_path):
    proc = ImageTextProcessor(tok, build_image_processor(256), max_input_pixels=300 * 300)
    images = [Image.new("RGB", (256, 256), "red"), Image.new("RGB", (128, 96), "blue")]
    texts = ["<|image_pad|>a", "b<|image_pad|>c"]
    out = proc(texts, [images[:1], images[1:]])
    assert out["image_grid_thw"].tolist() == [[1, 16, 16], [1, 6, 8]]
    assert out["mm_token_type_ids"].sum(1).tolist() == [64, 12]  # (16*16)/4 and (6*8)/4
    assert out["pixel_values"].shape == (256 + 48, 3 * 2 * 16 * 16)
    assert (out["attention_mask"][:, -1] == 1).all()  # left padding
    proc.save_pretrained(tmp_path)
    again = ImageTextProcessor.from_pretrained(tmp_path)
    out2 = again(texts, [images[:1], images[1:]])
    assert all(torch.equal(out[k], out2[k]) for k in out)
    assert again.max_input_pixels == 300 * 300
    with pytest.raises(ValueError, match=r"400x300 .*90000"):
        proc(["<|image_pad|>"], [[Image.new("RGB", (400, 300))]])
    with pytest.raises(ValueError, match="1 image placeholders but 2 images"):
        proc(["<|image_pad|>"], [images])


def test_twin_shapes(tok):
    tiny, small = twin_config("qwen35-tiny", tok), twin_config("qwen35-small", tok)
    assert tiny.text_config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert tiny.text_config.hidden_size == 128 and tiny.vision_config.depth == 2
    assert sum(tiny.text_config.rope_parameters["mrope_section"]) == tiny.text_config.head_dim // 2
    assert tiny.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert small.text_config.num_hidden_layers > tiny.text_config.num_hidden_layers
    model = build_twin("qwen35-tiny", tok)
    n_params = sum(p.numel() for p in model.parameters())
    assert 5e5 < n_params < 5e6
    with pytest.raises(ValueError, match="qwen35-tiny"):
        twin_config("nope", tok)


def test_save_load_round_trip_gives_identical_logits(tok, tmp_path):
    bb = twin_backbone("qwen35-tiny", tok, seed=1)
    batch = bb.encode([RECORD], ["A</answer>"])
    target = tmp_path / "ckpt"
    save_backbone(bb, target)
    save_backbone(bb, target)  # overwrite in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no staging leftovers
    loaded = load_backbone(target)
    again = loaded.encode([RECORD], ["A</answer>"])
    assert all(torch.equal(batch.inputs[k], again.inputs[k]) for k in batch.inputs)
    with torch.no_grad():
        assert torch.equal(bb.model(**batch.inputs).logits, loaded.model(**again.inputs).logits)


def test_a_saved_twin_tokenizes_numbers_as_it_was_trained(tmp_path):
    """load_tokenizer reads a saved twin's tokenizer.json as is. (AutoTokenizer on the same folder
    takes the model type's class, Qwen3_5Tokenizer, whose pre-tokenizer splits numbers into digits:
    lab scripts that used it trained and gated twins on numbers tokenised unlike in training.)"""
    text = 'Is the text "5256" in this image? 25 or 305'
    tok = build_tokenizer(CORPUS + [text] * 20, 400)
    tokens = [t.lstrip("Ġ") for t in tok.convert_ids_to_tokens(tok(text)["input_ids"])]
    assert any(len(t) > 1 and t.isdigit() for t in tokens)  # a merged number: the case that differs
    save_backbone(twin_backbone("qwen35-tiny", tok, seed=0), tmp_path / "ckpt")
    assert load_tokenizer(tmp_path / "ckpt")(text)["input_ids"] == tok(text)["input_ids"]
    assert load_backbone(tmp_path / "ckpt").processor.tokenizer(text)["input_ids"] == tok(text)["input_ids"]


def test_loading_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_backbone(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_backbone(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match=r"'gpt2'.*qwen3_5"):
        load_backbone(tmp_path)
