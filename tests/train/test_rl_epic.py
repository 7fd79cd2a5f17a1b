"""The RL baselines (GRPO, GSPO, DAPO) and EPIC on the shared rollout/scoring core: the reward,
the policy gradient against a written-out reference, DAPO's dynamic sampling, EPIC's schedule
by hand and its loss against two independent forwards."""
from __future__ import annotations

import pytest
import torch
from test_trainer import CFG, backbone, records, tok  # noqa: F401  (fixtures)

from ltopd.models.prompt import build_target
from ltopd.train import rl as rl_mod
from ltopd.train.epic import EpicParams, EpicTrainer, reduction_bounds, teacher_reduction
from ltopd.train.families import make_trainer
from ltopd.train.losses import epic_loss
from ltopd.train.methods import method_spec
from ltopd.train.response_logits import encode_responses, response_logits
from ltopd.train.reward import correctness_reward
from ltopd.train.rl import RLParams
from ltopd.train.rollout import rollout
from ltopd.train.trainer import TrainConfig, step_seed


def test_correctness_reward_reads_letters_and_normalised_text() -> None:
    mc = {"answer": "B", "options": ["red", "blue"]}
    assert correctness_reward(mc, "B</answer>") == 1.0
    assert correctness_reward(mc, "The answer is B.</answer>") == 1.0
    assert correctness_reward(mc, "A</answer>") == 0.0
    assert correctness_reward({"answer": "blue", "options": ["red", "blue"]}, "B</answer>") == 1.0  # text reference
    assert correctness_reward({"answer": "Top Left"}, "top left.</answer> trailing") == 1.0
    assert correctness_reward({"answer": "3"}, "three</answer>") == 1.0  # VQA number words
    assert correctness_reward({"answer": "red"}, "</answer>") == 0.0
    assert correctness_reward({"answer": "red"}, "reddish</answer>") == 0.0


def _reward_by_length(record, text) -> float:
    """A reward that varies within a group: 1 for responses of even token-ish length."""
    return float(len(text) % 2 == 0)


def _grads(trainer, records, step=1):
    trainer.optimizer.zero_grad(set_to_none=True)
    loss, metrics = trainer.step_loss(records, 0.25, step)
    if loss.requires_grad:
        trainer.accelerator.backward(loss)
    return {n: p.grad.clone() for n, p in trainer.student.model.named_parameters() if p.grad is not None}, metrics


@pytest.mark.parametrize("method", ["grpo", "gspo"])
def test_rl_gradient_is_the_group_normalised_policy_gradient(tok, records, monkeypatch, method) -> None:
    # At the update pi_old = pi (one update per rollout batch), so every ratio is 1 and the loss
    # gradient must equal that of -mean_i A_i mean_t log pi(o_it), A = (r - mean) / (sd + 1e-6).
    monkeypatch.setattr(rl_mod, "correctness_reward", _reward_by_length)
    cfg = TrainConfig(**{**CFG.__dict__, "rollouts": 4, "max_new_tokens": 6, "method_params": {"mini_batches": 1}})
    trainer = make_trainer(backbone(tok), method_spec(method), cfg, total_steps=4)
    got, metrics = _grads(trainer, records[:2])
    assert metrics["groups_kept"] == 2 and got

    ref = make_trainer(backbone(tok), method_spec(method), cfg, total_steps=4)
    ro = rollout(ref.student, records[:2], 4, 0.25, "cdpruner", cfg.floor, 6, step_seed(cfg.seed, 1))
    texts = ref.student.tokenizer.batch_decode(ro.responses, skip_special_tokens=False)
    r = torch.tensor([_reward_by_length(None, t) for t in texts]).view(2, 4)
    assert ((r.amax(1) - r.amin(1)) > 0).all(), "pick a reward that varies within each group"
    adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)).view(-1)
    batch, width = encode_responses(ref.student, ro.records, ro.responses)
    s = response_logits(ref.student, batch, width, ro.selection)
    logp = torch.log_softmax(s.logits.float(), -1).gather(-1, s.ids.unsqueeze(-1)).squeeze(-1)
    per_seq = (logp * s.mask).sum(1) / s.mask.sum(1)
    ref.optimizer.zero_grad(set_to_none=True)
    (-(adv * per_seq).mean()).backward()
    want = {n: p.grad for n, p in ref.student.model.named_parameters() if p.grad is not None}
    assert want.keys() == got.keys()
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-5, rtol=1e-3)


def test_constant_reward_groups_give_no_gradient(tok, records, monkeypatch) -> None:
    monkeypatch.setattr(rl_mod, "correctness_reward", lambda rec, text: 1.0)
    grpo = make_trainer(backbone(tok), method_spec("grpo"), CFG, total_steps=4)
    grads, _ = _grads(grpo, records[:2])
    assert grads and all(float(g.abs().max()) == 0.0 for g in grads.values())  # advantage 0 exactly
    dapo = make_trainer(backbone(tok), method_spec("dapo"), CFG, total_steps=4)
    grads, metrics = _grads(dapo, records[:2])
    # every group re-rolled resample_rounds (2) times, then dropped: no update at all
    assert metrics["groups_kept"] == 0 and metrics["groups_resampled"] == 4 and not grads


def test_dapo_keeps_mixed_groups_and_shapes_overlong_rewards(tok, records, monkeypatch) -> None:
    monkeypatch.setattr(rl_mod, "correctness_reward", _reward_by_length)
    cfg = TrainConfig(**{**CFG.__dict__, "rollouts": 4, "max_new_tokens": 6})
    dapo = make_trainer(backbone(tok), method_spec("dapo"), cfg, total_steps=4)
    groups = dapo._groups(records[:2], 0.25, seed=5)
    shaped = dapo._rewards(groups)
    stop = set(dapo.student.stop_token_ids())
    for g, row in zip(groups, shaped):
        for correct, resp, value in zip(g.correct.tolist(), g.responses, row.tolist()):
            length = len(resp) - (resp[-1] in stop)  # window 4 before the cap of 6: 3..6 lose (L - 2) / 4
            assert value == pytest.approx(correct - max(0, length - 2) / 4)
    grads, metrics = _grads(dapo, records[:2])
    assert metrics["groups_kept"] >= 1 and grads


def test_later_mini_batches_see_moved_ratios_and_grpo_gspo_differ(tok, records, monkeypatch) -> None:
    # Two optimiser steps per rollout batch: the second mini-batch is scored by a policy that has
    # already moved, so its ratios leave 1 and GSPO's tight sequence clip acts where GRPO's does not.
    monkeypatch.setattr(rl_mod, "correctness_reward", _reward_by_length)
    cfg = TrainConfig(**{**CFG.__dict__, "rollouts": 4, "max_new_tokens": 6, "method_params": {"mini_batches": 2}})
    out = {}
    for method in ("grpo", "gspo"):
        t = make_trainer(backbone(tok), method_spec(method), cfg, total_steps=4)
        before = {k: v.clone() for k, v in t.student.model.state_dict().items()}
        grads, metrics = _grads(t, records[:2])
        after = t.student.model.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)  # the inner step was taken
        out[method] = (grads, metrics)
    assert out["gspo"][1]["clipped_frac"] > 0.0
    assert any(not torch.allclose(out["grpo"][0][k], out["gspo"][0][k]) for k in out["grpo"][0])


def test_rl_params_reject_unknown_keys() -> None:
    assert RLParams.from_section({"dapo_clip": [0.1, 0.3]}).dapo_clip == (0.1, 0.3)
    with pytest.raises(ValueError, match="unknown key"):
        RLParams.from_section({"clip_hi": 0.3})


def test_epic_schedule_by_hand() -> None:
    p = EpicParams()
    # the reference constants are the case target reduction 0.74: lo = 0.1 + 0.16 p, hi = 0.1 + 0.64 p
    assert reduction_bounds(0.5, 0.74, p) == pytest.approx((0.18, 0.42))
    assert reduction_bounds(0.0, 0.95, p) == pytest.approx((0.1, 0.1))
    assert reduction_bounds(1.0, 0.95, p) == pytest.approx((0.3125, 0.95))  # hi ends at the 5% budget
    assert teacher_reduction(0.5, 0.0, p) == pytest.approx(0.4)  # gap 0.1
    assert teacher_reduction(0.5, 1.0, p) == pytest.approx(0.2)  # gap capped at 0.3
    assert teacher_reduction(0.2, 0.5, p) == 0.0  # gap 0.3 > 0.2: the teacher sees every token


def test_epic_student_draws_within_bounds_and_resumes_the_same(tok) -> None:
    cfg = TrainConfig(**{**CFG.__dict__, "budget": 0.05})
    t = EpicTrainer(backbone(tok), method_spec("epic"), cfg, total_steps=10)
    again = EpicTrainer(backbone(tok), method_spec("epic"), cfg, total_steps=10)
    for step in range(10):
        lo, hi = reduction_bounds(step / 10, 0.95, t.epic)
        assert 1 - hi - 1e-12 <= t.keep_ratio(step) <= 1 - lo + 1e-12
        assert t.keep_ratio(step) == again.keep_ratio(step)


def test_epic_loss_is_the_formula_on_two_independent_forwards(tok, records) -> None:
    cfg = TrainConfig(**{**CFG.__dict__, "budget": 0.05, "method_params": {"alpha": 0.3, "tau": 2.0}})
    t = EpicTrainer(backbone(tok), method_spec("epic"), cfg, total_steps=10)
    step, ratio = 9, 0.2  # p = 0.9: gap 0.3, teacher keeps 1 - (0.8 - 0.3) = 0.5
    loss, metrics = t.step_loss(records, ratio, step)
    assert metrics["teacher_keep_ratio"] == pytest.approx(0.5)
    bb, seed = t.student, step_seed(cfg.seed, step)
    batch, width = encode_responses(bb, records, [build_target(r) for r in records])
    with torch.no_grad():
        teacher = response_logits(bb, batch, width, bb.select(batch, 0.5, "cdpruner", cfg.floor, seed))
        student = response_logits(bb, batch, width, bb.select(batch, 0.2, "cdpruner", cfg.floor, seed))
        s = torch.log_softmax(student.logits / 2, -1)
        tt = torch.log_softmax(teacher.logits / 2, -1)
        kl = (tt.exp() * (tt - s)).sum(-1)
        ce = -torch.log_softmax(student.logits, -1).gather(-1, student.ids.unsqueeze(-1)).squeeze(-1)
        m = student.mask
        want = 0.3 * 4 * kl[m].mean() + 0.7 * ce[m].mean()
    assert float(loss.detach()) == pytest.approx(float(want), rel=1e-4)
    assert (float(epic_loss(student.logits, teacher.logits, student.ids, m, 0.3, 2.0))
            == pytest.approx(float(want), rel=1e-4))
