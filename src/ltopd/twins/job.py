"""Pretrain one tiny twin as a profile describes it, then probe it on a held-out split.

The probe answers the question the rest of the pipeline depends on: does the twin read the
image (full-token accuracy above the question-only baseline), and does keeping 5% of the visual
tokens hurt it?
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from ltopd.bench.evidence import restyle
from ltopd.bench.suites.instruct import instruct_stream
from ltopd.data.sources import world_config
from ltopd.data.world import answer_prior_baseline, generate_task_item
from ltopd.models.backbone import Backbone
from ltopd.models.inference import answer_accuracy, predict
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.pretrain import PretrainConfig, PretrainLog, Stage, pretrain, summarize, task_stream

# Item seeds of the twins' own splits: outside LT-14K's (20260824/20260830) and the benchmarks'
# (>= 2**40) seed spaces, and apart from each other.
PRETRAIN_SEED_BASE = 5_000_000
HELDOUT_SEED = 6_000_000


def pretrain_config(pt: dict[str, Any], lr_scale: float = 1.0) -> PretrainConfig:
    """The profile's stages; `lr_scale` is the twin's own factor (families differ in how large a
    step they tolerate: docs/pretraining.md)."""
    stages = tuple(
        Stage(s["name"], s["steps"], lr_lm=lr_scale * s.get("lr_lm", s["lr"]),
              lr_merger=lr_scale * s.get("lr_merger", s["lr"]), lr_vision=lr_scale * s.get("lr_vision", s["lr"]),
              final_lr_ratio=s.get("final_lr_ratio", 1.0), objective=s.get("objective", "answer"),
              fresh_optimizer=s.get("fresh_optimizer", False))
        for s in pt["stages"])
    return PretrainConfig(stages=stages, batch_size=pt["batch_size"], seed=pt["seed"], warmup_steps=pt["warmup_steps"])


def pretrain_recipe(twin: str, pt: dict[str, Any], world: dict[str, Any]) -> dict[str, Any]:
    """What determines the item streams beyond the PretrainConfig (saved with every state)."""
    return {"twin": twin, "stages": pt["stages"], "seed": pt["seed"], "world": world, "tokenizer": pt.get("tokenizer")}


def interleave(sources: list[Callable[[int], Iterator[dict]]], start: int = 0) -> Iterator[dict]:
    """Item i of the mix is item i // k of source i % k (k sources); resumable at any `start`."""
    k = len(sources)
    streams = [src(start // k + (1 if j < start % k else 0)) for j, src in enumerate(sources)]
    for i in itertools.count(start):
        yield next(streams[i % k])


def stage_source(
    stage: dict[str, Any], index: int, pt: dict[str, Any], world: dict[str, Any]
) -> Callable[[int], Iterator[dict]]:
    """The deterministic item stream of stage `index` as a function of its first item's index:
    procedural-world tasks (`tasks`, with the stage's world overrides and wordings), the
    benchmark twins' instruction items (`bench`, ltopd.bench.suites.instruct), or both
    alternating; the twins named in `evidence` answered evidence-first and, with `text_only`,
    every item without its images (ltopd.bench.evidence)."""
    stage_world = {**world, **stage.get("world", {})}
    seed = PRETRAIN_SEED_BASE + pt["seed"] * 100 + index
    styles = [None if x == "plain" else x for x in stage.get("styles", ["plain"])]
    sources: list[Callable[[int], Iterator[dict]]] = []
    if stage.get("tasks"):
        sources.append(lambda start: task_stream(stage["tasks"], seed, world_config(stage_world), start, styles))
    if stage.get("bench"):
        sources.append(lambda start: instruct_stream(stage["bench"], seed, stage_world, start))
    if not sources:
        raise ValueError(f"pretrain stage {stage['name']!r} needs `tasks` or `bench`")
    source = sources[0] if len(sources) == 1 else (lambda start: interleave(sources, start))
    if not stage.get("evidence") and not stage.get("text_only"):
        return source
    return lambda start: restyle(source(start), stage.get("evidence", ()), stage.get("text_only", False))


def stage_sources(pt: dict[str, Any], world: dict[str, Any]) -> dict[str, Callable[[int], Iterator[dict]]]:
    """One resumable stream per stage: start index -> items."""
    return {s["name"]: stage_source(s, i, pt, world) for i, s in enumerate(pt["stages"])}


def heldout_records(pt: dict[str, Any], world: dict[str, Any]) -> list[dict[str, Any]]:
    cfg = world_config({**world, **pt["heldout"].get("world", {})})
    tasks, n = pt["heldout"]["tasks"], pt["heldout"]["n"]
    return [generate_task_item(tasks[i % len(tasks)], i // len(tasks), HELDOUT_SEED, cfg) for i in range(n)]


def probe(backbone: Backbone, records: list[dict[str, Any]], heldout: dict[str, Any], floor: int,
          progress: bool = True) -> dict[str, float]:
    """Accuracy at full tokens and at the held-out ratio for each selector, plus the
    question-only baseline of the same records."""
    out = {"question_only": answer_prior_baseline(records)}
    runs = [("full", 1.0, None)] + [(s, heldout["ratio"], s) for s in heldout["selectors"]]  # None: no selector
    for name, ratio, selector in runs:
        gens = predict(backbone, records, ratio, selector, floor, heldout["batch_size"], max_new_tokens=16,
                       progress=progress, desc=f"probe {name}")
        tag = "full" if ratio >= 1 else f"{name}-{ratio:g}"
        out.update({f"{tag}/{k}": v for k, v in answer_accuracy(records, gens).items()})
    return out


def run(twin: str, tokenizer, pt: dict[str, Any], world: dict[str, Any], floor: int, lr_scale: float = 1.0,
        on_step: Callable[[PretrainLog], None] | None = None, progress: bool = True,
        state_dir: str | None = None, checkpoint_every: int = 0,
        processor_side: int | None = None) -> tuple[Backbone, dict[str, Any]]:
    """Build the twin from its config, pretrain it (resuming from `state_dir` when it holds a
    saved state), probe it; return (backbone, metrics)."""
    backbone = twin_backbone(twin, tokenizer, seed=pt["seed"], processor_side=processor_side)
    curve = pretrain(backbone, stage_sources(pt, world), pretrain_config(pt, lr_scale), on_step=on_step,
                     state_dir=state_dir, checkpoint_every=checkpoint_every, recipe=pretrain_recipe(twin, pt, world))
    metrics = {**summarize(curve), **probe(backbone, heldout_records(pt, world), pt["heldout"], floor, progress)}
    metrics["parameters"] = sum(p.numel() for p in backbone.model.parameters())
    return backbone, metrics
