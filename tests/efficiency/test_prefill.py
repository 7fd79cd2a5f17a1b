"""The measured prefill of every Table 2 row (ltopd.efficiency.prefill, `ltopd prefill-costs`): the
rows cover the grid's methods x budgets, rows of one computation share its cost, and the prefill
on a twin is one language-model forward over the kept tokens."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ltopd.catalog import BENCHMARKS, METHODS, TABLES
from ltopd.efficiency.analytic import keep_count
from ltopd.efficiency.latency import Protocol, prepare, select_questions
from ltopd.efficiency.prefill import CostPoint, cost_point, measure, prefill
from ltopd.pipeline.efficiency_jobs import computation, table2_rows

ROOT = Path(__file__).resolve().parents[2]
WORLD = {"image_size": 128}


def _profile(name: str) -> dict:
    return yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())


@pytest.mark.parametrize("profile", ["default", "smoke", "paper"])
def test_rows_are_every_method_at_every_budget_of_table2(profile) -> None:
    """Written out from the catalog's kinds: full tokens once at 1; each selector and the
    downsampling control at every budget; each trained method at the smallest budget (and at 1
    with student_full_tokens); the ablation variants and the blind twin are no Table 2 points."""
    cfg = _profile(profile)
    g = cfg["grid"]
    variants = {m for t in TABLES.values() if t.kind == "ablation" for m in t.methods if m != "ltopd"}
    expected = set()
    for m in g["methods"]:
        kind = METHODS[m].kind
        if m in variants or not METHODS[m].images:
            continue
        if kind == "reference":
            expected.add((m, 1.0))
        elif kind in ("selector", "resize"):
            expected |= {(m, float(b)) for b in g["budgets"]}
        else:
            expected |= {(m, float(min(g["budgets"])))} | ({(m, 1.0)} if g.get("student_full_tokens") else set())
    got = table2_rows(cfg)
    assert len(got) == len(set(got)) and set(got) == expected


def test_cost_points_share_the_computation_a_row_runs() -> None:
    assert cost_point("full", 1.0, "cdpruner") == CostPoint(1.0, None)
    assert cost_point("fastv", 0.1, "cdpruner") == CostPoint(0.1, "fastv")
    assert cost_point("downsample", 0.1, "cdpruner") == CostPoint(0.1, None, resized=True)
    # a trained student runs its selector's tokens on the base architecture: the selector's cost
    assert cost_point("ltopd", 0.05, "cdpruner") == cost_point("cdpruner", 0.05, None) == CostPoint(0.05, "cdpruner")
    assert cost_point("sft", 1.0, "cdpruner") == CostPoint(1.0, None)
    # LLaVA-Mini's inference runs its own module on top
    assert cost_point("llava_mini", 0.05, "cdpruner") == CostPoint(0.05, "cdpruner", module="llava_mini")
    assert computation(CostPoint(0.05, "cdpruner", module="llava_mini")) == "cdpruner keeps 0.05 + llava_mini module"
    with pytest.raises(ValueError, match="inference module 'nope'"):
        CostPoint(0.05, None, module="nope")


@pytest.fixture(scope="module")
def twin_and_records():
    from ltopd.bench.store import build_records
    from ltopd.twins.architectures import twin_backbone
    from ltopd.twins.corpus import corpus
    from ltopd.twins.tokenizer import build_tokenizer

    tokenizer = build_tokenizer(list(corpus(WORLD, 4, BENCHMARKS)), 600)
    return twin_backbone("qwen35-tiny", tokenizer, seed=0), build_records("textvqa", {"n": 24}, 0, WORLD)


def test_prefill_is_one_forward_over_the_kept_tokens(twin_and_records) -> None:
    bb, records = twin_and_records
    lm = bb.model.model.language_model
    lengths: list[int] = []
    handle = lm.register_forward_pre_hook(lambda _m, args, kw: lengths.append(kw["inputs_embeds"].shape[1]),
                                          with_kwargs=True)
    prepared = prepare(bb, select_questions(records, bb.tokenizer, 4)[0], 1)
    try:
        out, pruned, selection, seconds = prefill(bb, prepared, CostPoint(0.05, "cdpruner"), floor=1)
    finally:
        handle.remove()
    kept = sum(int(k.numel()) for k in selection.kept)
    assert kept == keep_count(sum(selection.n_tokens), 0.05, 1) and seconds > 0
    assert lengths == [int(pruned.attention_mask.sum())] and out.logits.shape[1] == 1


def test_measure_covers_the_smoke_rows_and_shares_costs(twin_and_records) -> None:
    """Smoke's Table 2 rows on the tiny twin: every row gets a measured cost; LT-OPD's is
    CDPruner's; the selector keeps fewer tokens (less KV) than full tokens; the resized image
    holds about the keep count; LLaVA-Mini and the learnable merge each run with their own module
    attached (one at a time, taken off after): the same tokens and cache as CDPruner's, more compute."""
    from ltopd.models.addons import attached
    from ltopd.twins.architectures import twin_backbone

    bb, records = twin_and_records
    bb = twin_backbone("qwen35-tiny", bb.tokenizer, seed=0)  # a backbone of its own: the modules attach to it
    cfg = _profile("smoke")
    rows = table2_rows(cfg)
    points = {row: cost_point(*row, cfg["training"]["selector"]) for row in rows}
    during: dict[CostPoint, str | None] = {}

    def seen(point: CostPoint, done: int, total: int) -> None:
        found = attached(bb.model)
        during[point] = found[0] if found else None

    costs = measure(bb, records, list(points.values()), Protocol(min_answer_tokens=4, questions=2, warmup=0),
                    floor=1, repeats=2, sections={"llava_mini": {"fusion_layers": 1, "heads": 4},
                                                  "learnable_merge": cfg["learnable_merge"]}, progress=seen)
    by_point = {c.point: c for c in costs}
    assert len(costs) == len(set(points.values())) and set(by_point) == set(points.values())
    assert all(c.questions == 2 and len(c.per_question_ms) == 2 and c.prefill_ms > 0 for c in costs)
    assert points[("ltopd", 0.05)] == points[("cdpruner", 0.05)]
    full, pruned = by_point[points[("full", 1.0)]], by_point[points[("cdpruner", 0.05)]]
    assert full.kept_tokens == full.visual_tokens > pruned.kept_tokens and full.kv_bytes > pruned.kv_bytes
    resized = by_point[points[("downsample", 0.05)]]
    assert resized.kept_tokens == resized.visual_tokens < full.visual_tokens
    assert during == {p: p.module for p in points.values()} and attached(bb.model) is None
    for module in ("llava_mini", "learnable_merge"):
        own = by_point[points[(module, 0.05)]]
        assert own.point.module == module and own.kept_tokens == pruned.kept_tokens
        assert own.kv_bytes == pruned.kv_bytes  # same tokens in the cache; the module adds compute, not cache