"""Distillation (the `distill` family): LT-OPD and its ablations (on-policy rollouts of the
student at its budget), and fixed-prefix KD (the reference answers), against a full-token teacher
scored on the same response tokens (train/response_logits.py). The loop is train/trainer.py's."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ltopd.models.backbone import Backbone, EncodedBatch
from ltopd.models.prompt import build_target
from ltopd.train.features import ImageFeatures, StudentFeatures, repeated
from ltopd.train.losses import distill_loss
from ltopd.train.methods import MethodSpec
from ltopd.train.response_logits import encode_responses, response_logits, teacher_response_logits
from ltopd.train.rollout import rollout, rows_of
from ltopd.train.trainer import Records, StepLoss, TrainConfig, Trainer, step_seed


class DistillTrainer(Trainer):
    """LT-OPD and its ablations (on-policy), and fixed-prefix KD (reference answers): the
    student at its budget vs a full-token teacher on the same response tokens."""

    def __init__(self, student: Backbone, method: MethodSpec, cfg: TrainConfig, total_steps: int):
        # The teacher starts as an exact copy of the initial student (frozen, eval, dense).
        self.teacher = copy.deepcopy(student)
        self.teacher.model.requires_grad_(False).eval()
        super().__init__(student, method, cfg, total_steps)

    def state(self, step: int) -> dict[str, Any]:
        out = super().state(step)
        if self.method.teacher == "ema":
            out["teacher"] = self.teacher.model.state_dict()
        return out

    def load_state(self, state: Mapping[str, Any]) -> int:
        if "teacher" in state:
            self.teacher.model.load_state_dict(state["teacher"])
        return super().load_state(state)

    @torch.no_grad()
    def after_step(self) -> None:
        if self.method.teacher == "ema":  # theta_T <- (1 - r) theta_T + r theta_S
            student = self.accelerator.unwrap_model(self.student.model).state_dict()
            for name, t in self.teacher.model.state_dict().items():
                if t.is_floating_point():
                    t.lerp_(student[name].to(t.dtype), self.cfg.ema_rate)

    def step_loss(self, records: Records, ratio: float, step: int) -> StepLoss:
        cfg = self.cfg
        seed = step_seed(cfg.seed, step) + self.accelerator.process_index  # ranks sample differently
        records = list(records)
        t0 = time.perf_counter()
        # One vision pass per model over the update's distinct images (ltopd.train.features).
        student_feats = StudentFeatures.of(self.student, records) if cfg.share_features else None
        shared = student_feats.detached if student_feats else None
        if self.method.on_policy:
            ro = rollout(self.student, records, cfg.rollouts, ratio, cfg.selector, cfg.floor, cfg.max_new_tokens,
                         seed, temperature=cfg.temperature, decode_batch=cfg.decode_batch, features=shared)
            recs, responses, selection = ro.records, ro.responses, ro.selection
            record_of = repeated(len(records), cfg.rollouts)
        else:  # fixed prefix: the dataset's reference answers, the student's selection at this budget
            recs, responses, record_of = records, [build_target(r) for r in records], list(range(len(records)))
            with torch.no_grad():
                batch = self.student.encode(recs)
                selection = self.student.select(batch, ratio, cfg.selector, cfg.floor, seed,
                                                shared.rows(range(len(recs))) if shared else None)
        t1 = time.perf_counter()
        with torch.no_grad():
            self.teacher.model.eval()
            teacher_feats = ImageFeatures.of(self.teacher, records) if cfg.share_features else None
        teacher_s = time.perf_counter() - t1
        # Every row has >= 1 response token, so the per-sequence mean over the batch is the
        # row-weighted mean of the microbatches' means: backward each with weight rows/total.
        rows, size = len(recs), cfg.student_microbatch or len(recs)
        total, agg, n_tokens, lengths = 0.0, {}, 0, []
        for lo in range(0, rows, size):
            part = slice(lo, min(lo + size, rows))
            sub, resp = recs[part], responses[part]
            ta = time.perf_counter()
            batch, width = encode_responses(self.student, sub, resp)
            teacher_logits = self._teacher_logits(sub, resp, width, teacher_feats, record_of[part], batch)
            teacher_s += time.perf_counter() - ta
            feats = student_feats.leaves.rows(record_of[part]) if student_feats else None
            student = response_logits(self.student, batch, width, rows_of(selection, recs, part), feats)
            if self.method.teacher == "trust_region":  # lerp(initial logits, current student logits, mix)
                teacher_logits = torch.lerp(teacher_logits, student.logits.detach(), cfg.trust_region_mix)
            loss, stats = distill_loss(student.logits, teacher_logits, student.ids, student.mask,
                                       objective=self.method.objective, top_k=cfg.top_k, alpha=cfg.jsd_alpha)
            weight = (part.stop - part.start) / rows
            self.accelerator.backward(loss * weight)
            total += float(loss.detach()) * weight
            for k, v in stats.items():
                agg[k] = agg.get(k, 0.0) + v * weight
            n_tokens += int(student.mask.sum())
            lengths += student.mask.sum(1).tolist()
        if student_feats:
            student_feats.backward()  # the microbatches' feature gradients through the tower, once
        t3 = time.perf_counter()
        agg.update(rollout_s=t1 - t0, teacher_s=teacher_s, student_s=t3 - t1 - teacher_s,
                   mean_response_len=sum(lengths) / len(lengths),
                   rollout_tokens_per_s=n_tokens / max(t1 - t0, 1e-9) if self.method.on_policy else math.nan,
                   scoring_tokens_per_s=2 * n_tokens / max(t3 - t1, 1e-9))
        return torch.tensor(total), agg  # already backpropagated (student_s: forward + backward)

    def _teacher_logits(self, records: Records, responses: Sequence[Sequence[int] | str], width: int,
                        features: ImageFeatures | None = None,
                        record_of: Sequence[int] = (), encoded: EncodedBatch | None = None) -> torch.Tensor:
        """The frozen teacher's response logits for these rows, ``teacher_microbatch`` rows per
        forward; each part is left-padded to ``width`` (responses are right-aligned, so the
        padding lands on masked positions only). ``features``: the teacher's features of the
        update's distinct records, row j reading record ``record_of[j]``. ``encoded``: the
        student's encoding of these rows, the teacher's own where one forward takes them all (the
        teacher is a copy of the student, its processor too; an encoding is a third of the
        batches' preparation in an LT-OPD update, ~3% of it)."""
        size = self.cfg.teacher_microbatch or len(records)
        whole = encoded is not None and size >= len(records)
        parts = []
        for lo in range(0, len(records), size):
            batch, w = (encoded, width) if whole else encode_responses(self.teacher, records[lo:lo + size],
                                                                       responses[lo:lo + size])
            feats = None if features is None else features.rows(record_of[lo:lo + size])
            logits = teacher_response_logits(self.teacher, batch, w, feats).logits
            parts.append(torch.nn.functional.pad(logits, (0, 0, width - w, 0)))
        return torch.cat(parts)
