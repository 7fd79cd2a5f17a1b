"""Distillation and supervised losses as pure functions.

Divergences take log-probabilities over a set of buckets (the last dim) plus a bucket mask,
and return one value per token. Aggregation is a separate step. Mixture convention
(TRL GKD's beta): alpha = 0 is forward KL(T || S), alpha = 1 is reverse KL(S || T).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ltopd.train.methods import OBJECTIVES  # the registry below, by name (tests: equal)
from ltopd.train.support import DEFAULT_CHUNK, build_support

LOG_RATIO_CLAMP = 20.0
IMPORTANCE_CAP = 2.0


def _zero_masked(logp: Tensor, mask: Tensor) -> Tensor:
    # Masked buckets may hold -inf; replace them before any arithmetic so that neither the
    # value nor the gradient can become NaN (0 * inf), then zero their terms afterwards.
    return torch.where(mask, logp, torch.zeros_like(logp))


def _kl_terms(logp: Tensor, logq: Tensor, mask: Tensor) -> Tensor:
    """sum over valid buckets of p (log p - log q)."""
    logp, logq = _zero_masked(logp, mask), _zero_masked(logq, mask)
    terms = torch.exp(logp) * (logp - logq)
    return torch.where(mask, terms, torch.zeros_like(terms)).sum(-1)


def forward_kl(student_logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """KL(T || S) per token."""
    return _kl_terms(teacher_logp, student_logp, mask)


def reverse_kl(student_logp: Tensor, teacher_logp: Tensor, mask: Tensor) -> Tensor:
    """KL(S || T) per token."""
    return _kl_terms(student_logp, teacher_logp, mask)


def generalized_jsd(
    student_logp: Tensor, teacher_logp: Tensor, mask: Tensor, alpha: float = 0.5
) -> Tensor:
    """(1 - a) KL(S || M) + a KL(T || M), M = (1 - a) S + a T, per token.

    The endpoints are returned as the plain KLs (the mixture formula would need log 0).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if alpha == 0.0:
        return forward_kl(student_logp, teacher_logp, mask)
    if alpha == 1.0:
        return reverse_kl(student_logp, teacher_logp, mask)
    s, t = _zero_masked(student_logp, mask), _zero_masked(teacher_logp, mask)
    log_m = torch.logsumexp(
        torch.stack([s + math.log(1.0 - alpha), t + math.log(alpha)], dim=0), dim=0
    )
    return (1.0 - alpha) * _kl_terms(s, log_m, mask) + alpha * _kl_terms(t, log_m, mask)


def importance_weight(logp: Tensor, old_logp: Tensor) -> Tensor:
    """Detached exp(clamp(log pi - log pi_old, -20, 20)), capped at 2.0."""
    log_ratio = (logp.detach() - old_logp.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(log_ratio).clamp(max=IMPORTANCE_CAP)


def masked_mean_per_sequence_then_batch(per_token: Tensor, mask: Tensor) -> Tensor:
    """Mean over valid tokens of each sequence, then over sequences with >= 1 valid token.

    per_token and mask are (B, T). An all-masked batch gives 0.0 that still carries a
    (zero) gradient, never NaN.
    """
    mask = mask.bool()
    values = torch.where(mask, per_token, torch.zeros_like(per_token))
    counts = mask.sum(-1)
    per_seq = values.sum(-1) / counts.clamp(min=1)
    has_tokens = counts > 0
    return (per_seq * has_tokens).sum() / has_tokens.sum().clamp(min=1)


def masked_token_mean(per_token: Tensor, mask: Tensor) -> Tensor:
    """Mean over all valid tokens of the batch; 0.0 (with grad) if there are none."""
    mask = mask.bool()
    values = torch.where(mask, per_token, torch.zeros_like(per_token))
    return values.sum() / mask.sum().clamp(min=1)


def token_ce(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """Token-mean cross-entropy; logits[b, t] predicts labels[b, t] (already shifted)."""
    mask = mask.bool()
    safe = torch.where(mask, labels.long(), torch.zeros_like(labels, dtype=torch.long))
    nll = -F.log_softmax(logits.float(), dim=-1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    return masked_token_mean(nll, mask)


def epic_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    labels: Tensor,
    answer_mask: Tensor,
    alpha: float = 0.5,
    tau: float = 2.0,
) -> Tensor:
    """EPIC: alpha * tau^2 * KL(T^tau || S^tau) + (1 - alpha) * CE, token-means over answer tokens.

    Full vocabulary; the teacher is detached; T^tau = softmax(teacher_logits / tau).
    """
    s = F.log_softmax(student_logits.float() / tau, dim=-1)
    t = F.log_softmax(teacher_logits.detach().float() / tau, dim=-1)
    kl = (t.exp() * (t - s)).sum(-1)
    distill = masked_token_mean(kl, answer_mask)
    return alpha * tau**2 * distill + (1.0 - alpha) * token_ce(student_logits, labels, answer_mask)


# objective -> per-token divergence on the support: (student_logp, teacher_logp, slot_mask, alpha)
DIVERGENCES: dict[str, Callable[[Tensor, Tensor, Tensor, float], Tensor]] = {
    "jsd": generalized_jsd,
    "forward_kl": lambda student, teacher, slots, _alpha: forward_kl(student, teacher, slots),
    "reverse_kl": lambda student, teacher, slots, _alpha: reverse_kl(student, teacher, slots),
}


def distill_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    sampled_ids: Tensor,
    mask: Tensor,
    objective: str = "jsd",
    top_k: int = 100,
    alpha: float = 0.5,
    chunk: int = DEFAULT_CHUNK,
    old_logp: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """LT-OPD loss on the top-K support: divergence per response token, optionally times
    the detached importance weight, mean per sequence then over sequences.

    logits (B, T, V) where position t predicts sampled_ids[:, t]; mask (B, T) marks valid
    response tokens (prompt and padding False). old_logp (B, T): rollout log-probs of the
    sampled tokens. Returns (loss, stats); stats are means over valid tokens (0.0 if none).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    mask = mask.bool()
    vocab = student_logits.shape[-1]
    bad = mask & ((sampled_ids < 0) | (sampled_ids >= vocab))
    if bool(bad.any()):
        raise ValueError("sampled_ids out of vocabulary range at valid (masked-in) positions")
    sup = build_support(student_logits, teacher_logits, sampled_ids, top_k=top_k, chunk=chunk)
    per_token = DIVERGENCES[objective](sup.student_logp, sup.teacher_logp, sup.slot_mask, alpha)
    stats: dict[str, float] = {}
    if old_logp is not None:
        weight = importance_weight(sup.sampled_logp, old_logp)
        per_token = per_token * weight
        stats["importance_weight"] = _stat(weight, mask)
    loss = masked_mean_per_sequence_then_batch(per_token, mask)
    stats["tail_mass_student"] = _stat(sup.student_logp[..., -1].exp(), mask)
    stats["tail_mass_teacher"] = _stat(sup.teacher_logp[..., -1].exp(), mask)
    stats["support_size"] = _stat(sup.slot_mask[..., :-1].sum(-1).float(), mask)
    return loss, stats


def _stat(values: Tensor, mask: Tensor) -> float:
    return float(masked_token_mean(values.detach().float(), mask))
