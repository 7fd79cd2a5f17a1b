"""Pretraining loop: warm-up, curriculum streams, learning, freezing, determinism."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from transformers import Qwen3_5ForConditionalGeneration

from ltopd.models.backbone import Backbone
from ltopd.models.processor import ImageTextProcessor, build_image_processor
from ltopd.models.prompt import build_target
from ltopd.twins.architectures import twin_config
from ltopd.twins.job import stage_sources
from ltopd.twins.pretrain import (
    PretrainConfig,
    Stage,
    pretrain,
    warmup_factor,
)
from ltopd.twins.tokenizer import build_tokenizer

SIDE = 64  # 4x4 patches -> 4 visual tokens: keeps every update well under a second


@pytest.fixture(scope="module")
def records() -> list[dict]:
    single = {"name": "single", "steps": 8, "lr": 2e-3, "tasks": ["color", "shape"],
              "world": {"min_objects": 1, "max_objects": 1, "text_prob": 0.0, "clutter": 0.0}}
    stream = stage_sources({"seed": 3, "stages": [single]}, {"image_size": SIDE})["single"](0)
    return list(itertools.islice(stream, 8))


@pytest.fixture(scope="module")
def tok(records):
    corpus = [r["question"] + " " + build_target(r) for r in records] * 5
    return build_tokenizer(corpus, 300)


def make_backbone(tok, seed: int = 0) -> Backbone:
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(twin_config("qwen35-tiny", tok))
    return Backbone(model=model.eval(), processor=ImageTextProcessor(tok, build_image_processor(SIDE)))


def batch_loss(bb: Backbone, recs: list[dict]) -> float:
    with torch.no_grad():
        batch = bb.encode(recs, [build_target(r) for r in recs])
        return float(bb.forward(batch, with_labels=True)[0].loss)


def test_warmup_factor_by_hand():
    assert [warmup_factor(s, 4) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert warmup_factor(0, 0) == 1.0


def test_single_object_stage_and_round_robin(records):
    assert [r["task"] for r in records] == ["color", "shape"] * 4
    for r in records:
        assert len(json.loads(r["meta"])["scene"]["objects"]) == 1
        assert r["images"][0].size == (SIDE, SIDE)


def test_training_lowers_the_loss_and_logs_every_step(tok, records):
    bb = make_backbone(tok)
    before = batch_loss(bb, records[:4])
    logs = []
    cfg = PretrainConfig(stages=(Stage("single", 8, 3e-3, 3e-3, 3e-3),), batch_size=4, warmup_steps=2)
    metrics = pretrain(bb, itertools.cycle(records[:4]), cfg, on_step=logs.append)
    after = batch_loss(bb, records[:4])
    assert after < 0.7 * before
    assert metrics.steps == 8 and metrics.samples == 32 and len(metrics.losses) == 8
    assert [log.step for log in logs] == list(range(1, 9))
    assert logs[0].lrs == {"lm": 1.5e-3, "merger": 1.5e-3, "vision": 1.5e-3}
    assert not bb.model.training  # the model's mode is restored


def test_zero_lr_freezes_a_group_and_stages_use_their_own_streams(tok, records):
    bb = make_backbone(tok)
    vision = {n: p.detach().clone() for n, p in bb.model.model.visual.named_parameters() if ".merger." not in f".{n}"}
    lm_before = bb.model.lm_head.weight.detach().clone()
    streams = {"a": iter(records[:2]), "b": iter(records[2:4])}
    cfg = PretrainConfig(stages=(Stage("a", 1, 1e-3, 1e-3, 0.0), Stage("b", 1, 1e-3, 1e-3, 0.0)), batch_size=2)
    pretrain(bb, streams, cfg)
    for n, p in bb.model.model.visual.named_parameters():
        if n in vision:
            assert torch.equal(p, vision[n]), n
    assert not torch.equal(bb.model.lm_head.weight, lm_before)
    with pytest.raises(ValueError, match="ran out"):
        pretrain(bb, {"a": iter(records[:1])}, PretrainConfig(stages=(Stage("a", 1),), batch_size=2))
    with pytest.raises(ValueError, match="no item stream"):
        pretrain(bb, {"a": iter(records)}, PretrainConfig(stages=(Stage("b", 1),), batch_size=2))


def test_deterministic_for_a_seed(tok, records):
    cfg = PretrainConfig(stages=(Stage("single", 2),), batch_size=4, seed=5)
    runs = []
    for _ in range(2):
        bb = make_backbone(tok, seed=1)
        m = pretrain(bb, itertools.cycle(records), cfg)
        runs.append((m.losses, [p.detach().clone() for p in bb.model.parameters()]))
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def test_task_stream_cycles_styles_and_multiple_choice_answers_by_letter():
    import itertools

    from ltopd.data.sources import world_config
    from ltopd.twins.pretrain import task_stream

    cfg = world_config({"image_size": 128})
    plain = list(itertools.islice(task_stream(["color"], 7, cfg), 6))
    assert all(not r["options"] and r["source"] == "world" for r in plain)
    styled = list(itertools.islice(task_stream(["color", "exists"], 7, cfg, styles=[None, "onethinker"]), 40))
    assert {r["source"] for r in styled} == {"world", "onethinker"}
    mc = [r for r in styled if r["options"]]
    assert mc and all(r["source"] == "onethinker" and r["answer"] in "ABCDEFG" and len(r["answer"]) == 1 for r in mc)
    again = list(itertools.islice(task_stream(["color", "exists"], 7, cfg, styles=[None, "onethinker"]), 40))
    assert [r["id"] for r in again] == [r["id"] for r in styled]


def _grads(bb: Backbone) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in bb.model.parameters() if p.grad is not None]


def test_grouped_accumulation_equals_the_one_batch_gradient(tok, records):
    from ltopd.twins.pretrain import accumulate_loss

    two = dict(records[1], images=[records[1]["images"][0], records[2]["images"][0]])
    mixed = [records[0], two, records[3], records[4]]
    bb = make_backbone(tok, seed=2)
    bb.model.train()
    batch = bb.encode(mixed, [build_target(r) for r in mixed])
    reference = bb.forward(batch, with_labels=True)[0].loss  # one padded batch
    reference.backward()
    expected = _grads(bb)
    bb.model.zero_grad(set_to_none=True)
    loss = accumulate_loss(bb, mixed)
    torch.testing.assert_close(loss, reference.detach(), rtol=1e-5, atol=1e-6)
    for a, b in zip(_grads(bb), expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_cosine_decay_by_hand():
    stage = Stage("s", 5, final_lr_ratio=0.1)
    assert [round(stage.decay(i), 6) for i in range(5)] == [1.0, round(0.1 + 0.9 * 0.5 * (1 + 2**-0.5), 6), 0.55,
                                                            round(0.1 + 0.9 * 0.5 * (1 - 2**-0.5), 6), 0.1]
    assert Stage("flat", 5).decay(3) == 1.0


def test_a_stopped_run_resumes_to_the_uninterrupted_weights(tok, records, tmp_path):
    cfg = PretrainConfig(stages=(Stage("a", 2, final_lr_ratio=0.5), Stage("b", 2)), batch_size=2, seed=5,
                         warmup_steps=1)

    def sources():
        return {"a": lambda start: itertools.islice(itertools.cycle(records), start, None),
                "b": iter(records[::-1] * 4)}

    whole = make_backbone(tok, seed=1)
    full = pretrain(whole, sources(), cfg)
    split = make_backbone(tok, seed=1)
    first = pretrain(split, sources(), cfg, state_dir=tmp_path, stop_after=3)
    assert first.steps == 3
    resumed_bb = make_backbone(tok, seed=1)  # a fresh process: weights come from the saved state
    resumed = pretrain(resumed_bb, sources(), cfg, state_dir=tmp_path, checkpoint_every=1)
    assert resumed.steps == 4 and resumed.losses == full.losses
    for a, b in zip(resumed_bb.model.parameters(), whole.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_state_saved_by_another_recipe_is_not_resumed(tok, records, tmp_path, capsys):
    cfg = PretrainConfig(stages=(Stage("a", 2),), batch_size=2, seed=5, warmup_steps=1)
    fresh = pretrain(make_backbone(tok, seed=1), itertools.cycle(records), cfg)
    pretrain(make_backbone(tok, seed=1), itertools.cycle(records), cfg, state_dir=tmp_path, recipe={"world": "old"})
    # Same config, another recipe: a full run from scratch (same losses as a fresh run), and a
    # message naming the state file.
    other = pretrain(make_backbone(tok, seed=1), itertools.cycle(records), cfg, state_dir=tmp_path,
                     recipe={"world": "new"})
    assert other.steps == 2 and other.losses == fresh.losses
    assert "pretrain_state.pt was saved by another recipe" in capsys.readouterr().err
    # The same recipe resumes (nothing left to train: the curve comes from the state).
    again = pretrain(make_backbone(tok, seed=1), iter(()), cfg, state_dir=tmp_path, recipe={"world": "new"})
    assert again.losses == fresh.losses
    # A changed config (another stage length) is another recipe too.
    longer = PretrainConfig(stages=(Stage("a", 3),), batch_size=2, seed=5, warmup_steps=1)
    assert pretrain(make_backbone(tok, seed=1), itertools.cycle(records), longer, state_dir=tmp_path,
                    recipe={"world": "new"}).steps == 3


def test_stage_sources_interleave_world_tasks_and_benchmark_items():
    from ltopd.twins.job import interleave, stage_sources

    pt = {"seed": 0, "stages": [{"name": "mix", "steps": 1, "lr": 1e-3, "tasks": ["color"], "bench": ["pope", "gqa"]}]}
    source = stage_sources(pt, {"image_size": 128})["mix"]
    items = list(itertools.islice(source(0), 6))
    assert [r["source"] for r in items] == ["world", "pope", "world", "gqa", "world", "pope"]
    later = list(itertools.islice(source(3), 3))  # a resumed stream starts mid-way
    assert [r["id"] for r in later] == [r["id"] for r in items[3:6]]
    counting = [lambda s, k=k: itertools.count(100 * k + s) for k in range(3)]
    assert list(itertools.islice(interleave(counting, 4), 5)) == [101, 201, 2, 102, 202]


def test_instruction_items_never_share_an_evaluation_seed():
    from ltopd.bench.suites import synthetic_records
    from ltopd.bench.suites.instruct import INSTRUCT_SEED_BASE, instruct_seed, instruct_stream

    seeds = {instruct_seed(r, c) for r in (0, 1, 5_000_000) for c in (0, 1, 2**20 - 1)}
    assert len(seeds) == 9 and all(INSTRUCT_SEED_BASE <= s < 2**40 for s in seeds)
    world = {"image_size": 128}
    ours = list(itertools.islice(instruct_stream(["gqa"], 0, world), 4))
    evaluation = synthetic_records("gqa", 4, 0, world)
    assert {r["question"] + r["answer"] for r in ours} != {r["question"] + r["answer"] for r in evaluation}
    assert [r["id"] for r in ours] == [r["id"] for r in synthetic_records("gqa", 4, instruct_seed(0, 0), world)]


def test_a_fresh_optimizer_stage_equals_a_new_run_from_the_weights_before_it(tok, records, tmp_path):
    """Stage b with `fresh_optimizer` (AdamW moments cleared, warm-up anew) gives the weights of a
    second run that starts from stage a's weights; without it, b continues a's moments (differs).
    `seed_state` at b's start resumes to the same weights; at a stage without the flag it refuses."""
    from ltopd.twins.pretrain import seed_state

    def sources():
        return {"a": lambda s: itertools.islice(itertools.cycle(records), s, None),
                "b": lambda s: itertools.islice(itertools.cycle(records[::-1]), s, None)}

    a, b = Stage("a", 2), Stage("b", 2, lr_lm=1e-3, fresh_optimizer=True)
    one = make_backbone(tok, seed=1)
    pretrain(one, sources(), PretrainConfig(stages=(a, b), batch_size=2, seed=5, warmup_steps=2))
    two = make_backbone(tok, seed=1)
    pretrain(two, sources(), PretrainConfig(stages=(a,), batch_size=2, seed=5, warmup_steps=2))
    after_a = {k: v.clone() for k, v in two.model.state_dict().items()}
    pretrain(two, {"b": sources()["b"]}, PretrainConfig(stages=(b,), batch_size=2, seed=5, warmup_steps=2))
    for x, y in zip(one.model.parameters(), two.model.parameters()):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    carried = make_backbone(tok, seed=1)
    pretrain(carried, sources(), PretrainConfig(stages=(a, Stage("b", 2, lr_lm=1e-3)), batch_size=2, seed=5,
                                                warmup_steps=2))
    assert any(not torch.equal(x, y) for x, y in zip(one.model.parameters(), carried.model.parameters()))

    cfg = PretrainConfig(stages=(a, b), batch_size=2, seed=5, warmup_steps=2)
    seeded = make_backbone(tok, seed=7)
    seeded.model.load_state_dict(after_a)
    seed_state(tmp_path, seeded.model, cfg, {"r": 1}, steps=2, wall_s=3.0)
    resumed_bb = make_backbone(tok, seed=9)  # weights come from the seeded state
    metrics = pretrain(resumed_bb, sources(), cfg, state_dir=tmp_path, recipe={"r": 1})
    assert metrics.steps == 4 and metrics.wall_s >= 3.0 and all(x != x for x in metrics.losses[:2])
    for x, y in zip(one.model.parameters(), resumed_bb.model.parameters()):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    with pytest.raises(ValueError, match="without `fresh_optimizer`"):
        seed_state(tmp_path / "x", seeded.model, PretrainConfig(stages=(a, Stage("b", 2)), batch_size=2), None, 2)
    with pytest.raises(ValueError, match="no stage starts at update 3"):
        seed_state(tmp_path / "x", seeded.model, cfg, None, 3)


def test_a_sigterm_mid_update_saves_the_build_state_and_the_rerun_is_bit_identical(tok, records, tmp_path,
                                                                                   record_property):
    """Issue 54, fault 1, for a release build's pretraining: SIGTERM during update 2 of 4 finishes
    that update, saves the state (no periodic checkpoint is due) and raises Preempted; the rerun
    resumes there and ends with the uninterrupted weights, bit for bit."""
    import os
    import signal

    import ltopd.twins.pretrain as pretrain_module
    from ltopd import preempt

    cfg = PretrainConfig(stages=(Stage("a", 2, final_lr_ratio=0.5), Stage("b", 2)), batch_size=2, seed=5,
                         warmup_steps=1)

    def sources():
        return {"a": lambda start: itertools.islice(itertools.cycle(records), start, None),
                "b": lambda start: itertools.islice(itertools.cycle(records[::-1]), start, None)}

    whole = make_backbone(tok, seed=1)
    full = pretrain(whole, sources(), cfg)
    answer = pretrain_module.STAGE_OBJECTIVES["answer"]
    calls = []

    def sigterm_in_update_2(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return answer(*a, **k)

    restore = preempt.install()
    pretrain_module.STAGE_OBJECTIVES["answer"] = sigterm_in_update_2
    try:
        with pytest.raises(preempt.Preempted, match=r"pretraining state saved in .*pretrain_state.pt after update 2 "
                                                    r"of 4") as e:
            pretrain(make_backbone(tok, seed=1), sources(), cfg, state_dir=tmp_path, checkpoint_every=100)
        record_property("line", f"ltopd: {e.value}")  # as ltopd.cli prints it; benchmarks/faults.py shows it
    finally:
        pretrain_module.STAGE_OBJECTIVES["answer"] = answer
        restore()
    resumed_bb = make_backbone(tok, seed=1)
    resumed = pretrain(resumed_bb, sources(), cfg, state_dir=tmp_path)
    assert resumed.steps == 4 and resumed.losses == full.losses
    for a, b in zip(resumed_bb.model.parameters(), whole.model.parameters()):
        assert torch.equal(a, b)


def test_a_cut_short_build_state_is_not_resumed(tok, records, tmp_path, capsys, record_property):
    """Issue 54, fault 3: a truncated pretrain_state.pt is caught by its seal; the run starts from
    scratch (one line naming the file) to the same weights."""
    cfg = PretrainConfig(stages=(Stage("a", 2),), batch_size=2, seed=5, warmup_steps=1)
    whole = make_backbone(tok, seed=1)
    pretrain(whole, itertools.cycle(records), cfg)
    pretrain(make_backbone(tok, seed=1), itertools.cycle(records), cfg, state_dir=tmp_path, stop_after=1)
    state = tmp_path / "pretrain_state.pt"
    state.write_bytes(state.read_bytes()[:1000])
    again = make_backbone(tok, seed=1)
    assert pretrain(again, itertools.cycle(records), cfg, state_dir=tmp_path).steps == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "not resuming" in x]
    assert f"not resuming from {state} (truncated or corrupted" in line and "starting from scratch" in line
    record_property("line", line)
    for a, b in zip(again.model.parameters(), whole.model.parameters()):
        assert torch.equal(a, b)
