"""Supervised fine-tuning (the `sft` family): cross-entropy on the reference answers, the student
at its budget. LLaVA-Mini's trainer (train/llava_mini.py) extends it. The loop is train/trainer.py's."""

from __future__ import annotations

import time

import torch

from ltopd.models.prompt import build_target
from ltopd.train.losses import masked_mean_per_sequence_then_batch
from ltopd.train.response_logits import encode_responses, response_logits
from ltopd.train.trainer import Records, StepLoss, Trainer, step_seed


class SFTTrainer(Trainer):
    """Cross-entropy on the reference answers, the student at its budget (same selector)."""

    def step_loss(self, records: Records, ratio: float, step: int) -> StepLoss:
        cfg, seed = self.cfg, step_seed(self.cfg.seed, step)
        recs, responses = list(records), [build_target(r) for r in records]
        t0 = time.perf_counter()
        batch, width = encode_responses(self.student, recs, responses)
        features = self.student.image_features(batch) if cfg.share_features else None  # one pass for both
        with torch.no_grad():
            selection = self.student.select(batch, ratio, cfg.selector, cfg.floor, seed, features)
        scored = response_logits(self.student, batch, width, selection, features)
        logp = torch.log_softmax(scored.logits.float(), -1).gather(-1, scored.ids.unsqueeze(-1)).squeeze(-1)
        loss = masked_mean_per_sequence_then_batch(-logp, scored.mask)
        lengths = scored.mask.sum(1).float()
        return loss, {"student_forward_s": time.perf_counter() - t0, "mean_response_len": float(lengths.mean())}
