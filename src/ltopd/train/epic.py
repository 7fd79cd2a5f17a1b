"""EPIC (progressive consistency distillation; Wen et al. 2025b), the Table 2 / Table 14 baseline.

The model is its own teacher: a no-gradient pass of the current weights with *less* visual
compression than the student pass, on the reference answers. With training progress p = step /
steps, the student's reduction ratio (share of visual tokens removed) is drawn from
U(lo(p), hi(p)) and the teacher's is max(student - gap(p), 0), gap(p) = min(gap0 + gap_slope p,
max_gap) (implementation-facts.md). EPIC's own bounds, lo = 0.1 + 0.16 p and hi = 0.1 + 0.64 p,
end at 74% reduction; to train "at 5%" as the paper does, both bounds are stretched so that hi
ends at the target reduction 1 - budget with the same 1 : 4 slope ratio (the reference constants
are exactly the case target = 0.74). Loss (losses.epic_loss): alpha tau^2 KL(T^tau || S^tau) on
the answer tokens + (1 - alpha) CE.

Adaptation: tokens are reduced by the profile's selector between the merger and the language
model, like every other method here (EPIC's reference compresses at LM layer 2; Table 5 and
Figure 1 right say so beside its FLOPs).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.prompt import build_target
from ltopd.train.losses import epic_loss
from ltopd.train.methods import MethodSpec
from ltopd.train.response_logits import encode_responses, response_logits
from ltopd.train.trainer import Records, StepLoss, TrainConfig, Trainer, step_seed


@dataclass(frozen=True)
class EpicParams:
    """The profile's ``epic`` section."""

    alpha: float = 0.5  # weight of the distillation term (1 - alpha on the CE)
    tau: float = 2.0
    start_reduction: float = 0.1  # both bounds at p = 0
    low_share: float = 0.25  # lo's slope as a share of hi's (0.16 / 0.64)
    gap0: float = 0.1
    gap_slope: float = 0.5
    max_gap: float = 0.3

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> EpicParams:
        from ltopd.sections import from_section

        return from_section(cls, "epic", section)


def reduction_bounds(p: float, target_reduction: float, params: EpicParams) -> tuple[float, float]:
    """(lo, hi) of the student's reduction ratio at progress ``p`` in [0, 1]."""
    span = target_reduction - params.start_reduction
    return params.start_reduction + params.low_share * span * p, params.start_reduction + span * p


def teacher_reduction(student_reduction: float, p: float, params: EpicParams) -> float:
    gap = min(params.gap0 + params.gap_slope * p, params.max_gap)
    return max(student_reduction - gap, 0.0)


class EpicTrainer(Trainer):
    def __init__(self, student: Backbone, method: MethodSpec, cfg: TrainConfig, total_steps: int) -> None:
        super().__init__(student, method, cfg, total_steps)
        self.epic = EpicParams.from_section(cfg.method_params)

    def progress(self, step: int) -> float:
        return step / self.total_steps

    def keep_ratio(self, step: int) -> float:
        """The student's keep ratio at ``step``: 1 - a reduction drawn from the schedule
        (seeded by the step, so a resumed run draws the same)."""
        lo, hi = reduction_bounds(self.progress(step), 1.0 - self.cfg.budget, self.epic)
        return 1.0 - random.Random(step_seed(self.cfg.seed, step)).uniform(lo, hi)

    def step_loss(self, records: Records, ratio: float, step: int) -> StepLoss:
        cfg, seed = self.cfg, step_seed(self.cfg.seed, step)
        teacher_ratio = 1.0 - teacher_reduction(1.0 - ratio, self.progress(step), self.epic)
        recs, responses = list(records), [build_target(r) for r in records]
        t0 = time.perf_counter()
        batch, width = encode_responses(self.student, recs, responses)
        # one tower pass for both selections and both views
        features = self.student.image_features(batch) if cfg.share_features else None
        with torch.no_grad():  # the teacher view reads the same features without building a graph
            student_sel = self.student.select(batch, ratio, cfg.selector, cfg.floor, seed, features)
            teacher_sel = (None if teacher_ratio >= 1.0 else
                           self.student.select(batch, teacher_ratio, cfg.selector, cfg.floor, seed, features))
            teacher = response_logits(self.student, batch, width, teacher_sel, features).logits
        ta = time.perf_counter()
        student = response_logits(self.student, batch, width, student_sel, features)
        loss = epic_loss(student.logits, teacher, student.ids, student.mask, alpha=self.epic.alpha, tau=self.epic.tau)
        return loss, {"teacher_keep_ratio": teacher_ratio, "teacher_s": ta - t0,
                      "student_forward_s": time.perf_counter() - ta,
                      "mean_response_len": float(student.mask.sum(1).float().mean())}
