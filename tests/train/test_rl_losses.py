"""RL baseline losses: hand-worked values and gradient directions."""

from __future__ import annotations

import math

import pytest
import torch

from ltopd.train.rl_losses import (
    clipped_policy_loss,
    dapo_loss,
    dynamic_sampling_keep,
    grpo_advantages,
    grpo_loss,
    gspo_loss,
    gspo_sequence_log_ratio,
    gspo_token_ratio,
    overlong_penalty,
)


def test_grpo_advantage_hand_worked_and_constant_group_zero():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.7, 0.7, 0.7, 0.7]])
    adv = grpo_advantages(rewards)
    # mean 0.25, sample std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5
    expected = torch.tensor([0.75, -0.25, -0.25, -0.25]) / (0.5 + 1e-6)
    torch.testing.assert_close(adv[0], expected)
    assert (adv[1] == 0).all()
    with pytest.raises(ValueError):
        grpo_advantages(torch.tensor([[1.0], [0.0]]))


def _loss_and_grad(ratio: float, adv: float, **kwargs) -> tuple[float, float]:
    logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    loss = clipped_policy_loss(logp, torch.zeros(1, 1), torch.tensor([adv]), **kwargs)
    loss.sum().backward()
    return loss.item(), logp.grad.item()


def test_clipping_zeroes_gradient_only_on_the_clipped_side():
    # A > 0: pushing the ratio above 1 + eps gains nothing more; below 1 - eps still pulls up
    loss, grad = _loss_and_grad(1.5, 1.0)
    assert loss == pytest.approx(-1.2) and grad == 0.0
    loss, grad = _loss_and_grad(0.5, 1.0)
    assert loss == pytest.approx(-0.5) and grad == pytest.approx(-0.5)
    # A < 0: below 1 - eps is clipped, above 1 + eps still pushes down
    loss, grad = _loss_and_grad(0.5, -1.0)
    assert loss == pytest.approx(0.8) and grad == 0.0
    loss, grad = _loss_and_grad(1.5, -1.0)
    assert loss == pytest.approx(1.5) and grad == pytest.approx(1.5)


def test_dapo_clip_higher_is_asymmetric():
    _, grad_sym = _loss_and_grad(1.25, 1.0, clip_low=0.2, clip_high=0.2)
    _, grad_dapo = _loss_and_grad(1.25, 1.0, clip_low=0.2, clip_high=0.28)
    assert grad_sym == 0.0 and grad_dapo == pytest.approx(-1.25)
    _, grad_low = _loss_and_grad(0.75, -1.0, clip_low=0.2, clip_high=0.28)
    assert grad_low == 0.0


def test_dual_clip_caps_loss_for_negative_advantage():
    loss, grad = _loss_and_grad(10.0, -2.0, dual_clip=3.0)
    assert loss == pytest.approx(6.0) and grad == 0.0
    loss, _ = _loss_and_grad(10.0, -2.0, dual_clip=None)
    assert loss == pytest.approx(20.0)
    loss, grad = _loss_and_grad(2.0, -2.0, dual_clip=3.0)  # below the cap: unchanged
    assert loss == pytest.approx(4.0) and grad == pytest.approx(4.0)
    loss, _ = _loss_and_grad(10.0, 2.0, dual_clip=3.0)  # positive advantage: not affected
    assert loss == pytest.approx(-2.4)


def test_gspo_sequence_ratio_is_geometric_mean_of_token_ratios():
    g = torch.Generator().manual_seed(0)
    logp = (torch.randn(3, 5, generator=g) * 0.3).requires_grad_(True)
    old = torch.randn(3, 5, generator=g) * 0.3
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [0, 1, 1, 1, 0]], dtype=torch.bool)
    token_ratios = (logp - old).exp().detach()
    for b in range(3):
        r = token_ratios[b][mask[b]]
        geo = math.prod(r.tolist()) ** (1 / len(r))
        assert gspo_sequence_log_ratio(logp, old, mask)[b].exp().item() == pytest.approx(geo, rel=1e-6)
    ratio = gspo_token_ratio(logp, old, mask)
    s = gspo_sequence_log_ratio(logp, old, mask).exp().detach()
    torch.testing.assert_close(ratio.detach(), s.unsqueeze(-1).expand(3, 5))
    ratio[0, 2].backward()  # d/dlogp of sg[s] pi / sg[pi] is s on its own token only
    expected = torch.zeros(3, 5)
    expected[0, 2] = s[0]
    torch.testing.assert_close(logp.grad, expected)


def test_gspo_clips_per_sequence():
    # sequence 0 ratio exp(0.01) is outside (1 - 3e-4, 1 + 4e-4) with A > 0: no gradient;
    # sequence 1 ratio 1 is inside: gradient -A / len per token
    logp = torch.zeros(2, 2, requires_grad=True)
    old = torch.tensor([[-0.01, -0.01], [0.0, 0.0]])
    loss = gspo_loss(logp, old, torch.tensor([1.0, 1.0]), torch.ones(2, 2, dtype=torch.bool))
    loss.backward()
    assert loss.item() == pytest.approx(-(1 + 4e-4 + 1.0) / 2)
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 0.0], [-0.25, -0.25]]))


def test_token_mean_versus_sequence_mean_hand_worked():
    # ratio 1 everywhere -> per-token loss = -A. Sequence 0: one token, A = 2;
    # sequence 1: three tokens, A = -1; last column is padding.
    logp = torch.zeros(2, 4)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    adv = torch.tensor([2.0, -1.0])
    assert dapo_loss(logp, logp, adv, mask).item() == pytest.approx((-2 + 3 * 1) / 4)  # 0.25
    assert grpo_loss(logp, logp, adv, mask).item() == pytest.approx((-2 + 1) / 2)  # -0.5


def test_overlong_penalty_piecewise():
    lengths = torch.tensor([50, 80, 90, 100, 120])
    torch.testing.assert_close(
        overlong_penalty(lengths, max_len=100, cache_len=20), torch.tensor([0.0, 0.0, -0.5, -1.0, -1.0])
    )


def test_dynamic_sampling_drops_constant_groups():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert dynamic_sampling_keep(rewards).tolist() == [False, True, False]


def test_the_policy_loss_registry_covers_every_rl_method() -> None:
    from ltopd.train import methods
    from ltopd.train.rl import POLICY_LOSS_SPECS, RLParams

    assert set(POLICY_LOSS_SPECS) == set(methods.POLICY_LOSSES)
    p = RLParams()
    assert POLICY_LOSS_SPECS["grpo"].clip_range(p) == (p.clip, p.clip)
    assert [n for n, spec in POLICY_LOSS_SPECS.items() if spec.token_mean or spec.dynamic_sampling] == ["dapo"]
