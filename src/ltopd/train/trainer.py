"""The training loop every method shares: data order, budget schedule, optimiser, teacher,
checkpoints and resume. Method families differ only in ``step_loss``, each in its own module
(distill.py, sft.py, rl.py, epic.py, llava_mini.py); train/families.py maps each family to its class.

Determinism: update s seeds its rollout sampling and random selectors with (seed, s), and the
batches come in an order drawn from the seed (train/job.py), so a run resumed from a checkpoint ends with the same
weights as an uninterrupted one (tests/train/test_trainer.py).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltopd import integrity, preempt
from ltopd.atomic import atomic_dir
from ltopd.models.backbone import Backbone
from ltopd.train import curriculum
from ltopd.train.methods import MethodSpec
from ltopd.train.optim import build_optimizer, set_lr

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


def attach_module(student: Backbone, name: str, cfg: TrainConfig) -> TrainConfig:
    """Attach the student module ``name`` from the method's section (``cfg.method_params``) unless
    the student carries it already (a saved student); ``cfg`` with the module's learning rate, the
    merger's. A distillation teacher copied before this call has no module."""
    from dataclasses import replace

    from ltopd.models.addons import addon

    impl = addon(name)
    if impl.module_of(student.model) is None:
        impl.attach_section(student.model, dict(cfg.method_params))
    return replace(cfg, lrs={**cfg.lrs, name: cfg.lrs["merger"]})


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

        if method.module is not None:  # a student module (ltopd.models.addons), trained beside the backbone
            cfg = attach_module(student, method.module, cfg)
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
        trained = {id(p) for p in self.params}
        for p in student.model.parameters():  # a part the configuration freezes (lr 0) takes no gradient
            if id(p) not in trained:
                p.requires_grad_(False)

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
            integrity.seal_dir(tmp)  # the resume checks it: a cut-short state is never loaded
        for old in ckpt_dir.glob("step-*"):
            if old != dest and old.is_dir():
                shutil.rmtree(old)

    def resume(self, ckpt_dir: Path) -> int:
        """The number of completed updates restored from the newest checkpoint (0 if none)."""
        for state in sorted(ckpt_dir.glob("step-*/state.pt"), reverse=True):
            try:
                integrity.check(state.parent)
                return self.load_state(torch.load(state, weights_only=False))
            except Exception as e:  # truncated or corrupted: set aside, fall back to an older state or the start
                aside = state.parent.with_name(state.parent.name + ".corrupt")
                shutil.rmtree(aside, ignore_errors=True)
                state.parent.rename(aside)
                why = e.detail if isinstance(e, integrity.Corrupt) else str(e).splitlines()[0][:200]
                print(f"ltopd: not resuming from {state} ({why}); set aside as "
                      f"{aside.name}, resuming from the state before it (none: from the start; the result "
                      "is the same)", file=sys.stderr)
        return 0

    def _stop_requested(self) -> bool:
        """Whether a stop signal came (any rank's, so that all ranks save and stop together)."""
        stop = preempt.requested()
        if self.accelerator.num_processes > 1:
            flag = torch.tensor([float(stop)], device=self.accelerator.device)
            stop = bool(self.accelerator.reduce(flag, "sum").item() > 0)
        return stop

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
            stop = bool(ckpt) and done < self.total_steps and self._stop_requested()
            if ckpt and (stop or done % self.cfg.checkpoint_every == 0 or done == self.total_steps):
                self.save_checkpoint(ckpt, done)  # stop: preempted (SIGTERM) mid-run, this update kept
            if stop:
                if not preempt.requested():  # another rank's signal: every rank stops here
                    preempt.request("SIGTERM (another rank)")
                preempt.stop(f"training state saved in {ckpt} after update {done} of {self.total_steps}")
        return logs
