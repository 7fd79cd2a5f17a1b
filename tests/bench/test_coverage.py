"""Evidence coverage (ltopd.bench.coverage): boxes on known grids worked out by hand, the three
survival tests, the oracle's cut and top-up, and every template's evidence checked against the
rendered images of the benchmark twins (an object's centre pixel is its colour; a document's or
table's asked line holds ink)."""

from __future__ import annotations

import numpy as np
import pytest

from ltopd.bench.coverage import (
    Evidence,
    Grid,
    Region,
    coverage,
    evidence_cells,
    evidence_of,
    oracle_cells,
    oracle_selection,
    text_line_box,
)
from ltopd.bench.scoring.common import meta_of
from ltopd.bench.suites import synthetic_records
from ltopd.data.sources import world_config
from ltopd.data.world import COLORS
from ltopd.data.world.palette import TEXT_COLOR

GRID = Grid(256, 256, 8, 8)  # the default canvas: 32 px cells, token r * 8 + c


def test_a_box_inside_one_cell():
    # x 40-60 is column 1 (32-64), y 10-30 row 0: token 1, 20 x 20 px
    assert GRID.cells((40, 10, 60, 30)) == {1: 400.0}


def test_a_box_on_a_corner_touches_four_cells_with_their_overlaps():
    # x 20-44: 12 px in column 0, 12 in column 1; y 20-36: 12 px in row 0, 4 in row 1
    assert GRID.cells((20, 20, 44, 36)) == {0: 144.0, 1: 144.0, 8: 48.0, 9: 48.0}


def test_a_one_pixel_sliver_is_not_evidence_unless_asked():
    # x 31-50: 1 px in column 0 (below min_side 2), 18 in column 1
    assert GRID.cells((31, 0, 50, 10)) == {1: 180.0}
    assert GRID.cells((31, 0, 50, 10), min_side=0.5) == {0: 10.0, 1: 180.0}


def test_a_canvas_shrunk_by_the_processor_has_wider_cells():
    # HR-Bench's 512 px canvas as 8 x 8 tokens: 64 px cells; x 130-142 column 2, y 70-82 row 1
    big = Grid(512, 512, 8, 8)
    assert big.cells((130, 70, 142, 82)) == {10: 144.0}
    assert big.cell_box(10) == (128.0, 64.0, 192.0, 128.0)


def test_a_non_square_grid_and_clipping_at_the_canvas_edge():
    grid = Grid(320, 256, 8, 10)  # 32 px cells, 10 columns
    assert grid.cells((300, 240, 330, 270)) == {79: 20.0 * 16.0}  # last column, last row, clipped
    assert grid.cells((400, 0, 410, 10)) == {}  # off the canvas
    with pytest.raises(ValueError):
        grid.cell_box(80)


def test_the_three_survival_tests_on_a_relation():
    a = Region("red star", (40, 10, 60, 30))  # token 1
    b = Region("blue circle", (20, 20, 44, 36))  # tokens 0, 1, 8, 9
    both = Evidence((a, b), "every")
    assert evidence_cells(both, GRID) == {0, 1, 8, 9}
    assert coverage(both, GRID, [1]) == coverage(both, GRID, [1, 63])
    c = coverage(both, GRID, [1])
    assert (c.any, c.each, c.all, c.cells, c.kept) == (True, True, False, 4, 1)  # token 1 is in both
    c = coverage(both, GRID, [8])
    assert (c.any, c.each, c.all) == (True, False, False)  # b touched, a not
    c = coverage(both, GRID, [0, 1, 8, 9])
    assert (c.any, c.each, c.all) == (True, True, True)
    c = coverage(both, GRID, [2, 3])
    assert (c.any, c.each, c.all, c.kept) == (False, False, False, 0)
    either = Evidence((a, b), "one")  # e.g. two instances of a present POPE object
    c = coverage(either, GRID, [1])
    assert (c.any, c.each, c.all) == (True, True, True)  # a complete, b touched


def test_the_oracle_cuts_round_robin_and_tops_up_from_fill():
    a = Region("a", (40, 10, 60, 30))  # token 1
    b = Region("b", (20, 20, 44, 36))  # 0 and 1 (144 each), then 8 and 9 (48)
    c = Region("c", (200, 200, 250, 230))  # x: col 6 (192-224, 24 px), col 7 (26 px); y: row 6 (24), row 7 (6)
    ev = Evidence((a, b, c), "every")
    # round 1: a's token 1, b's best not yet taken (0: 144 ties 1, lower index first -> 0), c's 55
    assert oracle_cells(ev, GRID, 3) == [1, 0, 55]
    assert oracle_cells(ev, GRID, 2) == [1, 0]  # cut before c: the budget is spent
    assert oracle_cells(ev, GRID, 99) == [1, 0, 55, 54, 8, 63, 9, 62]
    # top-up from the selector's own picks (token 1 already taken), then by token index (0)
    assert oracle_selection(Evidence((a,), "one"), GRID, 4, fill=[1, 40, 30]) == [0, 1, 30, 40]
    assert oracle_selection(None, GRID, 2, fill=[5, 7, 9]) == [5, 7]
    assert oracle_selection(ev, GRID, 3, fill=[63, 62]) == [0, 1, 55]


@pytest.fixture(scope="module")
def twins():
    world = {"image_size": 256}
    return world_config(world), {b: synthetic_records(b, 60, 3, world)
                                 for b in ("vstar", "hrbench4k", "gqa", "pope", "textvqa", "ocrbench", "mmmu")}


def _centre_colour(record, region):
    img = np.asarray(record["images"][0])
    x0, y0, x1, y1 = region.box
    return tuple(int(v) for v in img[int((y0 + y1 - 1) / 2), int((x0 + x1 - 1) / 2)])


def test_object_evidence_is_where_the_image_shows_the_named_object(twins):
    _, recs = twins
    seen = set()
    for bench in ("vstar", "hrbench4k", "gqa", "pope"):
        for r in recs[bench]:
            ev = evidence_of(r)
            template = meta_of(r)["template"]
            if ev is None:
                assert template in ("exists/color-shape", "pope/exists") and r["answer"] == "no"
                continue
            seen.add(template)
            for region in ev.regions:
                if "text" in region.name:
                    continue
                assert _centre_colour(r, region) == COLORS[region.name.split()[0]], (bench, template)
            if template in ("vstar/color", "hr/color", "hr/shape"):
                assert len(ev.regions) == 1 and ev.regions[0].box[2] - ev.regions[0].box[0] <= 32
            if template in ("vstar/side", "hr/relative", "gqa/rel"):
                assert len(ev.regions) == 2 and ev.need == "every"
            if template == "pope/exists" and r["answer"] == "yes":
                assert {reg.name for reg in ev.regions} == {meta_of(r)["object"]} and ev.need == "one"
    assert {"vstar/color", "vstar/side", "hr/color", "hr/relative", "gqa/rel", "gqa/side",
            "color/of-shape", "shape/of-color", "pope/exists"} <= seen


def _ink(record, box, white=False):
    """Text pixels in ``box``: dark ink, or a sign's white ink on its dark panel."""
    img = np.asarray(record["images"][0]).astype(int)
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    ink = np.array((250, 250, 250) if white else TEXT_COLOR)
    return int((np.abs(img[y0:y1, x0:x1] - ink).max(-1) < 40).sum())


def test_text_evidence_is_the_block_or_the_asked_line_and_the_line_holds_the_ink(twins):
    cfg, recs = twins
    kinds = set()
    for bench in ("textvqa", "ocrbench", "mmmu"):
        for r in recs[bench]:
            scene = meta_of(r)["scene"]
            ev = evidence_of(r, small_font_px=cfg.small_font_px)
            if ev is None:
                assert meta_of(r)["template"] in ("mmmu/union", "mmmu/difference")
                continue
            text = scene["text"]
            coarse = evidence_of(r)
            for region in ev.regions:
                assert _ink(r, region.box, white=text["kind"] == "sign") > 0
                bx0, by0, bx1, by1 = text["bbox"]
                x0, y0, x1, y1 = region.box
                assert bx0 <= x0 and by0 <= y0 and x1 <= bx1 and y1 <= by1
            if text["kind"] in ("document", "table") and len(ev.regions) < 3:
                kinds.add(text["kind"])
                # the asked line is narrower than the block, and the block's other ink lies outside it
                assert sum(reg.box[3] - reg.box[1] for reg in ev.regions) < text["bbox"][3] - text["bbox"][1]
                assert len(coarse.regions) == 1
    assert kinds == {"document", "table"}


def test_the_line_bands_partition_a_documents_ink():
    cfg = world_config({"image_size": 256})
    recs = [r for r in synthetic_records("ocrbench", 40, 5, {"image_size": 256}) if meta_of(r)["category"] == "kie"]
    assert recs
    for r in recs:
        text = meta_of(r)["scene"]["text"]
        total = _ink(r, text["bbox"])
        bands = sum(_ink(r, text_line_box(text, i, cfg.small_font_px)) for i in range(3))
        assert bands == total and all(_ink(r, text_line_box(text, i, cfg.small_font_px)) > 0 for i in range(3))


def test_unknown_templates_and_sceneless_records_are_errors():
    with pytest.raises(ValueError, match="no scene"):
        evidence_of({"id": "x", "question": "q", "answer": "a", "meta": {"template": "t"}})
    with pytest.raises(ValueError, match="no evidence rule"):
        evidence_of({"id": "x", "question": "q", "answer": "a",
                     "meta": {"template": "mme/count", "scene": {"objects": []}}})
    with pytest.raises(ValueError):
        Evidence((), "one")
