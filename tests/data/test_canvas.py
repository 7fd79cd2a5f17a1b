"""Benchmark canvases (ltopd.data.world.canvas): the sides from the paper's token counts by hand,
the base world with larger objects, a canvas holding objects in proportion to its area, and the
twins drawn where the profile says (HR-Bench's own doubled canvas unchanged without one)."""

from __future__ import annotations

import pytest
import yaml

from conftest import ROOT
from ltopd.bench.suites import synthetic_records
from ltopd.data.sources import world_config
from ltopd.data.world import WorldConfig
from ltopd.data.world.canvas import at_canvas, base_world, benchmark_world, canvas_sides


def test_canvas_sides_by_hand() -> None:
    # GQA: 180 x 1/4 = 45 tokens -> a 7 x 7 grid (sqrt 6.7); V*Bench: 875 capped at 256 -> 16 x 16;
    # OCRBench's 64 -> 16 -> 4 x 4; a tiny count keeps the 2 x 2 minimum.
    sides = canvas_sides({"gqa": 180, "vstar": 3500, "ocrbench": 64, "tiny": 1}, 0.25, 256, 32)
    assert sides == {"gqa": 224, "vstar": 512, "ocrbench": 128, "tiny": 64}
    for bad in ({"scale": 0.0}, {"scale": 1.5}, {"max_tokens": 3}):
        kwargs = {"scale": 0.25, "max_tokens": 256, **bad}
        with pytest.raises(ValueError, match="canvas_sides"):
            canvas_sides({"gqa": 180}, kwargs["scale"], kwargs["max_tokens"], 32)


def test_object_scale_draws_the_larger_worlds_objects_on_the_same_canvas() -> None:
    assert base_world({"image_size": 256}) == WorldConfig.for_size(256)  # no scale: the world as before
    scaled, big = base_world({"image_size": 256, "object_scale": 1.5}), WorldConfig.for_size(384)
    assert scaled.image_size == 256
    assert (scaled.min_object_px, scaled.max_object_px, scaled.small_target_px, scaled.object_gap_px) == \
        (big.min_object_px, big.max_object_px, big.small_target_px, big.object_gap_px) == (33, 96, 18, 6)
    assert (scaled.font_px, scaled.small_font_px) == (22, 18)  # letters keep their size
    # explicit overrides win; the section's reader is this one
    assert base_world({"image_size": 256, "object_scale": 1.5, "max_object_px": 80}).max_object_px == 80
    assert world_config({"image_size": 256, "object_scale": 2}) == base_world({"image_size": 256, "object_scale": 2})


def test_a_canvas_keeps_pixel_sizes_and_scales_the_object_count_with_its_area() -> None:
    cfg = base_world({"image_size": 256, "object_scale": 1.5, "max_objects": 6})
    big = at_canvas(cfg, 512)
    assert big.image_size == 512 and big.max_objects == 24 and big.max_object_px == cfg.max_object_px
    small = at_canvas(cfg, 128)
    assert small.max_objects == 2 and small.min_objects == 2  # 6 x 1/4 = 1.5 -> 2
    assert small.max_object_px == 64 and small.min_object_px == 33  # at most half the side
    assert at_canvas(cfg, 2048).max_objects == 30  # WorldConfig's bound
    assert at_canvas(cfg, 256) is cfg


def test_twins_are_drawn_on_their_canvas() -> None:
    world = {"image_size": 256, "object_scale": 1.5, "max_objects": 6,
             "canvas": {"gqa": 224, "vstar": 512, "hrbench4k": 384}}
    for name, side in (("gqa", 224), ("vstar", 512), ("hrbench4k", 384), ("mmbench", 256)):
        recs = synthetic_records(name, 4, 0, world)
        assert {r["images"][0].size for r in recs} == {(side, side)}, name
    assert benchmark_world(world, "mmbench") is None  # no canvas of its own: the suite's default
    # HR-Bench without a canvas keeps its doubled one, as before this section existed
    assert {r["images"][0].size for r in synthetic_records("hrbench4k", 2, 0, {"image_size": 256})} == {(512, 512)}


def test_the_regime_profile_s_canvases_are_canvas_sides_of_the_paper_s_token_counts() -> None:
    """config/regime.yaml writes its canvases out; they must be what its comment says they are."""
    cfg = yaml.safe_load((ROOT / "config" / "regime.yaml").read_text())
    paper = {"vstar": 3500, "hrbench4k": 8100, "gqa": 180, "mmmu": 256, "mmbench": 256, "mme": 340,
             "pope": 300, "textvqa": 770, "ocrbench": 144}
    assert cfg["world"]["canvas"] == canvas_sides(paper, 0.25, 256, 32)
    assert cfg["reduction"]["floor"] == 32 // 4
    assert cfg["backbones"]["qwen35-tiny"]["processor_side"] == 32 * 16  # 256 tokens of 32 px


def test_a_canvas_for_an_unknown_benchmark_is_named(tmp_path) -> None:
    from ltopd import config

    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["world"]["canvas"] = {"gqa2": 224}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(config.ConfigError, match=r"world\.canvas: unknown benchmark\(s\) \['gqa2'\]; allowed values"):
        config.load(path)
