"""One training run of the pipeline: LT-14K's batches in the run seed's order, a student loaded
like any checkpoint, the method's trainer, checkpoints for resume, the trained student saved."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ltopd.job_identity import claim, identity
from ltopd.models.backbone import Backbone
from ltopd.train.families import make_trainer
from ltopd.train.methods import method_spec
from ltopd.train.trainer import StepLog, TrainConfig, Trainer


def lt14k_batches(path: str | Path) -> list[list[dict]]:
    """LT-14K's batches in the order the balanced sampler wrote them (one per update)."""
    from ltopd.data import lt14k
    from ltopd.data.rows import rows

    ds, _ = lt14k.load(path)
    groups: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for rec in rows(ds):
        groups[int(rec["batch"])].append((int(rec["position"]), rec))
    return [[r for _, r in sorted(groups[b], key=lambda x: x[0])] for b in sorted(groups)]


def seeded_order(batches: list[list[dict]], seed: int) -> list[list[dict]]:
    """The batches in the order of a permutation drawn from the run's seed, as a data loader
    shuffles by its seed: a run that takes fewer updates than there are batches (``training.steps``)
    sees a seed's own subset, so seeds differ for every method, also the ones with no sampling of
    their own (SFT, fixed-prefix KD with CDPruner). Each batch keeps the sampler's quota mix."""
    import numpy as np

    order = np.random.default_rng([seed, 20260306]).permutation(len(batches))
    return [batches[i] for i in order]


def total_updates(training: Mapping[str, Any], num_batches: int) -> int:
    """Updates of a run: one per LT-14K batch, capped by ``training.steps``."""
    return min(training.get("steps", num_batches), num_batches)


def build(model_dir: str | Path, data_dir: str | Path, method: str, training: Mapping[str, Any], budget: float,
          floor: int, seed: int, method_params: Mapping[str, Any] | None = None) -> tuple[Trainer, list[list[dict]]]:
    """(trainer with the student loaded from ``model_dir``, LT-14K batches in the seed's order).
    ``method_params``: the method family's own profile section (``rl``, ``epic``), if any."""
    from ltopd.models.loading import load_backbone

    cfg = TrainConfig.from_profile(training, budget=budget, floor=floor, seed=seed, method_params=method_params)
    batches = seeded_order(lt14k_batches(data_dir), cfg.seed)
    trainer = make_trainer(load_backbone(model_dir), method_spec(method), cfg, total_updates(training, len(batches)))
    return trainer, batches


def job_settings(method: str, training: Mapping[str, Any], budget: float, floor: int, seed: int,
                 method_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of a training job's identity (its resumable state's): the method, its
    ``training`` section, budget, floor, seed and the method's own section (``rl``, ``epic``,
    ``llava_mini``, ``learnable_merge``): a changed value of any of them is another job."""
    return {"method": method, "training": training, "budget": budget, "floor": floor, "seed": seed,
            "method_params": method_params or {}}


def run(model_dir: str | Path, data_dir: str | Path, method: str, training: Mapping[str, Any], budget: float,
        floor: int, seed: int, ckpt_dir: str | Path, on_step: Callable[[StepLog], None] | None = None,
        stop_after: int | None = None, method_params: Mapping[str, Any] | None = None
        ) -> tuple[Backbone, list[StepLog], int, int]:
    """Train ``method`` from the model in ``model_dir`` (resuming from ``ckpt_dir`` when this
    job's identity wrote it: job_identity.claim); returns (trained backbone, step logs of every
    update, resumed ones included, updates run by this call, total updates). ``stop_after`` ends
    the run after that many completed updates, as a killed job would (to test resume)."""
    trainer, batches = build(model_dir, data_dir, method, training, budget, floor, seed, method_params)
    if ckpt_dir is not None:
        if trainer.accelerator.is_main_process:
            settings = job_settings(method, training, budget, floor, seed, method_params)
            claim(ckpt_dir, identity(settings, {"model": model_dir, "lt14k": data_dir}, code=(__name__,)))
        trainer.accelerator.wait_for_everyone()  # every rank resumes from the folder as claimed
    logs = trainer.fit(batches, ckpt_dir, on_step=on_step, stop_after=stop_after)
    student = trainer.student
    student.model = trainer.accelerator.unwrap_model(student.model)
    return student, trainer.history, len(logs), trainer.total_steps
