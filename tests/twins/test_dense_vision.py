"""Dense vision pretraining: cell labels by hand, the raster order every family's tokens follow,
the dense and words losses against per-cell references, and dense and words stages inside
pretrain() (vision side only, resumable, and a warm start at a later words stage equal to the run
from scratch)."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from PIL import Image, ImageDraw

from ltopd.data.world.palette import COLORS, SHAPES
from ltopd.data.world.text import WORDS
from ltopd.models.parts import parameter_groups
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.dense_vision import OTHER_TEXT, DenseHeads, cell_labels, dense_loss, record_scene
from ltopd.twins.job import stage_sources
from ltopd.twins.pretrain import PretrainConfig, Stage, pretrain, seed_state
from ltopd.twins.tokenizer import build_tokenizer

BG_SHAPE, BG_COLOR, BG_TEXT = len(SHAPES), len(COLORS), len(WORDS) + 1


def _obj(shape: str, color: str, cx: int, cy: int, side: int) -> dict:
    x0, y0 = cx - side // 2, cy - side // 2
    return {"shape": shape, "color": color, "cx": cx, "cy": cy, "size_px": side, "bbox": [x0, y0, x0 + side, y0 + side]}


def test_cell_labels_by_hand():
    # 4x4 grid over 128 px: 32 px cells.
    scene = {"image_size": 128, "objects": [
        _obj("square", "red", 32, 32, 64),      # exactly cells (0,0) (0,1) (1,0) (1,1)
        _obj("star", "blue", 100, 100, 6),      # tiny: only its centre's cell (3,3)
        _obj("circle", "green", 80, 24, 48),    # box [56, 0, 104, 48]: covers (0,2) whole, a quarter of (0,3)
                                                # and of (0,1) (where the square covers more), half of (1,2)
        _obj("cross", "cyan", 62, 120, 8),      # under 5% of (3,1) and (3,2); its centre is in (3,1)
    ]}
    shapes, colors, text = cell_labels(scene, (4, 4))
    assert text.tolist() == [BG_TEXT] * 16
    s = lambda name: SHAPES.index(name)  # noqa: E731
    expected = [[s("square"), s("square"), s("circle"), s("circle")],
                [s("square"), s("square"), s("circle"), BG_SHAPE],
                [BG_SHAPE, BG_SHAPE, BG_SHAPE, BG_SHAPE],
                [BG_SHAPE, s("cross"), BG_SHAPE, s("star")]]
    assert shapes.tolist() == [v for row in expected for v in row]
    c = list(COLORS)
    assert colors.view(4, 4)[0, 0] == c.index("red") and colors.view(4, 4)[3, 3] == c.index("blue")
    assert colors.view(4, 4)[2, 2] == BG_COLOR
    # A non-square grid divides each axis on its own (2 rows of 64 px x 4 columns of 32 px): the
    # circle now covers 8/32 x 48/64 = 0.19 of cell (0,3), under MIN_COVER.
    wide = cell_labels(scene, (2, 4)).shape
    assert wide.view(2, 4)[0].tolist() == [s("square"), s("square"), s("circle"), BG_SHAPE]


def test_the_later_object_wins_an_equal_cover():
    scene = {"image_size": 64, "objects": [_obj("square", "red", 32, 32, 64), _obj("star", "blue", 32, 32, 64)]}
    assert cell_labels(scene, (2, 2)).shape.tolist() == [SHAPES.index("star")] * 4


def test_text_cells_carry_the_word_or_other_text():
    # 4x4 grid of 32 px cells; the sign's box [40, 70, 120, 90] lies in row 2 (20 of its 32 px) and
    # covers 24, 32 and 24 of 32 px of columns 1-3: 0.47, 0.63 and 0.47 of those cells.
    sign = {"kind": "sign", "bbox": [40, 70, 120, 90], "fields": {"text": "zebra"}, "lines": ["ZEBRA"]}
    scene = {"image_size": 128, "objects": [], "text": sign}
    text = cell_labels(scene, (4, 4)).text.view(4, 4)
    z = WORDS.index("zebra")
    assert text[2].tolist() == [BG_TEXT, z, z, z] and (text[[0, 1, 3]] == BG_TEXT).all()
    number = {**sign, "kind": "number", "fields": {"text": "7174"}}
    assert cell_labels({**scene, "text": number}, (4, 4)).text.view(4, 4)[2, 2] == OTHER_TEXT


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(["What color is the square? red blue green"] * 20, 300)


def _canvas(cell: tuple[int, int] | None) -> Image.Image:
    im = Image.new("RGB", (256, 256), (230, 230, 230))
    if cell is not None:
        r, c = cell
        ImageDraw.Draw(im).rectangle([c * 32 + 4, r * 32 + 4, c * 32 + 27, r * 32 + 27], fill=(200, 20, 20))
    return im


@pytest.mark.parametrize("twin", ["qwen35-tiny", "glm46v-tiny", "llava-ov-tiny"])
def test_every_family_emits_merged_tokens_in_raster_order(tok, twin):
    """A patch drawn in grid cell (r, c) moves token r * w + c most: the labels' order."""
    bb = twin_backbone(twin, tok, seed=0)
    bb.model.eval()

    def features(cell: tuple[int, int] | None) -> torch.Tensor:
        rec = {"id": "x", "images": [_canvas(cell)], "question": "q?", "options": [], "answer": "a"}
        with torch.no_grad():
            return bb.image_features(bb.encode([rec]))[0]

    blank = features(None)
    one = bb.encode([{"images": [_canvas(None)], "question": "q", "options": []}])
    assert bb.ops.grid_hw(bb.model, one.inputs) == [(8, 8)]
    for cell in [(0, 0), (0, 7), (3, 5), (7, 0), (6, 2)]:
        moved = (features(cell) - blank).norm(dim=-1)
        assert int(moved.argmax()) == cell[0] * 8 + cell[1], (twin, cell)


def _world_records(n: int, task: str = "color", text_prob: float = 0.5) -> list[dict]:
    stage = {"name": "v", "steps": 1, "lr": 1e-3, "tasks": [task],
             "world": {"min_objects": 1, "max_objects": 3, "text_prob": text_prob, "min_object_px": 40,
                       "max_object_px": 96}}
    return list(itertools.islice(stage_sources({"seed": 0, "stages": [stage]}, {"image_size": 256})["v"](0), n))


def test_dense_loss_equals_the_per_cell_reference(tok):
    bb = twin_backbone("qwen35-tiny", tok, seed=0)
    records = _world_records(3)
    torch.manual_seed(0)
    heads = DenseHeads(128)
    loss = dense_loss(bb, records, heads)
    # Reference: each image on its own, each cell's cross-entropy per kind by log-softmax, averaged.
    terms = _per_cell_terms(bb, records, heads)
    reference = sum(torch.stack([ce for ce, _ in v]).mean() for v in terms.values())
    torch.testing.assert_close(loss, reference, rtol=1e-5, atol=1e-6)
    assert any(p.grad is not None for p in bb.model.model.visual.parameters())
    assert all(p.grad is None for p in bb.model.lm_head.parameters())


def _per_cell_terms(bb, records, heads) -> dict[str, list[tuple[torch.Tensor, int]]]:
    """Every cell's cross-entropy per label kind, one image at a time, with the cell's label."""
    terms: dict[str, list[tuple[torch.Tensor, int]]] = {"shape": [], "color": [], "text": []}
    with torch.no_grad():
        for r in records:
            f = bb.image_features(bb.encode([r]))[0]
            labels = cell_labels(json.loads(r["meta"])["scene"], (8, 8))._asdict()
            for kind, values in terms.items():
                for t in range(64):
                    y = int(labels[kind][t])
                    values.append((-torch.log_softmax(heads.heads[kind](f[t]), -1)[y], y))
    return terms


def test_words_loss_trains_the_text_head_on_word_cells_only(tok):
    bb = twin_backbone("qwen35-tiny", tok, seed=0)
    records = _world_records(4, task="read", text_prob=1.0)
    torch.manual_seed(0)
    heads = DenseHeads(128)
    terms = _per_cell_terms(bb, records, heads)
    words = [ce for ce, y in terms["text"] if y < len(WORDS)]
    assert 0 < len(words) < len(terms["text"]) / 4  # the batch has words, and far more other cells
    reference = (torch.stack([ce for ce, _ in terms["shape"]]).mean()
                 + torch.stack([ce for ce, _ in terms["color"]]).mean() + torch.stack(words).mean())
    torch.testing.assert_close(dense_loss(bb, records, heads, words_only=True), reference, rtol=1e-5, atol=1e-6)
    # A batch without a word: the text head gets no term (and no gradient).
    bb.model.zero_grad()
    heads.zero_grad()
    plain = _world_records(2, text_prob=0.0)
    terms = _per_cell_terms(bb, plain, heads)
    reference = sum(torch.stack([ce for ce, _ in terms[k]]).mean() for k in ("shape", "color"))
    torch.testing.assert_close(dense_loss(bb, plain, heads, words_only=True), reference, rtol=1e-5, atol=1e-6)
    assert heads.heads["text"].weight.grad is None and heads.heads["shape"].weight.grad is not None


def test_a_warm_start_at_a_later_words_stage_equals_the_run_from_scratch(tok, tmp_path):
    """The dense heads begin anew at every `fresh_optimizer` stage, so a run continued from the
    weights alone (seed_state, as ltopd.twins.build.warm_start does) trains a words stage exactly as the
    uninterrupted run, whose heads were trained by an earlier dense stage."""
    records = _world_records(6, task="read", text_prob=1.0)

    def sources():
        return {k: (lambda start: itertools.islice(itertools.cycle(records), start, None)) for k in "vaw"}

    cfg = PretrainConfig(stages=(Stage("v", 2, objective="dense"), Stage("a", 1),
                                 Stage("w", 2, objective="words", fresh_optimizer=True)),
                         batch_size=2, seed=3, warmup_steps=2)
    whole = twin_backbone("qwen35-tiny", tok, seed=0)
    full = pretrain(whole, sources(), cfg)
    part = twin_backbone("qwen35-tiny", tok, seed=0)
    pretrain(part, sources(), cfg, stop_after=3)  # the weights a release of the first two stages holds
    warm = twin_backbone("qwen35-tiny", tok, seed=0)
    warm.model.load_state_dict(part.model.state_dict())
    seed_state(tmp_path, warm.model, cfg, recipe=None, steps=3)
    continued = pretrain(warm, sources(), cfg, state_dir=tmp_path)
    assert continued.losses[3:] == full.losses[3:]
    for a, b in zip(warm.model.parameters(), whole.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_record_scene_rejects_items_without_one_scene():
    with pytest.raises(ValueError, match="single-image world item"):
        record_scene({"id": "m", "images": [1, 2], "meta": json.dumps({"scene": {}})})
    with pytest.raises(ValueError, match="single-image world item"):
        record_scene({"id": "b", "images": [1], "meta": "{}"})


def test_a_dense_stage_trains_the_vision_side_only_and_resumes_exactly(tok, tmp_path):
    records = _world_records(8)
    cfg = PretrainConfig(stages=(Stage("v", 3, objective="dense"), Stage("a", 1)), batch_size=2, seed=1,
                         warmup_steps=1)

    def sources():
        return {"v": lambda start: itertools.islice(itertools.cycle(records), start, None),
                "a": lambda start: itertools.islice(itertools.cycle(records), start, None)}

    whole = twin_backbone("qwen35-tiny", tok, seed=0)
    lm_before = [p.detach().clone() for p in parameter_groups(whole.model)["lm"]]
    vision_before = [p.detach().clone() for p in parameter_groups(whole.model)["vision"]]
    only_dense = PretrainConfig(stages=cfg.stages[:1], batch_size=2, seed=1, warmup_steps=1)
    dense_only = twin_backbone("qwen35-tiny", tok, seed=0)
    pretrain(dense_only, sources(), only_dense)
    assert all(torch.equal(a, b) for a, b in zip(parameter_groups(dense_only.model)["lm"], lm_before))
    assert not all(torch.equal(a, b) for a, b in zip(parameter_groups(dense_only.model)["vision"], vision_before))

    full = pretrain(whole, sources(), cfg)
    split = twin_backbone("qwen35-tiny", tok, seed=0)
    pretrain(split, sources(), cfg, state_dir=tmp_path, stop_after=2)  # stops inside the dense stage
    resumed_bb = twin_backbone("qwen35-tiny", tok, seed=0)
    resumed = pretrain(resumed_bb, sources(), cfg, state_dir=tmp_path)
    assert resumed.losses == full.losses
    for a, b in zip(resumed_bb.model.parameters(), whole.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_an_unknown_objective_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"objective 'pixels'.*\['answer', 'dense', 'words'\]"):
        Stage("x", 1, objective="pixels")



def test_the_profile_schema_and_checks_know_every_objective():
    """The schema's enum is the trainer's registry; the dense objectives (one definition, read by the
    config checks and the trainer) are among its objectives."""
    from ltopd import config
    from ltopd.twins.pretrain import DENSE_OBJECTIVES, STAGE_OBJECTIVES

    enums = [node["enum"] for node in _walk(config.schema()) if isinstance(node, dict)
             and "answer" in node.get("enum", [])]
    assert enums and all(sorted(e) == sorted(STAGE_OBJECTIVES) for e in enums)
    assert set(DENSE_OBJECTIVES) < set(STAGE_OBJECTIVES)  # "answer" trains no dense heads


def _walk(node):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)
