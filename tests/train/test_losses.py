"""Distillation losses against full-vocabulary math written out independently."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ltopd.train.losses import (
    distill_loss,
    epic_loss,
    forward_kl,
    generalized_jsd,
    importance_weight,
    masked_mean_per_sequence_then_batch,
    masked_token_mean,
    reverse_kl,
    token_ce,
)
from ltopd.train.support import build_support, chunked_logsumexp, first_occurrence_mask, gather_logprobs

B, T, V = 2, 6, 40


def _batch(seed: int = 0, scale: float = 3.0):
    g = torch.Generator().manual_seed(seed)
    student = (torch.randn(B, T, V, generator=g) * scale).requires_grad_(True)
    teacher = torch.randn(B, T, V, generator=g) * scale
    sampled = torch.randint(0, V, (B, T), generator=g)
    return student, teacher, sampled


# ---- independent references: plain softmax over V, no logsumexp tricks -------------------
def _ref_kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return (p * (p.log() - q.log())).sum(-1)


def _ref_divergence(student_logits, teacher_logits, alpha: float) -> torch.Tensor:
    s = torch.softmax(student_logits.double(), -1)
    t = torch.softmax(teacher_logits.double(), -1)
    if alpha == 0.0:
        return _ref_kl(t, s)
    if alpha == 1.0:
        return _ref_kl(s, t)
    m = (1 - alpha) * s + alpha * t
    return (1 - alpha) * _ref_kl(s, m) + alpha * _ref_kl(t, m)


def _ref_seq_then_batch(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    seq_means = [per_token[b][mask[b]].mean() for b in range(per_token.shape[0]) if mask[b].any()]
    return torch.stack(seq_means).mean()


# ---- support -------------------------------------------------------------------------------
@pytest.mark.parametrize("chunk", [1, 7, 40, 4096])
def test_chunked_logsumexp_equals_torch(chunk):
    x = torch.randn(3, 5, 40, generator=torch.Generator().manual_seed(1)) * 10
    torch.testing.assert_close(chunked_logsumexp(x, chunk), torch.logsumexp(x, -1))


def test_gather_logprobs_value_and_gradient_match_log_softmax():
    logits = torch.randn(2, 3, 11, dtype=torch.double, requires_grad=True)
    ids = torch.tensor([[[0, 4, 4], [10, 2, 1], [3, 3, 3]], [[5, 6, 7], [0, 0, 9], [8, 1, 2]]])
    torch.testing.assert_close(
        gather_logprobs(logits, ids, 4), F.log_softmax(logits, -1).gather(-1, ids)
    )
    assert torch.autograd.gradcheck(lambda x: gather_logprobs(x, ids, 4), (logits,))


def test_first_occurrence_mask_hand_example():
    ids = torch.tensor([[3, 1, 3, 2, 1, 1]])
    assert first_occurrence_mask(ids).tolist() == [[True, True, False, True, False, False]]


def test_tail_bucket_makes_each_distribution_sum_to_one():
    student, teacher, sampled = _batch()
    sup = build_support(student, teacher, sampled, top_k=3, chunk=16)
    assert sup.student_logp.shape == (B, T, 2 * 3 + 2)
    for logp in (sup.student_logp, sup.teacher_logp):
        torch.testing.assert_close(logp.exp().sum(-1), torch.ones(B, T), atol=1e-5, rtol=0)
    # the tail is exactly the mass off the support, computed from the full softmax
    p = torch.softmax(student.detach(), -1)
    for b in range(B):
        for t in range(T):
            ids = set(sup.support_ids[b, t].tolist())
            off = 1.0 - p[b, t, sorted(ids)].sum()
            assert math.isclose(sup.student_logp[b, t, -1].exp().item(), off.item(), abs_tol=1e-5)


def test_duplicates_are_masked_keeping_first_occurrence():
    student, _, _ = _batch()
    teacher = student.detach().clone()  # identical top-K -> every teacher slot is a duplicate
    sampled = student.detach().argmax(-1)  # sampled token = student's top-1 -> duplicate too
    k = 4
    sup = build_support(student, teacher, sampled, top_k=k)
    mask = sup.slot_mask
    assert mask[..., :k].all() and not mask[..., k : 2 * k + 1].any() and mask[..., -1].all()
    assert torch.isinf(sup.student_logp[..., k : 2 * k + 1]).all()
    for b in range(B):
        for t in range(T):
            assert int(mask[b, t, :-1].sum()) == len(set(sup.support_ids[b, t].tolist()))


# ---- divergences ---------------------------------------------------------------------------
@pytest.mark.parametrize("objective,alpha", [("jsd", 0.5), ("jsd", 0.2), ("forward_kl", 0.5), ("reverse_kl", 0.5)])
def test_top_k_equal_to_vocab_gives_exact_full_vocab_divergence(objective, alpha):
    student, teacher, sampled = _batch(seed=3)
    mask = torch.ones(B, T, dtype=torch.bool)
    loss, stats = distill_loss(student, teacher, sampled, mask, objective, top_k=V, alpha=alpha, chunk=9)
    ref_alpha = {"jsd": alpha, "forward_kl": 0.0, "reverse_kl": 1.0}[objective]
    ref_student = student.detach().clone().double().requires_grad_(True)
    ref = _ref_divergence(ref_student, teacher, ref_alpha).mean()
    assert math.isclose(loss.item(), ref.item(), rel_tol=1e-4, abs_tol=1e-6)
    loss.backward()
    ref.backward()
    torch.testing.assert_close(student.grad.double(), ref_student.grad, atol=1e-5, rtol=1e-3)
    assert stats["support_size"] == V
    assert stats["tail_mass_student"] < 1e-6 and stats["tail_mass_teacher"] < 1e-6


def test_small_k_matches_brute_force_bucket_divergence():
    student, teacher, sampled = _batch(seed=4)
    k, alpha = 3, 0.5
    mask = torch.ones(B, T, dtype=torch.bool)
    loss, _ = distill_loss(student, teacher, sampled, mask, "jsd", top_k=k, alpha=alpha, chunk=8)
    p, q = torch.softmax(student.detach().double(), -1), torch.softmax(teacher.double(), -1)
    per_token = torch.zeros(B, T, dtype=torch.double)
    for b in range(B):
        for t in range(T):
            ids = set(p[b, t].topk(k).indices.tolist()) | set(q[b, t].topk(k).indices.tolist())
            ids = sorted(ids | {int(sampled[b, t])})
            ps = torch.cat([p[b, t, ids], 1 - p[b, t, ids].sum(0, keepdim=True)])
            qs = torch.cat([q[b, t, ids], 1 - q[b, t, ids].sum(0, keepdim=True)])
            m = 0.5 * ps + 0.5 * qs
            per_token[b, t] = 0.5 * _ref_kl(ps, m) + 0.5 * _ref_kl(qs, m)
    assert math.isclose(loss.item(), per_token.mean().item(), rel_tol=1e-4)


def test_endpoints_equal_plain_kls():
    g = torch.Generator().manual_seed(5)
    s = F.log_softmax(torch.randn(4, 9, generator=g), -1)
    t = F.log_softmax(torch.randn(4, 9, generator=g), -1)
    mask = torch.ones_like(s, dtype=torch.bool)
    fwd = (t.exp() * (t - s)).sum(-1)
    rev = (s.exp() * (s - t)).sum(-1)
    torch.testing.assert_close(generalized_jsd(s, t, mask, 0.0), fwd)
    torch.testing.assert_close(forward_kl(s, t, mask), fwd)
    torch.testing.assert_close(generalized_jsd(s, t, mask, 1.0), rev)
    torch.testing.assert_close(reverse_kl(s, t, mask), rev)
    assert not torch.allclose(fwd, rev)


def test_jsd_symmetric_and_bounded_by_log2():
    g = torch.Generator().manual_seed(6)
    s = F.log_softmax(torch.randn(8, 30, generator=g) * 40, -1)
    t = F.log_softmax(torch.randn(8, 30, generator=g) * 40, -1)
    mask = torch.ones_like(s, dtype=torch.bool)
    jst = generalized_jsd(s, t, mask, 0.5)
    torch.testing.assert_close(jst, generalized_jsd(t, s, mask, 0.5))
    assert (jst <= math.log(2) + 1e-6).all() and (jst >= 0).all()
    # disjoint one-hot-like distributions reach the bound
    far = torch.full((1, 4), -1e4)
    a, c = far.clone(), far.clone()
    a[0, 0], c[0, 1] = 0.0, 0.0
    one = torch.ones_like(a, dtype=torch.bool)
    assert math.isclose(generalized_jsd(F.log_softmax(a, -1), F.log_softmax(c, -1), one).item(), math.log(2),
                        rel_tol=1e-6)


def test_prompt_and_padding_never_enter_the_loss():
    student, teacher, sampled = _batch(seed=7)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[0, 2:5] = True  # prompt 0..1, response 2..4, padding 5
    mask[1, 1:3] = True
    loss, _ = distill_loss(student, teacher, sampled, mask, top_k=5, chunk=8)
    loss.backward()
    grad = student.grad.clone()
    assert (grad[~mask] == 0).all() and (grad[mask] != 0).any()

    g = torch.Generator().manual_seed(99)
    student2 = student.detach().clone()
    teacher2, sampled2 = teacher.clone(), sampled.clone()
    student2[~mask] = torch.randn(int((~mask).sum()), V, generator=g) * 1e3
    teacher2[~mask] = torch.randn(int((~mask).sum()), V, generator=g) * 1e3
    sampled2[~mask] = -100
    student2.requires_grad_(True)
    loss2, _ = distill_loss(student2, teacher2, sampled2, mask, top_k=5, chunk=8)
    loss2.backward()
    assert loss2.item() == pytest.approx(loss.item(), rel=1e-6)
    torch.testing.assert_close(student2.grad, grad)
    ref = _ref_seq_then_batch(_dense_jsd_small_k(student, teacher, sampled, 5), mask)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)


def _dense_jsd_small_k(student, teacher, sampled, k):
    sup = build_support(student.detach(), teacher, sampled, top_k=k)
    return generalized_jsd(sup.student_logp, sup.teacher_logp, sup.slot_mask, 0.5)


def test_all_masked_batch_is_exactly_zero_with_finite_grads():
    student, teacher, sampled = _batch(seed=8)
    mask = torch.zeros(B, T, dtype=torch.bool)
    loss, stats = distill_loss(student, teacher, sampled, mask, top_k=4)
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.isfinite(student.grad).all() and (student.grad == 0).all()
    assert all(math.isfinite(v) for v in stats.values())


def test_gradient_reaches_student_only():
    student, teacher, sampled = _batch(seed=9)
    teacher.requires_grad_(True)
    loss, _ = distill_loss(student, teacher, sampled, torch.ones(B, T, dtype=torch.bool), top_k=4)
    loss.backward()
    assert teacher.grad is None
    assert student.grad is not None and student.grad.abs().sum() > 0


def test_chunk_size_does_not_change_the_loss():
    student, teacher, sampled = _batch(seed=10)
    mask = torch.ones(B, T, dtype=torch.bool)
    a, _ = distill_loss(student, teacher, sampled, mask, top_k=6, chunk=3)
    b, _ = distill_loss(student, teacher, sampled, mask, top_k=6, chunk=4096)
    assert a.item() == pytest.approx(b.item(), rel=1e-6)


def test_out_of_range_sampled_id_at_valid_position_is_an_error():
    student, teacher, sampled = _batch()
    sampled[0, 0] = V
    with pytest.raises(ValueError):
        distill_loss(student, teacher, sampled, torch.ones(B, T, dtype=torch.bool))


# ---- importance weight and aggregation -----------------------------------------------------
def test_importance_weight_clamped_capped_detached():
    logp = torch.tensor([0.0, 0.0, 0.0, 0.0], requires_grad=True)
    old = torch.tensor([-math.log(1.5), -math.log(3.0), 30.0, 0.0])
    w = importance_weight(logp, old)
    torch.testing.assert_close(w, torch.tensor([1.5, 2.0, math.exp(-20.0), 1.0]))
    assert not w.requires_grad


def test_importance_weight_scales_distill_loss():
    student, teacher, sampled = _batch(seed=11)
    mask = torch.ones(B, T, dtype=torch.bool)
    sampled_logp = F.log_softmax(student.detach(), -1).gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
    plain, _ = distill_loss(student, teacher, sampled, mask, top_k=4)
    weighted, stats = distill_loss(student, teacher, sampled, mask, top_k=4, old_logp=sampled_logp + math.log(2))
    assert weighted.item() == pytest.approx(0.5 * plain.item(), rel=1e-5)
    assert stats["importance_weight"] == pytest.approx(0.5, rel=1e-5)


def test_sequence_then_batch_mean_hand_worked():
    per_token = torch.tensor([[1.0, 2.0, 3.0, 100.0], [10.0, 7.0, 7.0, 7.0], [5.0, 5.0, 5.0, 5.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    # sequence means 2 and 10; the empty third sequence is skipped -> 6 (token mean would be 4)
    assert masked_mean_per_sequence_then_batch(per_token, mask).item() == 6.0
    assert masked_token_mean(per_token, mask).item() == 4.0


# ---- EPIC and SFT --------------------------------------------------------------------------
def test_token_ce_matches_torch_cross_entropy():
    g = torch.Generator().manual_seed(12)
    logits = torch.randn(2, 5, 13, generator=g)
    labels = torch.randint(0, 13, (2, 5), generator=g)
    mask = torch.tensor([[0, 1, 1, 1, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)
    ref = F.cross_entropy(logits.reshape(-1, 13), labels.masked_fill(~mask, -100).reshape(-1), ignore_index=-100)
    assert token_ce(logits, labels.masked_fill(~mask, -100), mask).item() == pytest.approx(ref.item(), rel=1e-6)


def test_epic_loss_matches_written_out_formula():
    g = torch.Generator().manual_seed(13)
    s, t = torch.randn(2, 4, 9, generator=g), torch.randn(2, 4, 9, generator=g)
    labels = torch.randint(0, 9, (2, 4), generator=g)
    mask = torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    a, tau = 0.3, 2.0
    kl_sum, ce_sum, n = 0.0, 0.0, 0
    for b in range(2):
        for i in range(4):
            if not mask[b, i]:
                continue
            ps = torch.softmax(s[b, i].double() / tau, -1)
            pt = torch.softmax(t[b, i].double() / tau, -1)
            kl_sum += float((pt * (pt / ps).log()).sum())
            ce_sum += -math.log(float(torch.softmax(s[b, i].double(), -1)[labels[b, i]]))
            n += 1
    ref = a * tau**2 * kl_sum / n + (1 - a) * ce_sum / n
    assert epic_loss(s, t, labels, mask, alpha=a, tau=tau).item() == pytest.approx(ref, rel=1e-5)


def test_bf16_logits_are_upcast_and_match_fp32():
    student, teacher, sampled = _batch(seed=14)
    mask = torch.ones(B, T, dtype=torch.bool)
    s16 = student.detach().bfloat16().requires_grad_(True)
    t16 = teacher.bfloat16()
    loss16, _ = distill_loss(s16, t16, sampled, mask, top_k=5, chunk=8)
    loss32, _ = distill_loss(s16.detach().float(), t16.float(), sampled, mask, top_k=5, chunk=8)
    assert loss16.dtype == torch.float32
    assert loss16.item() == pytest.approx(loss32.item(), rel=1e-5)
    loss16.backward()
    assert s16.grad.dtype == torch.bfloat16 and torch.isfinite(s16.grad.float()).all()


def test_the_divergence_registry_is_the_objectives() -> None:
    from ltopd.train.losses import DIVERGENCES, OBJECTIVES

    assert tuple(DIVERGENCES) == OBJECTIVES
