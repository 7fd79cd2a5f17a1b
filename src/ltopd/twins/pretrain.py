"""Pretraining of a tiny twin so that it actually answers from the image.

Recipe found on the CPU machines (see the pretraining notes in the report): a curriculum whose
first stage shows one object per image with questions that can only be answered from it
(colour / shape of the object). Without it the twin settles on the question-only answer prior
and never starts reading the image within a CPU budget; with it the image route opens in about
150 updates and later multi-object stages build on it. Loss on the response tokens only.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltopd import integrity, preempt
from ltopd.data.world import WorldConfig, generate_task_item
from ltopd.models.backbone import Backbone
from ltopd.models.parts import GROUPS, parameter_groups
from ltopd.models.prompt import build_target
from ltopd.twins.dense_vision import DenseHeads, dense_loss
from ltopd.twins.objectives import DENSE_OBJECTIVES

DENSE_HEADS = "dense_heads"  # the optimizer group of a dense stage's throwaway heads (the vision lr)


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
    final_lr_ratio: float = 1.0  # < 1: cosine decay over the stage down to this fraction
    # "answer": the record's answer after its prompt; "dense" and "words": ltopd.twins.dense_vision
    objective: str = "answer"
    # True: the stage starts a fresh AdamW (zero moments) and a new warm-up, as a run started from
    # the weights of the stages before it would; so a warm start from a release of those stages
    # (ltopd.twins.build.warm_start) gives the weights a run from scratch gives.
    fresh_optimizer: bool = False

    def __post_init__(self) -> None:
        if self.objective not in STAGE_OBJECTIVES:
            raise ValueError(f"stage {self.name!r}: objective {self.objective!r}; "
                             f"allowed values: {sorted(STAGE_OBJECTIVES)}")

    def lr(self, group: str) -> float:
        lrs = {"lm": self.lr_lm, "merger": self.lr_merger, "vision": self.lr_vision, DENSE_HEADS: self.lr_vision}
        return lrs[group]

    def decay(self, step_in_stage: int) -> float:
        """Multiplier of the stage's learning rates at its 0-based update `step_in_stage`."""
        if self.final_lr_ratio >= 1.0 or self.steps <= 1:
            return 1.0
        progress = step_in_stage / (self.steps - 1)
        return self.final_lr_ratio + (1 - self.final_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


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
class PretrainLog:
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


def _answer_objective(backbone: Backbone, records: Sequence[dict], config: PretrainConfig,
                      heads: DenseHeads | None) -> torch.Tensor:
    return accumulate_loss(backbone, records, config.target_field)


def _dense_objective(backbone: Backbone, records: Sequence[dict], config: PretrainConfig,
                     heads: DenseHeads | None) -> torch.Tensor:
    assert heads is not None  # pretrain() builds them whenever a stage is dense
    return dense_loss(backbone, records, heads)


def _words_objective(backbone: Backbone, records: Sequence[dict], config: PretrainConfig,
                     heads: DenseHeads | None) -> torch.Tensor:
    assert heads is not None
    return dense_loss(backbone, records, heads, words_only=True)


# What a stage trains: each objective back-propagates its batch loss and returns it (detached).
STAGE_OBJECTIVES: dict[str, Callable[[Backbone, Sequence[dict], PretrainConfig, DenseHeads | None], torch.Tensor]] = {
    "answer": _answer_objective,
    "dense": _dense_objective,
    "words": _words_objective,
}


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


StreamSource = Iterable[dict] | Callable[[int], Iterable[dict]]  # items, or start index -> items


def _streams(items: StreamSource | Mapping[str, StreamSource], stages: Sequence[Stage],
             consumed: Mapping[str, int]) -> dict[str, Iterator[dict]]:
    """One iterator per stage, advanced past the `consumed` items (a resumed run). A callable
    source starts at that index itself; a plain iterable is skipped through."""
    def opened(source: StreamSource, start: int) -> Iterator[dict]:
        if callable(source):
            return iter(source(start))
        return itertools.islice(iter(source), start, None)

    if isinstance(items, Mapping):
        missing = [s.name for s in stages if s.name not in items]
        if missing:
            raise ValueError(f"no item stream for stages {missing}; streams given: {sorted(items)}")
        return {s.name: opened(items[s.name], consumed.get(s.name, 0)) for s in stages}
    shared = opened(items, sum(consumed.values()))
    return {s.name: shared for s in stages}


def _take(stream: Iterator[dict], n: int, stage: str) -> list[dict]:
    batch = list(itertools.islice(stream, n))
    if len(batch) < n:
        raise ValueError(f"item stream of stage {stage!r} ran out ({len(batch)} of {n} items left)")
    return batch


def accumulate_loss(backbone: Backbone, records: Sequence[dict], target_field: str = "answer") -> torch.Tensor:
    """Back-propagate the batch's mean response-token loss; returns it (detached).

    Records are grouped by their number of images and each group runs as its own padded batch:
    one three-image record would otherwise pad all rows to three images' length (measured: a
    mixed batch of 32 costs 1.9x the grouped passes). Every group's summed token loss is divided
    by the whole batch's response-token count, so the gradient equals the one-batch gradient.
    """
    targets = [build_target(r, target_field) for r in records]
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(len(r.get("images") or []), []).append(i)
    encoded = [backbone.encode([records[i] for i in rows], [targets[i] for i in rows]) for rows in groups.values()]
    total = sum(int(b.response_mask.sum()) for b in encoded)
    loss = torch.zeros((), device=backbone.model.device)
    for batch in encoded:
        part = backbone.forward(batch, with_labels=True, num_items_in_batch=total)[0].loss
        part.backward()
        loss += part.detach()
    return loss


STATE_FILE = "pretrain_state.pt"


def _save_state(state_dir: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, metrics: PretrainMetrics,
                heads: DenseHeads | None, recipe: Any) -> None:
    """Weights, optimiser and learning curve after `metrics.steps` updates, with the recipe that
    made them (temp file, then rename)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / f".{STATE_FILE}.tmp"
    extra = {} if heads is None else {DENSE_HEADS: heads.state_dict()}
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "steps": metrics.steps,
                "samples": metrics.samples, "losses": metrics.losses, "wall_s": metrics.wall_s,
                "stage_final_loss": metrics.stage_final_loss, "recipe": recipe, **extra}, tmp)
    tmp.replace(state_dir / STATE_FILE)
    integrity.seal_file(state_dir / STATE_FILE)  # checked before a resume: a cut-short state is never loaded


def _load_state(state_dir: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, metrics: PretrainMetrics,
                heads: DenseHeads | None, recipe: Any) -> bool:
    """Resume from the saved state when the same recipe saved it; False (nothing loaded) when
    another recipe did: its weights would silently continue a different run, and when the state
    is truncated or corrupted (one line; the run starts from scratch, to the same weights)."""
    try:
        integrity.check(state_dir / STATE_FILE)
        state = torch.load(state_dir / STATE_FILE, map_location="cpu", weights_only=False)
    except Exception as e:
        why = e.detail if isinstance(e, integrity.Corrupt) else str(e).splitlines()[0][:200]
        print(f"pretrain: not resuming from {state_dir / STATE_FILE} ({why}); starting from scratch (it is "
              "overwritten at the first checkpoint)", file=sys.stderr)
        return False
    if state.get("recipe") != recipe:
        print(f"pretrain: {state_dir / STATE_FILE} was saved by another recipe; starting from scratch "
              "(it is overwritten at the first checkpoint)", file=sys.stderr)
        return False
    model.load_state_dict(state["model"])
    if heads is not None:
        heads.load_state_dict(state[DENSE_HEADS])
    opt.load_state_dict(state["optimizer"])
    metrics.steps, metrics.samples, metrics.losses = state["steps"], state["samples"], list(state["losses"])
    metrics.wall_s, metrics.stage_final_loss = state["wall_s"], dict(state["stage_final_loss"])
    return True


def _seeded_heads(model: torch.nn.Module, seed: int) -> DenseHeads:
    """Dense heads initialised from `seed` alone (the global RNG is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return DenseHeads(model.get_input_embeddings().embedding_dim).to(model.device)


def _optimizer(model: torch.nn.Module, config: PretrainConfig) -> tuple[torch.optim.Optimizer, DenseHeads | None]:
    """AdamW over the parameter groups (and a dense stage's throwaway heads, built only then: other
    recipes' RNG stream is unchanged), learning rates set per update."""
    groups = parameter_groups(model)
    param_groups = [{"params": groups[g], "name": g, "lr": 0.0} for g in GROUPS if groups[g]]
    heads = None
    if any(s.objective in DENSE_OBJECTIVES for s in config.stages):
        # Drawn from the global RNG its callers have just seeded: the values _seeded_heads gives.
        heads = DenseHeads(model.get_input_embeddings().embedding_dim).to(model.device)
        param_groups.append({"params": list(heads.parameters()), "name": DENSE_HEADS, "lr": 0.0})
    return torch.optim.AdamW(param_groups, weight_decay=config.weight_decay), heads


def _fingerprint(config: PretrainConfig, recipe: Any) -> dict[str, Any]:
    return {"config": repr(config), "recipe": recipe}


def seed_state(state_dir: str | Path, model: torch.nn.Module, config: PretrainConfig, recipe: Any, steps: int,
               wall_s: float = 0.0) -> None:
    """A saved state at the start of stage ``steps`` counts in, holding `model`'s weights: what
    `pretrain` saves there, for a stage with `fresh_optimizer` (its optimiser and warm-up start
    anew, so nothing else of the earlier run matters). The earlier updates' losses are unknown
    (NaN). `pretrain` resumes from it as from its own checkpoint."""
    begin = 0
    for stage in config.stages:
        if begin == steps:
            if not stage.fresh_optimizer:
                raise ValueError(f"stage {stage.name!r} starts at update {steps} without `fresh_optimizer`: "
                                 "a run continued there needs the optimiser state the weights lack")
            break
        begin += stage.steps
    else:
        raise ValueError(f"no stage starts at update {steps}")
    torch.manual_seed(config.seed)
    opt, heads = _optimizer(model, config)
    metrics = PretrainMetrics(steps=steps, samples=steps * config.batch_size, wall_s=wall_s,
                              losses=[math.nan] * steps)
    _save_state(Path(state_dir), model, opt, metrics, heads, _fingerprint(config, recipe))


def _consumed(stages: Sequence[Stage], steps: int, batch_size: int) -> dict[str, int]:
    """Items each stage's stream has given after `steps` updates of the whole run."""
    out = {}
    for stage in stages:
        done = min(stage.steps, steps)
        out[stage.name] = out.get(stage.name, 0) + done * batch_size
        steps -= done
    return out


def pretrain(
    backbone: Backbone,
    items: StreamSource | Mapping[str, StreamSource],
    config: PretrainConfig,
    on_step: Callable[[PretrainLog], None] | None = None,
    state_dir: str | Path | None = None,
    checkpoint_every: int = 0,
    stop_after: int | None = None,
    recipe: Any = None,
) -> PretrainMetrics:
    """Train `backbone.model` in place on the stages of `config`; returns the learning curve.

    `items` is one record stream shared by all stages, or one stream per stage name (an iterable,
    or a callable taking the index of the first item to give). Each update takes `batch_size`
    records, trains the record's `target_field` closed by '</answer>' after the prompt (prompt
    tokens carry no loss), clips the gradient norm and steps AdamW.

    With `state_dir`, a state saved there resumes the run where it stopped (same items, same
    learning rates: the result equals an uninterrupted run), and the state is saved every
    `checkpoint_every` updates and at the end. `recipe` (anything picklable and comparable:
    what determines the item streams beyond `config`, e.g. the profile's stages and world) is
    saved with the state; a state saved under another recipe or config is not resumed.
    `stop_after` ends the call after that many updates of the whole run (a run split over
    several calls).
    """
    model = backbone.model
    torch.manual_seed(config.seed)
    opt, heads = _optimizer(model, config)
    clipped = list(model.parameters()) + (list(heads.parameters()) if heads is not None else [])
    metrics = PretrainMetrics()
    fingerprint = _fingerprint(config, recipe)
    state_path = Path(state_dir) if state_dir is not None else None
    if state_path is not None and (state_path / STATE_FILE).is_file():
        _load_state(state_path, model, opt, metrics, heads, fingerprint)
    streams = _streams(items, config.stages, _consumed(config.stages, metrics.steps, config.batch_size))
    total = sum(s.steps for s in config.stages)
    last = total if stop_after is None else min(total, stop_after)
    was_training = model.training
    model.train()
    start = time.perf_counter() - metrics.wall_s
    try:
        first = warm_from = 0
        for stage in config.stages:
            begin, first = first, first + stage.steps
            if stage.fresh_optimizer:
                warm_from = begin
            while begin <= metrics.steps < first and metrics.steps < last:
                if stage.fresh_optimizer and metrics.steps == begin:
                    opt.state.clear()
                    if heads is not None:  # begun anew too, as in a run started from the weights
                        heads.load_state_dict(_seeded_heads(model, config.seed).state_dict())
                warm = warmup_factor(metrics.steps - warm_from, config.warmup_steps)
                factor = warm * stage.decay(metrics.steps - begin)
                for g in opt.param_groups:
                    g["lr"] = stage.lr(g["name"]) * factor
                records = _take(streams[stage.name], config.batch_size, stage.name)
                opt.zero_grad(set_to_none=True)
                loss = STAGE_OBJECTIVES[stage.objective](backbone, records, config, heads)
                torch.nn.utils.clip_grad_norm_(clipped, config.grad_clip)
                opt.step()
                metrics.steps += 1
                metrics.samples += len(records)
                metrics.losses.append(float(loss.detach()))
                metrics.stage_final_loss[stage.name] = metrics.losses[-1]
                metrics.wall_s = time.perf_counter() - start
                if on_step is not None:
                    on_step(PretrainLog(metrics.steps, stage.name, metrics.losses[-1],
                                        {g["name"]: g["lr"] for g in opt.param_groups}, metrics.samples,
                                        metrics.wall_s))
                stop = state_path is not None and metrics.steps < last and preempt.requested()
                if state_path is not None and (stop or checkpoint_every and metrics.steps % checkpoint_every == 0):
                    _save_state(state_path, model, opt, metrics, heads, fingerprint)
                if stop:  # SIGTERM (preempted): the state of this update is saved; the rerun resumes it
                    preempt.stop(f"pretraining state saved in {state_path / STATE_FILE} after update "
                                 f"{metrics.steps} of {total}")
    finally:
        model.train(was_training)
    metrics.wall_s = time.perf_counter() - start
    if state_path is not None:
        _save_state(state_path, model, opt, metrics, heads, fingerprint)
    return metrics


def summarize(metrics: PretrainMetrics, window: int = 25) -> dict[str, Any]:
    """Loss at the start and end of the run (means over `window` updates) for logging; NaN at the
    start of a run continued from weights alone (seed_state)."""
    head = metrics.losses[:window] or [float("nan")]
    tail = metrics.losses[-window:] or [float("nan")]
    return {"steps": metrics.steps, "samples": metrics.samples, "wall_s": round(metrics.wall_s, 1),
            "loss_first": sum(head) / len(head), "loss_last": sum(tail) / len(tail),
            "stage_final_loss": dict(metrics.stage_final_loss)}
