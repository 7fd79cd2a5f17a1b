"""The downsampling control (ltopd.models.downsample): each family's processor resizes the image
to a budget's keep count, worked out by hand on the tiny twins, within the processor's
granularity otherwise; the model then answers from every token of the small image, no selector."""

from __future__ import annotations

import json
import math

import pytest
import torch
from PIL import Image

import ltopd.models.inference as inference
from ltopd.bench.evaluate import evaluate_settings
from ltopd.models.downsample import downsampled, pixels_key
from ltopd.models.hook import trailing_placeholders
from ltopd.selectors import keep_count
from ltopd.twins.architectures import TWINS, twin_backbone
from ltopd.twins.tokenizer import build_tokenizer

FAMILIES = ["qwen35-tiny", "glm46v-tiny", "llava-ov-tiny"]


def _image(w: int, h: int, seed: int = 0) -> Image.Image:
    g = torch.Generator().manual_seed(seed)
    return Image.fromarray(torch.randint(0, 256, (h, w, 3), generator=g, dtype=torch.uint8).numpy())


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(["What colour is the square? A. red B. blue C. green D. yellow"] * 20, 400)


@pytest.fixture(scope="module", params=FAMILIES)
def bb(request, tok):
    return twin_backbone(request.param, tok, seed=3)


def _grid_tokens(bb, image) -> int:
    """Selectable visual tokens of ``image`` under ``bb``'s processor (LLaVA-OV: without its newline)."""
    proc = bb.processor
    n = proc.tokens_per_image(proc.process_images([image]))[0]
    return n - trailing_placeholders(bb.ops)


# Each twin's canvas-sized image has an 8 x 8 grid of 64 tokens (Qwen: 256 px / (16 x 2), GLM:
# 224 px / (14 x 2), LLaVA-OV's tile: 112 px / 14). Budget 25%: keep 16; Qwen's pixel budget
# 16 x 32^2 = 16,384 halves each side (256 -> 128 px: 4 x 4); GLM's 16 x 28^2 x 2 frames = 25,088
# against 2 x 224^2 = 100,352 halves it too (112 px: 4 x 4); LLaVA-OV's tile side sqrt(16) = 4
# patches (56 px). Budget 5%: keep ceil(3.2) = 4, a 2 x 2 grid in every family.
@pytest.mark.parametrize("ratio, expected", [(0.25, 16), (0.05, 4), (1.0, 64)])
def test_a_canvas_image_downsampled_to_the_keep_count_by_hand(bb, ratio, expected):
    side = TWINS[next(n for n in FAMILIES if TWINS[n].family == bb.model.config.model_type)].image_side
    image = _image(side, side)
    assert _grid_tokens(bb, image) == 64
    assert _grid_tokens(downsampled(bb, ratio, floor=1), image) == expected


@pytest.mark.parametrize("ratio", [0.05, 0.1, 0.15, 0.2, 0.5])
@pytest.mark.parametrize("size", [(256, 256), (96, 128), (300, 180)])
def test_downsampled_count_matches_the_keep_count_within_granularity(bb, ratio, size):
    """Off the hand-worked cases the grid is whole merged patches per side: the count is within a
    row and a column (2 sqrt(keep) + 1) of a selector's keep count, never above the full count."""
    image = _image(*size)
    full = _grid_tokens(bb, image)
    keep = keep_count(full, ratio, 1)
    got = _grid_tokens(downsampled(bb, ratio, floor=1), image)
    assert 1 <= got <= full
    assert abs(got - keep) <= 2 * math.sqrt(keep) + 1, (full, keep, got)


@pytest.mark.parametrize("size", [(256, 256), (96, 128), (300, 180), (17, 640), (1000, 33)])
def test_the_token_count_from_the_size_is_the_processed_images(size):
    """tokens_for_size (what the downsampling control reads the full count from, processing no
    pixels) == the placeholder count of the processed image, for each native-resolution family."""
    tok = build_tokenizer(["a b c"] * 20, 300)
    for name in ("qwen35-tiny", "glm46v-tiny"):
        proc = twin_backbone(name, tok, seed=0).processor
        image = _image(*size)
        assert proc.tokens_for_size(image.height, image.width) == proc.tokens_per_image(proc.process_images([image]))[0]


def test_the_floor_holds_for_tiny_budgets(bb):
    image = _image(256, 256)
    assert _grid_tokens(downsampled(bb, 0.01, floor=9), image) == 9  # keep max(9, ceil(0.64)) = 9: 3 x 3


def test_ratio_one_is_the_backbone_itself_and_bad_ratios_are_named(bb):
    assert downsampled(bb, 1.0, floor=1) is bb
    with pytest.raises(ValueError, match=r"downsampling ratio must be in \(0, 1\], got 0"):
        downsampled(bb, 0, floor=1)


def test_predictions_run_on_the_small_image_with_no_selector(bb, monkeypatch):
    """Downsampled, the model answers from every visual token of the smaller image: no selector
    is ever chosen, and the model sees the keep count's placeholders."""
    monkeypatch.setattr(inference, "choose", lambda *a, **k: pytest.fail("a selector ran"))
    records = [{"id": "r1", "source": "vstar", "question": "What colour is the square?", "options": ["red", "blue"],
                "answer": "A", "task": "direct_attributes", "meta": json.dumps({}), "images": [_image(256, 256)]}]
    small = downsampled(bb, 0.25, floor=1)
    batch = small.encode(records)
    assert int(batch.inputs["mm_token_type_ids"].sum()) == 16 + trailing_placeholders(bb.ops)
    assert [f.shape[0] for f in small.image_features(batch)] == [16]
    (rows, metrics), = evaluate_settings(small, records, "vstar", [(1.0, None)], floor=1, batch_size=1)
    assert metrics["n"] == 1 and len(rows) == 1


RATIOS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


@pytest.mark.parametrize("size", [(256, 256), (96, 128), (300, 180), (17, 640), (512, 512)])
def test_budgets_with_one_pixels_key_give_the_same_pixels(bb, size):
    """pixels_key (how the grouped evaluation runs one downsampling pass for several budgets):
    each native image's resized size is the one its processor's output has, and budgets whose
    keys are equal get the same pixel_values and grid from the processor, brute force."""
    images = [_image(*size), _image(size[1], size[0], seed=1)]
    records = [{"images": [im]} for im in images]
    seen: dict[tuple, dict[str, torch.Tensor]] = {}
    for ratio in RATIOS:
        small = downsampled(bb, ratio, floor=1)
        out = small.processor.process_images(images)
        key = pixels_key(small, records)
        if key[0] == "native":
            patch = small.processor.image_processor.patch_size
            assert list(key[1:]) == [(int(h) * patch, int(w) * patch) for _, h, w in out["image_grid_thw"].tolist()]
        if key in seen:
            assert all(torch.equal(out[k], seen[key][k]) for k in out), (ratio, key)
        seen[key] = out
    if size == (256, 256):  # the twins' 64 tokens: 0.2 and 0.15 both come out 3 x 3, 0.1 and 0.05 2 x 2
        assert len(seen) == 5
