"""Policy-gradient losses for the RL baselines (GRPO, GSPO, DAPO) as pure functions.

Shapes: logp / old_logp / mask are (B, T) log-probs of the sampled tokens (mask marks
response tokens); advantages are (B,) per sequence or (B, T) per token. No KL term.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ltopd.train.losses import masked_mean_per_sequence_then_batch, masked_token_mean

LOG_RATIO_CLAMP = 20.0
ADV_EPS = 1e-6


def grpo_advantages(rewards: Tensor, eps: float = ADV_EPS) -> Tensor:
    """(r - mean_group) / (std_group + eps) for rewards grouped as (G groups, n rollouts).

    std is the sample standard deviation (Bessel, n - 1): torch.std's default, which the
    GRPO reference implementations (verl, TRL) call. A group whose rewards are all equal
    gets advantage 0 exactly.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (groups, n >= 2), got {tuple(rewards.shape)}")
    rewards = rewards.float()
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, correction=1)
    return (rewards - mean) / (std + eps)


def _per_token(advantages: Tensor, like: Tensor) -> Tensor:
    return advantages.unsqueeze(-1).expand_as(like) if advantages.dim() == 1 else advantages


def clipped_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
) -> Tensor:
    """Per-token PPO loss max(-A r, -A clip(r, 1 - lo, 1 + hi)), r = pi / pi_old.

    Dual clip: for A < 0 the loss is additionally capped at -A * dual_clip, so a huge ratio
    on a bad token cannot produce an unbounded update.
    """
    adv = _per_token(advantages, logp)
    ratio = torch.exp((logp - old_logp.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    loss = torch.maximum(-adv * ratio, -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high))
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * dual_clip), loss)
    return loss


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip: float = 0.2,
    dual_clip: float | None = 3.0,
) -> Tensor:
    """GRPO: clipped ratio loss (dual clip 3.0), mean per sequence then over sequences
    (the 1/G sum_i 1/|o_i| sum_t form of the GRPO objective)."""
    per_token = clipped_policy_loss(logp, old_logp, advantages, clip, clip, dual_clip)
    return masked_mean_per_sequence_then_batch(per_token, mask)


def gspo_sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """log s_i = mean over valid tokens of (log pi - log pi_old); (B,). 0 for empty rows."""
    mask = mask.bool()
    diff = torch.where(mask, logp - old_logp.detach(), torch.zeros_like(logp))
    return diff.sum(-1) / mask.sum(-1).clamp(min=1)


def gspo_token_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO-token ratio sg[s_i] * pi / sg[pi]: value s_i, gradient s_i * grad log pi."""
    log_s = gspo_sequence_log_ratio(logp, old_logp, mask).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(log_s.detach().unsqueeze(-1) + logp - logp.detach())


def gspo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
) -> Tensor:
    """GSPO: sequence-level ratio clipped per sequence, mean per sequence then over sequences.

    The clip range defaults to the GSPO paper's (3e-4, 4e-4): sequence ratios are
    geometric means and stay much closer to 1 than token ratios.
    """
    ratio = gspo_token_ratio(logp, old_logp, mask)
    adv = _per_token(advantages, logp)
    per_token = torch.maximum(-adv * ratio, -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high))
    return masked_mean_per_sequence_then_batch(per_token, mask)


def dapo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    dual_clip: float | None = 3.0,
) -> Tensor:
    """DAPO: decoupled clip (0.2 / 0.28), token-mean over all valid tokens of the batch
    (long answers weigh by their length). The dual clip is kept as in verl's default."""
    per_token = clipped_policy_loss(logp, old_logp, advantages, clip_low, clip_high, dual_clip)
    return masked_token_mean(per_token, mask)


def overlong_penalty(lengths: Tensor, max_len: int, cache_len: int) -> Tensor:
    """DAPO soft overlong punishment added to the reward, per response length L:
    0 if L <= max_len - cache_len; (max_len - cache_len - L) / cache_len inside the
    cache window (linear from 0 to -1); -1 beyond max_len."""
    if not 0 < cache_len <= max_len:
        raise ValueError(f"need 0 < cache_len <= max_len, got {cache_len}, {max_len}")
    free = max_len - cache_len
    lengths = lengths.float()
    ramp = (free - lengths) / cache_len
    beyond = torch.where(lengths <= max_len, ramp, torch.full_like(lengths, -1.0))
    return torch.where(lengths <= free, torch.zeros_like(lengths), beyond)


def dynamic_sampling_keep(rewards: Tensor) -> Tensor:
    """DAPO dynamic sampling: True for groups (rows of (G, n) rewards) whose rewards are
    not all equal; the caller drops the others and refills the batch."""
    return rewards.amax(dim=1) != rewards.amin(dim=1)
