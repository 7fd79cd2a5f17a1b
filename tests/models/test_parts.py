"""A backbone's trainable parts (ltopd.models.parts): every trainable parameter in exactly one
group, the merger and vision tower told apart in each family."""

from __future__ import annotations

import itertools

import pytest
import torch
from transformers import Qwen3_5ForConditionalGeneration

from ltopd.models.backbone import Backbone
from ltopd.models.parts import parameter_groups
from ltopd.models.processor import ImageTextProcessor, build_image_processor
from ltopd.models.prompt import build_target
from ltopd.twins.architectures import twin_config
from ltopd.twins.job import stage_sources
from ltopd.twins.tokenizer import build_tokenizer

SIDE = 64


@pytest.fixture(scope="module")
def tok():
    single = {"name": "single", "steps": 8, "lr": 2e-3, "tasks": ["color", "shape"],
              "world": {"min_objects": 1, "max_objects": 1, "text_prob": 0.0, "clutter": 0.0}}
    stream = stage_sources({"seed": 3, "stages": [single]}, {"image_size": SIDE})["single"](0)
    records = list(itertools.islice(stream, 8))
    return build_tokenizer([r["question"] + " " + build_target(r) for r in records] * 5, 300)


def make_backbone(tok, seed: int = 0) -> Backbone:
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(twin_config("qwen35-tiny", tok))
    return Backbone(model=model.eval(), processor=ImageTextProcessor(tok, build_image_processor(SIDE)))


def test_parameter_groups_partition_the_model(tok):
    model = make_backbone(tok).model
    groups = parameter_groups(model)
    ids = {g: {id(p) for p in ps} for g, ps in groups.items()}
    assert sum(len(v) for v in ids.values()) == len({id(p) for p in model.parameters()})
    assert ids["merger"] == {id(p) for p in model.model.visual.merger.parameters()}
    visual = {id(p) for p in model.model.visual.parameters()}
    assert ids["vision"] == visual - ids["merger"]
    assert ids["lm"].isdisjoint(visual) and id(model.lm_head.weight) in ids["lm"]


def test_parameter_groups_of_llava_onevision(tok):
    from ltopd.twins.architectures import build_twin

    model = build_twin("llava-ov-tiny", tok)
    groups = {g: {id(p) for p in ps} for g, ps in parameter_groups(model).items()}
    projector = {id(p) for p in model.model.multi_modal_projector.parameters()} | {id(model.model.image_newline)}
    assert groups["merger"] == projector
    assert groups["vision"] == {id(p) for p in model.model.vision_tower.parameters()}
    assert sum(map(len, groups.values())) == len({id(p) for p in model.parameters()})
