"""The training loop every method shares: data order, budget schedule, optimiser, teacher,
checkpoints and resume. Method families differ only in ``step_loss``: distillation and SFT here,
RL, EPIC and LLaVA-Mini in their own modules (train/families.py maps each family to its class).

Determinism: update s seeds its rollout sampling and random selectors with (seed, s), and the
batches come in LT-14K's sampler order, so a run resumed from a checkpoint ends with the same
weights as an uninterrupted one (tests/train/test_trainer.py).
"""

from __future__ import annotations

import copy
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltopd.atomic import atomic_dir
from ltopd.models.backbone import Backbone
from ltopd.models.prompt import build_target
from ltopd.train import curriculum
from ltopd.train.features import ImageFeatures, StudentFeatures, repeated
from ltopd.train.losses import distill_loss, masked_mean_per_sequence_then_batch
from ltopd.train.methods import MethodSpec
from ltopd.train.optim import build_optimizer, set_lr
from ltopd.train.response_logits import encode_responses, score, score_teacher
from ltopd.train.rollout import rollout, rows_of

Records = Sequence[Mapping[str, Any]]  # one update's questions
StepLoss = tuple[torch.Tensor, dict[str, float]]  # (loss, metrics) of one update


@dataclass(frozen=True)
class TrainConfig:
    # the profile's (ltopd.grid.reduction_defaults): no default here
    budget: float  # the target keep ratio (beta)
    selector: str  # training.selector
    floor: int  # reduction.floor
    curriculum_alpha: float = 2.0
    rollouts: int = 8
    max_new_tokens: int = 1024
    top_k: int = 100
    jsd_alpha: float = 0.5
    lrs: Mapping[str, float] = field(default_factory=lambda: {"lm": 1e-6, "merger": 1e-6, "vision": 2e-7})
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 14
    grad_clip: float = 1.0
    ema_rate: float = 0.05
    trust_region_mix: float = 0.5
    checkpoint_every: int = 25
    temperature: float = 1.0  # rollout sampling temperature
    decode_batch: int | None = None  # sequences per generate() call (None: the whole batch)
    student_microbatch: int | None = None  # rows per student forward/backward (gradient accumulation)
    teacher_microbatch: int | None = None  # rows per teacher forward
    # one vision pass per model and update, shared by every pass (ltopd.train.features); False
    # runs the tower in each pass, the reference the tests and benchmarks/train_step.py compare with
    share_features: bool = True
    seed: int = 0
    method_params: Mapping[str, Any] = field(default_factory=dict)  # the family's own section (rl, epic)

    @classmethod
    def from_profile(cls, training: Mapping[str, Any], budget: float, floor: int, seed: int,
                     method_params: Mapping[str, Any] | None = None) -> TrainConfig:
        """From a profile's ``training`` section; ``budget`` is the grid's smallest budget,
        ``floor`` the reduction floor, ``seed`` the grid seed of this run, ``method_params`` the
        method family's own section (``rl``, ``epic``) if it has one."""
        t = dict(training)
        lr, cur, betas = t.pop("lr"), t.pop("curriculum"), t.pop("betas")
        t.pop("steps", None)
        t.pop("distributed", None)  # how the job is launched (workflow/rules/train.smk), not the math
        seed = t.pop("init_seed", 0) + seed  # the paper's init seed 42 offsets every grid seed
        return cls(budget=budget, floor=floor, seed=seed, lrs=dict(lr), curriculum_alpha=cur["alpha"],
                   betas=(float(betas[0]), float(betas[1])), method_params=dict(method_params or {}), **t)


@dataclass
class StepLog:
    step: int
    metrics: dict[str, float]


def step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step * 7_919 + 17) % 2**31


class Trainer:
    """Shared loop. Subclasses implement ``step_loss(records, ratio, step) -> (loss, metrics)``;
    a returned loss without grad means step_loss backpropagated its microbatches itself."""

    def __init__(self, student: Backbone, method: MethodSpec, cfg: TrainConfig, total_steps: int):
        from accelerate import Accelerator

        self.student, self.method, self.cfg, self.total_steps = student, method, cfg, total_steps
        self.history: list[StepLog] = []  # every update's log, restored from a checkpoint on resume
        self.accelerator = Accelerator(cpu=not torch.cuda.is_available())
        optimizer = build_optimizer(student.model, cfg.lrs, cfg.weight_decay, cfg.betas)
        from accelerate.utils import DistributedType

        self.sharded = self.accelerator.distributed_type == DistributedType.FSDP
        if self.sharded:  # FSDP2 shards the model in place: the Backbone keeps its module
            student.model, self.optimizer = self.accelerator.prepare(student.model, optimizer)
        else:
            # Data parallel without a wrapper: the family ops reach into the bare model's
            # submodules, which a DistributedDataParallel wrapper hides; sync_gradients() averages
            # the gradients over the ranks instead (what DDP's all-reduce does).
            student.model.to(self.accelerator.device)
            self.optimizer = self.accelerator.prepare(optimizer)
        self.params = [p for g in self.optimizer.param_groups for p in g["params"]]

    def sync_gradients(self) -> None:
        """Average every parameter's gradient over the ranks (a no-op in one process); a rank
        that left a parameter unused contributes zeros, as DDP does."""
        if self.sharded or self.accelerator.num_processes == 1:
            return
        for p in self.params:
            grad = p.grad if p.grad is not None else torch.zeros_like(p)
            p.grad = self.accelerator.reduce(grad, "mean")

    def keep_ratio(self, step: int) -> float:
        """The student's budget at ``step``; capped at 1 (a large target budget times 2a + 1)."""
        return min(1.0, curriculum.keep_ratio(step, self.total_steps, alpha=self.cfg.curriculum_alpha,
                                              beta=self.cfg.budget, plateau=self.method.plateau,
                                              curriculum=self.method.curriculum))

    def shard(self, records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """This process's questions of an update (all of them in a single process). Under
        `accelerate launch` each rank takes every world-th question and the gradient all-reduce
        averages the ranks' per-sequence means."""
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        return list(records)[rank::world]

    def step_loss(self, records: Records, ratio: float, step: int) -> StepLoss:
        raise NotImplementedError

    def after_step(self) -> None:
        """Hook after the optimiser step (the EMA teacher follows the student here)."""

    # -- checkpoints --------------------------------------------------------------------------
    def state(self, step: int) -> dict[str, Any]:
        """What a checkpoint holds: weights, optimiser and every update's logged metrics so far
        (a run resumed at its end still reports its losses)."""
        return {"step": step, "model": self.accelerator.unwrap_model(self.student.model).state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "history": [(log.step, dict(log.metrics)) for log in self.history]}

    def load_state(self, state: Mapping[str, Any]) -> int:
        self.accelerator.unwrap_model(self.student.model).load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.history = [StepLog(s, dict(m)) for s, m in state.get("history", [])]
        return int(state["step"])

    def save_checkpoint(self, ckpt_dir: Path, step: int) -> None:
        """Write ``ckpt_dir/step-XXXXXX`` atomically, then drop older ones (the main process
        writes; every rank waits for it, so all resume from the same state)."""
        if self.accelerator.is_main_process:
            self._write_checkpoint(ckpt_dir, step)
        self.accelerator.wait_for_everyone()

    def _write_checkpoint(self, ckpt_dir: Path, step: int) -> None:
        dest = ckpt_dir / f"step-{step:06d}"
        with atomic_dir(dest) as tmp:
            torch.save(self.state(step), tmp / "state.pt")
        for old in ckpt_dir.glob("step-*"):
            if old != dest and old.is_dir():
                shutil.rmtree(old)

    def resume(self, ckpt_dir: Path) -> int:
        """The number of completed updates restored from the newest checkpoint (0 if none)."""
        steps = sorted(ckpt_dir.glob("step-*/state.pt"))
        if not steps:
            return 0
        return self.load_state(torch.load(steps[-1], weights_only=False))

    # -- the loop -----------------------------------------------------------------------------
    def fit(self, batches: Sequence[Sequence[Mapping[str, Any]]], ckpt_dir: str | Path | None = None,
            on_step: Callable[[StepLog], None] | None = None, stop_after: int | None = None) -> list[StepLog]:
        """Run updates over ``batches`` (one per update) from the last checkpoint on; returns this
        call's step logs (``self.history``: every update's, the resumed ones included).
        ``stop_after`` ends the run early after that many completed updates (to test resume)."""
        ckpt = Path(ckpt_dir) if ckpt_dir else None
        self.history = []
        start = self.resume(ckpt) if ckpt else 0
        logs: list[StepLog] = []
        self.student.model.train()
        for step in range(start, min(self.total_steps, len(batches))):
            if stop_after is not None and step >= stop_after:
                break
            lrs = set_lr(self.optimizer, step, self.cfg.warmup_steps)
            ratio = self.keep_ratio(step)
            t0 = time.perf_counter()
            self.optimizer.zero_grad(set_to_none=True)
            loss, metrics = self.step_loss(self.shard(batches[step]), ratio, step)
            if loss.requires_grad:  # else step_loss already backpropagated its microbatches
                tb = time.perf_counter()
                self.accelerator.backward(loss)
                metrics["student_s"] = metrics.pop("student_forward_s", 0.0) + time.perf_counter() - tb
            self.sync_gradients()
            grad_norm = self.accelerator.clip_grad_norm_(self.params, self.cfg.grad_clip)
            self.optimizer.step()
            self.after_step()
            # the update's loss over all ranks' questions (each rank computed its shard's mean)
            metrics.update(loss=float(self.accelerator.reduce(loss.detach(), "mean")), keep_ratio=ratio,
                           grad_norm=float(grad_norm),
                           step_s=time.perf_counter() - t0, **{f"lr_{k}": v for k, v in lrs.items()})
            log = StepLog(step + 1, metrics)
            logs.append(log)
            self.history.append(log)
            if on_step:
                on_step(log)
            done = step + 1
            if ckpt and (done % self.cfg.checkpoint_every == 0 or done == self.total_steps):
                self.save_checkpoint(ckpt, done)
        return logs


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
            teacher_logits = self._teacher_logits(sub, resp, width, teacher_feats, record_of[part])
            teacher_s += time.perf_counter() - ta
            feats = student_feats.leaves.rows(record_of[part]) if student_feats else None
            student = score(self.student, batch, width, rows_of(selection, recs, part), feats)
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
                        record_of: Sequence[int] = ()) -> torch.Tensor:
        """The frozen teacher's response logits for these rows, ``teacher_microbatch`` rows per
        forward; each part is left-padded to ``width`` (responses are right-aligned, so the
        padding lands on masked positions only). ``features``: the teacher's features of the
        update's distinct records, row j reading record ``record_of[j]``."""
        size = self.cfg.teacher_microbatch or len(records)
        parts = []
        for lo in range(0, len(records), size):
            batch, w = encode_responses(self.teacher, records[lo:lo + size], responses[lo:lo + size])
            feats = None if features is None else features.rows(record_of[lo:lo + size])
            logits = score_teacher(self.teacher, batch, w, feats).logits
            parts.append(torch.nn.functional.pad(logits, (0, 0, width - w, 0)))
        return torch.cat(parts)


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
        scored = score(self.student, batch, width, selection, features)
        logp = torch.log_softmax(scored.logits.float(), -1).gather(-1, scored.ids.unsqueeze(-1)).squeeze(-1)
        loss = masked_mean_per_sequence_then_batch(-logp, scored.mask)
        lengths = scored.mask.sum(1).float()
        return loss, {"student_forward_s": time.perf_counter() - t0, "mean_response_len": float(lengths.mean())}
