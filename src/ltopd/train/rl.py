"""GRPO, GSPO and DAPO (Table 6) on the rollout and scoring core LT-OPD uses.

The student samples ``rollouts`` responses per question at its budget (the same rollout() as
LT-OPD), each response is rewarded for correctness against the reference answer, advantages
are normalised within each question's group, and the policy loss is the method's pure function
(ltopd.train.rl_losses). One policy update per rollout batch: pi_old is the sampling policy
itself, so every ratio is 1 at the update (its gradient is the plain policy gradient) and the
clip ranges bound the ratio only when a batch is reused -- as in TRL's default single iteration.
No KL term (none of the three uses one here; implementation-facts.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.hook import Selection
from ltopd.sections import from_section
from ltopd.train import rl_losses
from ltopd.train.features import ImageFeatures
from ltopd.train.methods import MethodSpec
from ltopd.train.response_logits import encode_responses, response_logits
from ltopd.train.reward import correctness_reward
from ltopd.train.rollout import concat, rollout, rows_of
from ltopd.train.trainer import Records, StepLoss, TrainConfig, Trainer, step_seed

Responses = Sequence[Sequence[int]]  # sampled token ids per row


@dataclass(frozen=True)
class RLParams:
    """The profile's ``rl`` section."""

    clip: float = 0.2  # GRPO, both sides
    dual_clip: float = 3.0  # GRPO and DAPO, negative advantages
    gspo_clip: tuple[float, float] = (3e-4, 4e-4)  # GSPO's sequence-ratio range (low, high)
    dapo_clip: tuple[float, float] = (0.2, 0.28)  # DAPO's clip-higher (low, high)
    overlong_cache: int = 4  # DAPO: the soft-penalty window (tokens) before max_new_tokens
    resample_rounds: int = 2  # DAPO: re-roll all-equal groups this many times before dropping them
    mini_batches: int = 2  # optimiser steps per rollout batch (1: pi_old = pi, every ratio 1)

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> RLParams:
        s = section or {}
        return from_section(cls, "rl", s, **{k: (float(s[k][0]), float(s[k][1])) for k in ("gspo_clip", "dapo_clip")
                                              if k in s})


@dataclass
class Group:
    """One question's rollouts: G copies of the record, G responses, their selection, rewards."""

    records: list[Mapping[str, Any]]
    responses: list[list[int]]
    selection: Selection
    correct: torch.Tensor  # (G,) 0/1


@dataclass(frozen=True)
class PolicyLoss:
    """What tells GRPO, GSPO and DAPO apart (the rest of the trainer is shared): the loss (pure,
    ltopd.train.rl_losses), its clip range, and DAPO's three changes."""

    loss: Callable[[RLParams, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    clip_range: Callable[[RLParams], tuple[float, float]]
    token_mean: bool = False  # mean over every token of the mini-batch (else per sequence, then over sequences)
    dynamic_sampling: bool = False  # re-roll groups whose answers all agree, then drop those still uniform
    overlong_penalty: bool = False  # the soft penalty on answers cut off at the length cap


# Keyed by ltopd.train.methods.POLICY_LOSSES, the names (tests/train/test_rl_losses.py keeps them equal).
POLICY_LOSS_SPECS: dict[str, PolicyLoss] = {
    "grpo": PolicyLoss(
        lambda p, logp, old, adv, mask: rl_losses.grpo_loss(logp, old, adv, mask, clip=p.clip, dual_clip=p.dual_clip),
        lambda p: (p.clip, p.clip)),
    "gspo": PolicyLoss(
        lambda p, logp, old, adv, mask: rl_losses.gspo_loss(logp, old, adv, mask, *p.gspo_clip),
        lambda p: p.gspo_clip),
    "dapo": PolicyLoss(
        lambda p, logp, old, adv, mask: rl_losses.dapo_loss(logp, old, adv, mask, *p.dapo_clip,
                                                            dual_clip=p.dual_clip),
        lambda p: p.dapo_clip, token_mean=True, dynamic_sampling=True, overlong_penalty=True),
}


def policy_loss(name: str, p: RLParams, logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
    return POLICY_LOSS_SPECS[name].loss(p, logp, old_logp, adv, mask)


class RLTrainer(Trainer):
    def __init__(self, student: Backbone, method: MethodSpec, cfg: TrainConfig, total_steps: int) -> None:
        super().__init__(student, method, cfg, total_steps)
        self.rl = RLParams.from_section(cfg.method_params)

    def _groups(self, records: Sequence[Mapping[str, Any]], ratio: float, seed: int,
                features: ImageFeatures | None = None) -> list[Group]:
        cfg, n = self.cfg, self.cfg.rollouts
        ro = rollout(self.student, records, n, ratio, cfg.selector, cfg.floor, cfg.max_new_tokens, seed,
                     temperature=cfg.temperature, decode_batch=cfg.decode_batch, features=features)
        text = self.student.tokenizer.batch_decode(ro.responses, skip_special_tokens=False)
        out = []
        for q in range(len(records)):
            rows = slice(q * n, (q + 1) * n)
            correct = torch.tensor([correctness_reward(r, t) for r, t in zip(ro.records[rows], text[rows])])
            out.append(Group(ro.records[rows], ro.responses[rows], rows_of(ro.selection, ro.records, rows), correct))
        return out

    def _rewards(self, groups: Sequence[Group]) -> torch.Tensor:
        """(Q, G) rewards: correctness, plus DAPO's soft overlong penalty."""
        rewards = torch.stack([g.correct for g in groups]).float()
        if POLICY_LOSS_SPECS[self.method.policy_loss].overlong_penalty:
            # lengths without the stop token: only a cut-off answer reaches the cap
            stop = set(self.student.stop_token_ids())
            lengths = torch.tensor([[len(r) - (r[-1] in stop) for r in g.responses] for g in groups])
            rewards = rewards + rl_losses.overlong_penalty(lengths, self.cfg.max_new_tokens, self.rl.overlong_cache)
        return rewards

    def step_loss(self, records: Records, ratio: float, step: int) -> StepLoss:
        cfg, name, acc = self.cfg, self.method.policy_loss, self.accelerator
        seed = step_seed(cfg.seed, step) + acc.process_index
        t0 = time.perf_counter()
        records = list(records)
        # pi_old's features of the distinct images, once: the rollouts and the old log-probs read
        # them (the mini-batches after the first step see a moved tower and run their own)
        with torch.no_grad():
            features = ImageFeatures.of(self.student, records) if cfg.share_features else None
        position = {id(r): i for i, r in enumerate(records)}  # rollout rows are the records themselves
        groups = self._groups(records, ratio, seed, features)
        reward_mean = float(torch.stack([g.correct for g in groups]).float().mean())
        resampled, spare = 0, groups[0]
        if POLICY_LOSS_SPECS[name].dynamic_sampling:  # re-roll groups whose answers all agree, then drop them
            for round_ in range(1, self.rl.resample_rounds + 1):
                flat = [i for i, g in enumerate(groups) if g.correct.min() == g.correct.max()]
                if not flat:
                    break
                again = self._groups([groups[i].records[0] for i in flat], ratio, seed + 104_729 * round_,
                                     features and features.subset([position[id(groups[i].records[0])] for i in flat]))
                for i, g in zip(flat, again):
                    groups[i] = g
                resampled += len(flat)
            keep = rl_losses.dynamic_sampling_keep(torch.stack([g.correct for g in groups]))
            groups = [g for g, k in zip(groups, keep.tolist()) if k]
        t1 = time.perf_counter()
        metrics = {"reward_mean": reward_mean, "groups_kept": float(len(groups)), "groups_resampled": float(resampled),
                   "rollout_s": t1 - t0}
        if groups:
            adv = rl_losses.grpo_advantages(self._rewards(groups)).reshape(-1)
        elif acc.num_processes == 1:  # every group uniform: no learning signal, no update
            return torch.tensor(0.0), {**metrics, "mean_response_len": 0.0, "student_s": 0.0}
        else:  # ... but the other processes may update: zero-weight passes keep the collectives in step
            groups, adv = [spare], torch.zeros(len(spare.records))
        recs = [r for g in groups for r in g.records]
        responses = [r for g in groups for r in g.responses]
        selection = concat([g.selection for g in groups])
        old = self._old_logp(recs, responses, selection, features, [position[id(r)] for r in recs])
        # One optimiser step per mini-batch (the last one is the loop's own step): from the second
        # on, pi has moved away from the sampling policy, so the ratios and the clips act.
        size = -(-len(recs) // self.rl.mini_batches)
        parts = [slice(lo, min(lo + size, len(recs))) for lo in range(0, len(recs), size)]
        parts += [slice(0, 0)] * (self.rl.mini_batches - len(parts))  # fewer rows than mini-batches
        total, clipped = 0.0, []
        for i, mb in enumerate(parts):
            if i:
                self.sync_gradients()
                acc.clip_grad_norm_(self.params, cfg.grad_clip)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
            loss, frac = self._backward(recs, responses, selection, old, adv, mb,
                                        scale=float(bool(metrics["groups_kept"])))
            total += loss / len(parts)
            clipped.append(frac)
        metrics.update(mean_response_len=sum(map(len, responses)) / len(responses),
                       adv_abs_mean=float(adv.abs().mean()), clipped_frac=sum(clipped) / len(clipped),
                       student_s=time.perf_counter() - t1)
        return torch.tensor(total), metrics

    @torch.no_grad()
    def _old_logp(self, recs: Records, responses: Responses, selection: Selection,
                  features: ImageFeatures | None = None, record_of: Sequence[int] = ()) -> list[torch.Tensor]:
        """log pi_old of each row's sampled tokens (the sampling policy, before any step);
        row j reads the features of record ``record_of[j]`` when ``features`` are given."""
        out = []
        for part in self._microbatches(slice(0, len(recs))):
            feats = None if features is None else features.rows(record_of[part])
            logp, mask = self._logp(recs, responses, selection, part, feats)
            out += [row[m] for row, m in zip(logp, mask)]
        return out

    def _microbatches(self, rows: slice) -> list[slice]:
        size = self.cfg.student_microbatch or max(rows.stop - rows.start, 1)
        return [slice(lo, min(lo + size, rows.stop)) for lo in range(rows.start, rows.stop, size)]

    def _logp(self, recs: Records, responses: Responses, selection: Selection, part: slice,
              features: Sequence[torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        batch, width = encode_responses(self.student, recs[part], responses[part])
        scored = response_logits(self.student, batch, width, rows_of(selection, recs, part), features)
        logp = torch.log_softmax(scored.logits.float(), -1).gather(-1, scored.ids.unsqueeze(-1)).squeeze(-1)
        return logp, scored.mask

    def _backward(self, recs: Records, responses: Responses, selection: Selection, old: list[torch.Tensor],
                  adv: torch.Tensor, mb: slice, scale: float) -> tuple[float, float]:
        """Backpropagate mini-batch ``mb`` by microbatches; (its loss, share of clipped tokens).
        DAPO means over every token of the mini-batch, GRPO and GSPO over its sequences. An empty
        mini-batch runs one zero-weight row, so every process does the same passes."""
        if mb.stop <= mb.start:
            mb, scale = slice(0, 1), 0.0
        name, lengths = self.method.policy_loss, [len(r) for r in responses]
        rows, tokens = mb.stop - mb.start, sum(lengths[mb])
        lo, hi = self._clip_range()
        total, clipped, counted = 0.0, 0.0, 0
        for part in self._microbatches(mb):
            logp, mask = self._logp(recs, responses, selection, part)
            old_part = torch.zeros_like(logp)
            for j in range(logp.shape[0]):
                old_part[j, mask[j]] = old[part.start + j].to(logp.device)
            loss = policy_loss(name, self.rl, logp, old_part, adv[part].to(logp.device), mask)
            token_mean = POLICY_LOSS_SPECS[name].token_mean
            weight = sum(lengths[part]) / tokens if token_mean else (part.stop - part.start) / rows
            self.accelerator.backward(loss * weight * scale)
            total += float(loss.detach()) * weight
            ratio = torch.exp(logp.detach() - old_part)[mask]
            clipped += float(((ratio < 1 - lo) | (ratio > 1 + hi)).float().sum())
            counted += int(mask.sum())
        return total, clipped / max(counted, 1)

    def _clip_range(self) -> tuple[float, float]:
        return POLICY_LOSS_SPECS[self.method.policy_loss].clip_range(self.rl)
