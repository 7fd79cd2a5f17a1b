"""The reduction hook's own functions against hand-worked references (pruned sequences, per-image
budgets, the first generated step); the checks every family shares are in test_families.py."""

from __future__ import annotations

import pytest
import torch
from PIL import Image
from test_families import _reference_inputs, _reference_logits  # the hand-built references, every family

from ltopd.models.hook import Selection, check_ratio, prune_sequence
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.tokenizer import build_tokenizer

CORPUS = [
    "What colour is the square? How many circles are there? Is there a red triangle?",
    "A. red B. blue C. green D. yellow. The answer is 3 shapes.",
] * 20


def _image(side_w: int, side_h: int, seed: int) -> Image.Image:
    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (side_h, side_w, 3), generator=g, dtype=torch.uint8)
    return Image.fromarray(pixels.numpy())


@pytest.fixture(scope="module")
def bb():
    torch.manual_seed(0)
    return twin_backbone("qwen35-tiny", build_tokenizer(CORPUS, 400), seed=3)


RECORDS = [
    {"question": "What colour is the square?", "options": ["red", "blue"], "images": [_image(128, 128, 1)]},
    {"question": "How many circles?", "options": [], "images": [_image(96, 128, 2)]},
]


def _every_other(n: int) -> torch.Tensor:
    return torch.arange(0, n, 2)


def _fixed(bb, batch, pick) -> Selection:
    sizes = [f.shape[0] for f in bb.image_features(batch)]
    return Selection(tuple(pick(n) for n in sizes), tuple(sizes))


def test_prune_sequence_hand_example():
    # Row 0: pad, t, I, I, I, t ; row 1: t, t, I, I, t, t  (image token id 9, pad 0)
    ids = torch.tensor([[0, 5, 9, 9, 9, 6], [5, 5, 9, 9, 6, 7]])
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    pos = torch.tensor([[0, 0, 1, 1, 1, 3], [0, 1, 2, 2, 4, 5]]).unsqueeze(0).repeat(3, 1, 1)
    pos[1, 0, 2:5] = torch.tensor([1, 2, 3])  # a distinct h row for image 0
    keep = torch.tensor([False, True, False, True, False])  # image 0 keeps #1, image 1 keeps #1
    out = prune_sequence(ids, mask, pos, 9, keep, pad_token_id=0, labels=ids.clone())
    assert out.input_ids.tolist() == [[0, 0, 5, 9, 6], [5, 5, 9, 6, 7]]
    assert out.attention_mask.tolist() == [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]
    assert out.position_ids[0].tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    assert out.position_ids[1].tolist() == [[0, 0, 0, 1, 3], [0, 1, 2, 4, 5]]
    assert out.position_ids[2].tolist() == [[0, 0, 0, 2, 3], [0, 1, 2, 4, 5]]
    assert out.position_ids[3].tolist() == [[0, 0, 0, 1, 3], [0, 1, 2, 4, 5]]
    assert out.rope_deltas.view(-1).tolist() == [3 + 1 - 3, 5 + 1 - 5]
    assert out.labels.tolist() == [[-100, -100, 5, 9, 6], [5, 5, 9, 6, 7]]


def test_generate_at_five_percent_first_step_equals_pruned_forward(bb):
    batch = bb.encode(RECORDS[:1])
    selection = bb.select(batch, 0.05, "random", floor=1, seed=7)
    assert [len(k) for k in selection.kept] == [1]  # ceil(16 * 0.05) = 1
    with torch.no_grad():
        out = bb.generate(batch, selection, max_new_tokens=3, do_sample=False, eos_token_id=None,
                          return_dict_in_generate=True, output_logits=True)
        forward, pruned = bb.forward(batch, selection)
    assert pruned.input_ids.shape[1] == batch.inputs["input_ids"].shape[1] - 15
    assert torch.allclose(out.logits[0][0], forward.logits[0, -1], atol=1e-5, rtol=0)


def test_two_images_keep_per_image_budgets(bb):
    record = {"question": "Which image has more?", "options": [], "images": [_image(256, 256, 3), _image(128, 128, 4)]}
    batch = bb.encode([record])
    selection = bb.select(batch, 0.25, "uniform", floor=1)
    assert selection.n_tokens == (64, 16)
    assert [len(k) for k in selection.kept] == [16, 4]
    with torch.no_grad():
        out, pruned = bb.forward(batch, selection)
        embeds, rope, _ = _reference_inputs(bb, record, selection)
        ref = _reference_logits(bb, embeds, rope, [], 0)
    image_id = bb.model.config.image_token_id
    assert int((pruned.input_ids == image_id).sum()) == 20
    assert torch.equal(pruned.position_ids[1:, 0], rope)
    assert torch.allclose(out.logits[0], ref, atol=1e-4, rtol=0)


@pytest.mark.parametrize("ratio", [0, 0.0, -0.1, 1.5])
def test_bad_budget_is_rejected(bb, ratio):
    with pytest.raises(ValueError, match=str(ratio).replace(".", r"\.").replace("-", r"\-")):
        check_ratio(ratio)
    batch = bb.encode(RECORDS[:1])
    with pytest.raises(ValueError, match="keep ratio"):
        bb.select(batch, ratio, "random", floor=1)
