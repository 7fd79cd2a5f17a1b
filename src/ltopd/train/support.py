"""Top-K vocabulary support with one tail bucket (the LT-OPD distillation support).

Per response position the support is: student top-K, teacher top-K, the sampled token
(2K + 1 slots, duplicates masked, first occurrence kept). Log-probabilities on it are
normalised over the FULL vocabulary; the normaliser is a logsumexp taken in column chunks
so that no (B, T, V) float32 temporary is created besides the gradient of the logits.
The mass outside the support is one extra "tail" bucket per distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

DEFAULT_CHUNK = 4096


@dataclass(frozen=True)
class Support:
    """Support buckets of one batch; every tensor is (B, T, ...) with S = 2K + 1 slots.

    student_logp / teacher_logp: (B, T, S + 1) (>= float32), last slot is the tail bucket;
        masked (duplicate) slots hold -inf, so exp() over a row sums to 1.
    slot_mask: (B, T, S + 1) bool, True for kept slots (the tail slot is always True).
    support_ids: (B, T, S) vocabulary ids of the slots (duplicates included).
    sampled_logp: (B, T) (>= float32) student log-prob of the sampled token (carries gradient).
    """

    student_logp: Tensor
    teacher_logp: Tensor
    slot_mask: Tensor
    support_ids: Tensor
    sampled_logp: Tensor


def _compute_dtype(x: Tensor) -> torch.dtype:
    # bf16/fp16 logits are upcast chunk by chunk; float64 stays float64.
    return torch.promote_types(x.dtype, torch.float32)


@torch.no_grad()
def chunked_logsumexp(x: Tensor, chunk: int = DEFAULT_CHUNK) -> Tensor:
    """logsumexp over the last dim in >= float32, reading `chunk` columns at a time (no grad)."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    dtype = _compute_dtype(x)
    parts = [
        torch.logsumexp(x[..., start : start + chunk].to(dtype), dim=-1)
        for start in range(0, x.shape[-1], chunk)
    ]
    return torch.logsumexp(torch.stack(parts, dim=-1), dim=-1)


class _GatherLogProbs(torch.autograd.Function):
    """logits.gather(ids) - logsumexp(logits), with a chunked, single-buffer backward.

    Plain autograd through sliced chunks would allocate a full (B, T, V) zero tensor per
    chunk in backward; here the gradient of the logits is written once, chunk by chunk:
    d/dlogits = scatter(g) - sum(g) * softmax(logits).
    """

    @staticmethod
    def forward(ctx: Any, logits: Tensor, ids: Tensor, chunk: int) -> Tensor:  # type: ignore[override]
        lse = chunked_logsumexp(logits, chunk)
        ctx.save_for_backward(logits, ids, lse)
        ctx.chunk = chunk
        return logits.gather(-1, ids).to(lse.dtype) - lse.unsqueeze(-1)

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        logits, ids, lse = ctx.saved_tensors
        grad_sum = grad_out.sum(-1, keepdim=True)
        lse = lse.unsqueeze(-1)
        grad = torch.empty_like(logits)
        for start in range(0, logits.shape[-1], ctx.chunk):
            cols = slice(start, start + ctx.chunk)
            probs = torch.exp(logits[..., cols].to(lse.dtype) - lse)
            grad[..., cols] = (probs * -grad_sum).to(grad.dtype)
        grad.scatter_add_(-1, ids, grad_out.to(grad.dtype))
        return grad, None, None


def gather_logprobs(logits: Tensor, ids: Tensor, chunk: int = DEFAULT_CHUNK) -> Tensor:
    """Log-probs (>= float32) of `ids` (B, T, S) under `logits` (B, T, V), normalised over
    the full vocabulary."""
    return _GatherLogProbs.apply(logits, ids, chunk)


def first_occurrence_mask(ids: Tensor) -> Tensor:
    """True where ids[..., j] does not appear earlier in its row."""
    sorted_ids, order = torch.sort(ids, dim=-1, stable=True)  # stable: earlier slot first
    repeat = torch.zeros_like(sorted_ids, dtype=torch.bool)
    repeat[..., 1:] = sorted_ids[..., 1:] == sorted_ids[..., :-1]
    return torch.ones_like(repeat).scatter(-1, order, ~repeat)


def tail_logprob(support_logp: Tensor, slot_mask: Tensor) -> Tensor:
    """log(1 - sum_support p) = log(-expm1(lse)); the lse is clamped just below 0.

    The clamp keeps the tail finite when the support holds (numerically) all the mass,
    e.g. K >= V: the tail then carries about float32 eps of probability.
    """
    lse = torch.logsumexp(support_logp.masked_fill(~slot_mask, float("-inf")), dim=-1)
    lse = lse.clamp(max=-torch.finfo(lse.dtype).eps)
    return torch.log(-torch.expm1(lse))


def build_support(
    student_logits: Tensor,
    teacher_logits: Tensor,
    sampled_ids: Tensor,
    top_k: int = 100,
    chunk: int = DEFAULT_CHUNK,
) -> Support:
    """Build the 2K + 1 slot support plus tail for every position.

    Gradients reach `student_logits` only; the teacher is detached. Sampled ids outside
    [0, V) (e.g. -100 at padding) are replaced by 0: those positions must be masked out of
    the loss by the caller.
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(f"logit shapes differ: {student_logits.shape} vs {teacher_logits.shape}")
    if sampled_ids.shape != student_logits.shape[:-1]:
        raise ValueError(f"sampled_ids {sampled_ids.shape} must be logits.shape[:-1]")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    vocab = student_logits.shape[-1]
    k = min(top_k, vocab)
    teacher_logits = teacher_logits.detach()
    sampled = sampled_ids.long()
    sampled = torch.where((sampled >= 0) & (sampled < vocab), sampled, torch.zeros_like(sampled))
    with torch.no_grad():
        ids = torch.cat(
            [
                student_logits.detach().topk(k, dim=-1).indices,
                teacher_logits.topk(k, dim=-1).indices,
                sampled.unsqueeze(-1),
            ],
            dim=-1,
        )
        keep = first_occurrence_mask(ids)

    student_raw = gather_logprobs(student_logits, ids, chunk)
    with torch.no_grad():
        teacher_raw = gather_logprobs(teacher_logits, ids, chunk)
    student_sup = student_raw.masked_fill(~keep, float("-inf"))
    teacher_sup = teacher_raw.masked_fill(~keep, float("-inf"))
    tail_mask = torch.ones_like(keep[..., :1])
    return Support(
        student_logp=torch.cat([student_sup, tail_logprob(student_raw, keep).unsqueeze(-1)], -1),
        teacher_logp=torch.cat([teacher_sup, tail_logprob(teacher_raw, keep).unsqueeze(-1)], -1),
        slot_mask=torch.cat([keep, tail_mask], dim=-1),
        support_ids=ids,
        sampled_logp=student_raw[..., -1],
    )
