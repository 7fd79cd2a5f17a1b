"""Pretraining of a tiny twin so that it actually answers from the image.

Recipe found on the CPU machines (see the pretraining notes in the report): a curriculum whose
first stage shows one object per image with questions that can only be answered from it
(colour / shape of the object). Without it the twin settles on the question-only answer prior
and never starts reading the image within a CPU budget; with it the image route opens in about
150 updates and later multi-object stages build on it. Loss on the response tokens only.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ltopd.data.world import WorldConfig, generate_task_item
from ltopd.models.backbone import Backbone
from ltopd.models.prompt import build_target

GROUPS = ("lm", "merger", "vision")


@dataclass(frozen=True)
class Stage:
    """`steps` updates on the stage's item stream with one learning rate per parameter group.

    A learning rate of 0 freezes that group for the stage.
    """

    name: str
    steps: int
    lr_lm: float = 2e-3
    lr_merger: float = 2e-3
    lr_vision: float = 2e-3

    def lr(self, group: str) -> float:
        return {"lm": self.lr_lm, "merger": self.lr_merger, "vision": self.lr_vision}[group]


@dataclass(frozen=True)
class PretrainConfig:
    stages: tuple[Stage, ...]
    batch_size: int = 32
    seed: int = 0
    warmup_steps: int = 20  # linear warm-up from the first update of the run
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    target_field: str = "answer"  # record field trained as the assistant continuation

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("PretrainConfig needs at least one stage")
        if self.batch_size < 1 or any(s.steps < 0 for s in self.stages):
            raise ValueError("batch_size must be >= 1 and stage steps >= 0")


@dataclass(frozen=True)
class StepLog:
    step: int  # 1-based, counted over all stages
    stage: str
    loss: float
    lrs: dict[str, float]
    samples: int
    elapsed_s: float


@dataclass
class PretrainMetrics:
    steps: int = 0
    samples: int = 0
    wall_s: float = 0.0
    losses: list[float] = field(default_factory=list)
    stage_final_loss: dict[str, float] = field(default_factory=dict)


# Module-name prefixes of the vision side in each family (Qwen3.5 and GLM: `visual` with its
# `merger`; LLaVA-OneVision: `vision_tower`, `multi_modal_projector` and the newline embedding).
MERGER_PREFIXES = ("model.visual.merger.", "model.multi_modal_projector.", "model.image_newline")
VISION_PREFIXES = ("model.visual.", "model.vision_tower.")
ADDED_PREFIX = ("llava_mini.",)


def parameter_groups(model: torch.nn.Module) -> dict[str, list[torch.nn.Parameter]]:
    """Split trainable parameters into vision tower, merger (projector) and language model."""
    groups: dict[str, list[torch.nn.Parameter]] = {g: [] for g in GROUPS}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if name.startswith(ADDED_PREFIX):  # a module added for a method (LLaVA-Mini): its own lr
            groups.setdefault(name.split(".", 1)[0], []).append(param)
        elif name.startswith(MERGER_PREFIXES):
            groups["merger"].append(param)
        elif name.startswith(VISION_PREFIXES):
            groups["vision"].append(param)
        else:
            groups["lm"].append(param)
    return groups


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Multiplier of the stage learning rates at 0-based update `step`."""
    return 1.0 if warmup_steps <= 0 else min(1.0, (step + 1) / warmup_steps)


def task_stream(tasks: Sequence[str], seed: int, cfg: WorldConfig, start: int = 0,
                styles: Sequence[str | None] = (None,)) -> Iterator[dict]:
    """Endless round-robin over `tasks` of the synthetic world, deterministic. Item i is phrased
    in ``styles[(i // len(tasks)) % len(styles)]`` (None: the plain wording); a source style
    brings its wrappers and its multiple-choice rate (option lists answered by letter)."""
    for i in itertools.count(start):
        k = i // len(tasks)
        yield generate_task_item(tasks[i % len(tasks)], k, seed, cfg, style=styles[k % len(styles)])


def _streams(items: Iterable[dict] | Mapping[str, Iterable[dict]], stages: Sequence[Stage]) -> dict[str, Iterator[dict]]:
    if isinstance(items, Mapping):
        missing = [s.name for s in stages if s.name not in items]
        if missing:
            raise ValueError(f"no item stream for stages {missing}; streams given: {sorted(items)}")
        return {s.name: iter(items[s.name]) for s in stages}
    shared = iter(items)
    return {s.name: shared for s in stages}


def _take(stream: Iterator[dict], n: int, stage: str) -> list[dict]:
    batch = list(itertools.islice(stream, n))
    if len(batch) < n:
        raise ValueError(f"item stream of stage {stage!r} ran out ({len(batch)} of {n} items left)")
    return batch


def pretrain(
    backbone: Backbone,
    items: Iterable[dict] | Mapping[str, Iterable[dict]],
    config: PretrainConfig,
    on_step: Callable[[StepLog], None] | None = None,
) -> PretrainMetrics:
    """Train `backbone.model` in place on the stages of `config`; returns the learning curve.

    `items` is one record stream shared by all stages, or one stream per stage name. Each update
    takes `batch_size` records, trains the record's `target_field` closed by '</answer>' after the
    prompt (prompt tokens carry no loss), clips the gradient norm and steps AdamW.
    """
    model = backbone.model
    torch.manual_seed(config.seed)
    streams = _streams(items, config.stages)
    groups = parameter_groups(model)
    opt = torch.optim.AdamW(
        [{"params": groups[g], "name": g, "lr": 0.0} for g in GROUPS if groups[g]],
        weight_decay=config.weight_decay,
    )
    metrics = PretrainMetrics()
    was_training = model.training
    model.train()
    start = time.perf_counter()
    try:
        for stage in config.stages:
            for _ in range(stage.steps):
                factor = warmup_factor(metrics.steps, config.warmup_steps)
                for g in opt.param_groups:
                    g["lr"] = stage.lr(g["name"]) * factor
                records = _take(streams[stage.name], config.batch_size, stage.name)
                batch = backbone.encode(records, [build_target(r, config.target_field) for r in records])
                loss = backbone.forward(batch, with_labels=True)[0].loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                opt.step()
                metrics.steps += 1
                metrics.samples += len(records)
                metrics.losses.append(float(loss.detach()))
                metrics.stage_final_loss[stage.name] = metrics.losses[-1]
                if on_step is not None:
                    on_step(StepLog(metrics.steps, stage.name, metrics.losses[-1],
                                    {g["name"]: g["lr"] for g in opt.param_groups}, metrics.samples,
                                    time.perf_counter() - start))
    finally:
        model.train(was_training)
    metrics.wall_s = time.perf_counter() - start
    return metrics


def summarize(metrics: PretrainMetrics, window: int = 25) -> dict[str, Any]:
    """Loss at the start and end of the run (means over `window` updates) for logging."""
    head = metrics.losses[:window] or [float("nan")]
    tail = metrics.losses[-window:] or [float("nan")]
    return {"steps": metrics.steps, "samples": metrics.samples, "wall_s": round(metrics.wall_s, 1),
            "loss_first": sum(head) / len(head), "loss_last": sum(tail) / len(tail),
            "stage_final_loss": dict(metrics.stage_final_loss)}
