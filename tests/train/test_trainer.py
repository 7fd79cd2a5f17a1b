"""The training core: response alignment against a brute-force per-row reference, rollouts,
the optimiser's groups, EMA math, and resume == uninterrupted (exact weights)."""
from __future__ import annotations

import copy

import pytest
import torch

from ltopd.catalog import BENCHMARKS
from ltopd.data.sources import world_config
from ltopd.data.world import generate_task_item
from ltopd.models.prompt import build_target
from ltopd.train.distill import DistillTrainer
from ltopd.train.families import make_trainer
from ltopd.train.methods import TRAINED, MethodSpec, method_spec
from ltopd.train.optim import build_optimizer, no_decay, set_lr
from ltopd.train.response_logits import encode_responses, response_logits, response_view
from ltopd.train.rollout import rollout, trim
from ltopd.train.trainer import TrainConfig
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.corpus import corpus
from ltopd.twins.tokenizer import build_tokenizer

WORLD = {"image_size": 128}


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(list(corpus(WORLD, 4, BENCHMARKS)), 600)


@pytest.fixture(scope="module")
def records():
    cfg = world_config({**WORLD, "min_objects": 1, "max_objects": 1})
    return [generate_task_item("color", i, 3, cfg) for i in range(4)]


def backbone(tok):
    torch.manual_seed(0)
    return twin_backbone("qwen35-tiny", tok, seed=0)


def test_response_logits_match_a_per_row_brute_force(tok, records) -> None:
    bb = backbone(tok)
    responses = ["red</answer>", "a much longer answer here</answer>", "b</answer>", "blue</answer>"]
    batch, width = encode_responses(bb, records, responses)
    with torch.no_grad():
        got = response_logits(bb, batch, width, None)
        for b, rec in enumerate(records):  # one row alone, no padding: logits at t-1 predict token t
            one, _ = encode_responses(bb, [rec], [responses[b]])
            out, _ = bb.forward(one, None)
            pos = one.response_mask[0].nonzero().squeeze(1)
            ids = one.inputs["input_ids"][0, pos]
            n = len(pos)
            assert got.mask[b].sum() == n and torch.equal(got.ids[b, -n:], ids)
            torch.testing.assert_close(got.logits[b, -n:], out.logits[0, pos - 1], atol=1e-4, rtol=1e-4)


def test_response_logits_of_a_pruned_context_equal_the_full_logits_forward(tok, records) -> None:
    """response_logits() computes logits for the last width + 1 positions only; they equal the response
    positions of a forward over the whole pruned sequence (labels from the pruned sequence)."""
    bb = backbone(tok)
    responses = ["red</answer>", "a longer answer</answer>", "b</answer>", "blue</answer>"]
    batch, width = encode_responses(bb, records, responses)
    selection = bb.select(batch, 0.25, "cdpruner", floor=1)
    with torch.no_grad():
        got = response_logits(bb, batch, width, selection)
        out, pruned = bb.forward(batch, selection, with_labels=True)
        ref = response_view(out.logits, pruned.labels, width)
    assert got.logits.shape == ref.logits.shape == (len(records), width, bb.model.config.text_config.vocab_size)
    assert torch.equal(got.mask, ref.mask) and torch.equal(got.ids, ref.ids)
    torch.testing.assert_close(got.logits, ref.logits, atol=1e-5, rtol=1e-5)


def test_trim_keeps_the_stop_token_and_drops_padding() -> None:
    assert trim([5, 6, 9, 0, 0], stop_ids=[9], pad_id=0) == [5, 6, 9]
    assert trim([5, 6, 7], stop_ids=[9], pad_id=0) == [5, 6, 7]
    assert trim([5, 0, 0], stop_ids=[9], pad_id=0) == [5]


def test_rollouts_are_grouped_deterministic_and_capped(tok, records) -> None:
    bb = backbone(tok)
    a = rollout(bb, records[:2], 3, 0.25, "cdpruner", 1, max_new_tokens=6, seed=11)
    b = rollout(bb, records[:2], 3, 0.25, "cdpruner", 1, max_new_tokens=6, seed=11)
    assert a.responses == b.responses and len(a.responses) == 6
    assert [r["id"] for r in a.records] == [records[0]["id"]] * 3 + [records[1]["id"]] * 3
    stop = set(bb.stop_token_ids())
    assert all(1 <= len(r) <= 6 and (len(r) == 6 or r[-1] in stop) for r in a.responses)
    assert all(len(k) == 4 for k in a.selection.kept)  # 16 tokens at 128 px -> ceil(16 x 0.25) = 4


def test_optimizer_groups_and_warmup(tok) -> None:
    bb = backbone(tok)
    opt = build_optimizer(bb.model, {"lm": 1e-3, "merger": 1e-3, "vision": 2e-4}, 0.01, (0.9, 0.999))
    names = {id(p): n for n, p in bb.model.named_parameters()}
    for g in opt.param_groups:
        for p in g["params"]:
            assert (g["weight_decay"] == 0.0) == no_decay(names[id(p)], p)
    assert {g["part"] for g in opt.param_groups} == {"lm", "merger", "vision"}
    assert sum(p.numel() for g in opt.param_groups for p in g["params"]) == sum(
        p.numel() for p in bb.model.parameters())
    assert set_lr(opt, 0, 4)["vision"] == pytest.approx(2e-4 / 4) and set_lr(opt, 9, 4)["lm"] == 1e-3
    frozen = build_optimizer(bb.model, {"lm": 1e-3, "merger": 0.0, "vision": 0.0}, 0.01, (0.9, 0.999))
    assert {g["part"] for g in frozen.param_groups} == {"lm"}


def test_every_trained_method_has_a_trainer_and_bad_specs_fail() -> None:
    from ltopd.catalog import METHODS
    from ltopd.train.families import TRAINERS

    assert {m.family for m in TRAINED.values()} == set(TRAINERS) == {"distill", "sft", "rl", "epic", "llava_mini"}
    assert set(TRAINED) == {m for m, spec in METHODS.items() if spec.kind == "trained"}
    with pytest.raises(ValueError, match="objective must be one of"):
        MethodSpec("x", "distill", objective="kl")
    with pytest.raises(ValueError, match="policy_loss"):
        MethodSpec("x", "rl")
    with pytest.raises(ValueError, match="has no trainer yet"):
        method_spec("mqt_llava")


CFG = TrainConfig(budget=0.25, selector="cdpruner", floor=1, rollouts=2, max_new_tokens=5, top_k=8, warmup_steps=2,
                  lrs={"lm": 1e-3, "merger": 1e-3, "vision": 2e-4}, checkpoint_every=2, seed=3)


def _weights(trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.accelerator.unwrap_model(trainer.student.model).state_dict().items()}


@pytest.mark.parametrize("name", ["ltopd", "kd_fixed_prefix", "sft_curriculum", "ltopd_teacher_ema", "gspo", "epic",
                                  "llava_mini"])
def test_resumed_run_ends_with_the_same_weights(tok, records, tmp_path, name) -> None:
    batches = [records[i:i + 2] for i in (0, 2, 0, 2)]
    full = make_trainer(backbone(tok), method_spec(name), CFG, total_steps=4)
    logs = full.fit(batches, tmp_path / "a")
    assert [log.step for log in logs] == [1, 2, 3, 4]
    assert all(torch.isfinite(torch.tensor(log.metrics["loss"])) for log in logs)
    first = make_trainer(backbone(tok), method_spec(name), CFG, total_steps=4)
    first.fit(batches, tmp_path / "b", stop_after=2)  # "killed" after the checkpoint at 2
    resumed = make_trainer(backbone(tok), method_spec(name), CFG, total_steps=4)
    rest = resumed.fit(batches, tmp_path / "b")
    assert [log.step for log in rest] == [3, 4]
    # the checkpoint carries the earlier updates' logs: a resumed run reports the whole curve
    assert [(log.step, log.metrics["loss"]) for log in resumed.history] == \
        [(log.step, log.metrics["loss"]) for log in full.history]
    a, b = _weights(full), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], _weights(make_trainer(backbone(tok), method_spec(name), CFG, 4))[k]) for k in a)
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["step-000004"]  # older checkpoints pruned


def test_ema_teacher_moves_by_the_rate(tok, records) -> None:
    t = DistillTrainer(backbone(tok), method_spec("ltopd_teacher_ema"), CFG, total_steps=4)
    before = copy.deepcopy(t.teacher.model.state_dict())
    with torch.no_grad():
        for p in t.student.model.parameters():
            p.add_(1.0)
    t.after_step()
    student = t.student.model.state_dict()
    for k, v in t.teacher.model.state_dict().items():
        if v.is_floating_point():
            torch.testing.assert_close(v, 0.95 * before[k] + 0.05 * student[k])


def test_curriculum_plumbing(tok) -> None:
    lt = DistillTrainer(backbone(tok), method_spec("ltopd"), CFG, total_steps=175)
    assert lt.keep_ratio(0) == 1.0 and lt.keep_ratio(174) == 0.25
    flat = DistillTrainer(backbone(tok), method_spec("opd_no_curriculum"), CFG, total_steps=175)
    assert {flat.keep_ratio(s) for s in range(175)} == {0.25}


def test_distill_step_reports_the_issue_metrics(tok, records) -> None:
    t = DistillTrainer(backbone(tok), method_spec("ltopd"), CFG, total_steps=1)
    (log,) = t.fit([records[:2]])
    for key in ("loss", "keep_ratio", "mean_response_len", "tail_mass_student", "tail_mass_teacher",
                "support_size", "grad_norm", "lr_lm", "rollout_tokens_per_s", "scoring_tokens_per_s",
                "rollout_s", "teacher_s", "student_s"):
        assert key in log.metrics, key
    assert log.metrics["keep_ratio"] == 1.0  # (2 x 2 + 1) x 0.25, capped at 1
    assert build_target(records[0]).endswith("</answer>")


def _grads_after_one_step(tok, records, method, **cfg) -> dict[str, torch.Tensor]:
    t = make_trainer(backbone(tok), method_spec(method), TrainConfig(**{**CFG.__dict__, **cfg}), total_steps=4)
    t.optimizer.zero_grad(set_to_none=True)
    loss, _ = t.step_loss(records, 0.25, step=3)
    if loss.requires_grad:
        t.accelerator.backward(loss)
    return {n: p.grad.clone() for n, p in t.student.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("method", ["ltopd", "kd_fixed_prefix", "ltopd_trust_region"])
def test_microbatches_accumulate_the_same_gradient(tok, records, method) -> None:
    # 4 questions x 2 rollouts = 8 rows: student 3 + 3 + 2 rows, teacher 2 rows per forward,
    # against one forward of all 8 (same rollouts: decode batch and seed unchanged)
    whole = _grads_after_one_step(tok, records, method)
    parts = _grads_after_one_step(tok, records, method, student_microbatch=3, teacher_microbatch=2)
    assert whole.keys() == parts.keys() and whole
    for k in whole:
        torch.testing.assert_close(parts[k], whole[k], atol=2e-5, rtol=1e-3)


def test_rollout_decode_batches_keep_one_selection_per_row(tok, records) -> None:
    bb = backbone(tok)
    ro = rollout(bb, records, 2, 0.25, "cdpruner", 1, max_new_tokens=4, seed=3, decode_batch=3)
    whole = rollout(bb, records, 2, 0.25, "cdpruner", 1, max_new_tokens=4, seed=3)
    assert len(ro.responses) == 8 and len(ro.selection.kept) == 8
    # CDPruner is deterministic, so chunking the decode changes the samples, never the selection
    assert all(torch.equal(a, b) for a, b in zip(ro.selection.kept, whole.selection.kept))


def test_seeded_order_is_a_seeded_permutation() -> None:
    from ltopd.train.job import seeded_order

    batches = [[{"id": i}] for i in range(12)]
    a, b = seeded_order(batches, 0), seeded_order(batches, 1)
    assert sorted(x[0]["id"] for x in a) == list(range(12))  # every batch once
    assert a == seeded_order(batches, 0) and a != b  # the same seed, the same order; another, another


@pytest.mark.parametrize("name", ["sft", "sft_curriculum", "kd_fixed_prefix"])
def test_seeds_give_different_students_where_the_method_samples_nothing(tok, records, name) -> None:
    """SFT and fixed-prefix KD under CDPruner draw nothing at random: the seed's data order
    (train/job.py) is what makes their seeds differ (and the same seed reproduces its student)."""
    from ltopd.train.job import seeded_order

    batches = [records[i:i + 1] for i in range(4)]

    def student(seed: int) -> dict[str, torch.Tensor]:
        t = make_trainer(backbone(tok), method_spec(name), CFG, total_steps=3)
        t.fit(seeded_order(batches, seed)[:3])  # 3 of 4: the seeds' last updates differ
        return _weights(t)

    s0, s0_again, s1 = student(0), student(0), student(1)
    assert all(torch.equal(s0[k], s0_again[k]) for k in s0)
    assert any(not torch.equal(s0[k], s1[k]) for k in s0)


def _sigterm_during_update(trainer, at: int) -> None:
    """A real SIGTERM to this process in the middle of update `at` (1-based), as SLURM's
    preemption sends it: the handler only sets a flag, the update finishes."""
    import os
    import signal

    inner = trainer.step_loss

    def step_loss(records, ratio, step):
        if step + 1 == at:
            os.kill(os.getpid(), signal.SIGTERM)
        return inner(records, ratio, step)

    trainer.step_loss = step_loss


@pytest.mark.parametrize("name", ["ltopd", "sft"])
def test_a_sigterm_mid_update_saves_that_update_and_the_rerun_is_bit_identical(tok, records, tmp_path, name,
                                                                              record_property) -> None:
    """Issue 54, fault 1: preemption. The update in progress finishes, its state is saved (not
    only the last periodic checkpoint's), the loop raises Preempted; the rerun continues from
    that state to the uninterrupted run's weights, bit for bit."""
    from ltopd import preempt

    cfg = TrainConfig(**{**CFG.__dict__, "checkpoint_every": 100})  # no periodic checkpoint before the end
    batches = [records[i:i + 2] for i in (0, 2, 0, 2)]
    full = make_trainer(backbone(tok), method_spec(name), cfg, total_steps=4)
    full.fit(batches)
    stopped = make_trainer(backbone(tok), method_spec(name), cfg, total_steps=4)
    _sigterm_during_update(stopped, at=3)
    restore = preempt.install()
    try:
        with pytest.raises(preempt.Preempted, match=r"SIGTERM: training state saved in .* after update 3 of 4") as e:
            stopped.fit(batches, tmp_path)
        record_property("line", f"ltopd: {e.value}")  # as ltopd.cli prints it; benchmarks/faults.py shows it
    finally:
        restore()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("step-")] == ["step-000003"]
    resumed = make_trainer(backbone(tok), method_spec(name), cfg, total_steps=4)
    assert [log.step for log in resumed.fit(batches, tmp_path)] == [4]
    a, b = _weights(full), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_cut_short_checkpoint_is_set_aside_with_one_line_and_the_run_starts_over(tok, records, tmp_path,
                                                                                    capsys, record_property) -> None:
    """Issue 54, fault 3: a truncated train_state is detected by its seal before torch reads it;
    the run starts from the beginning and still ends with the uninterrupted weights."""
    batches = [records[i:i + 2] for i in (0, 2, 0, 2)]
    full = make_trainer(backbone(tok), method_spec("sft"), CFG, total_steps=4)
    full.fit(batches)
    make_trainer(backbone(tok), method_spec("sft"), CFG, total_steps=4).fit(batches, tmp_path, stop_after=2)
    state = tmp_path / "step-000002" / "state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    resumed = make_trainer(backbone(tok), method_spec("sft"), CFG, total_steps=4)
    assert [log.step for log in resumed.fit(batches, tmp_path)] == [1, 2, 3, 4]
    err = [line for line in capsys.readouterr().err.splitlines() if "not resuming" in line]
    assert len(err) == 1 and "step-000002/state.pt" in err[0] and "truncated or corrupted" in err[0]
    record_property("line", err[0])
    a, b = _weights(full), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
