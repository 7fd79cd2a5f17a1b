"""Pretrain one tiny twin as a profile describes it, then probe it on a held-out split.

The probe answers the question the rest of the pipeline depends on: does the twin read the
image (full-token accuracy above the question-only baseline), and does keeping 5% of the visual
tokens hurt it?
"""
from __future__ import annotations

from typing import Any, Callable

from ltopd.data.sources import world_config
from ltopd.data.world import answer_prior_baseline, generate_task_item
from ltopd.models.backbone import Backbone
from ltopd.models.inference import answer_accuracy, predict
from ltopd.models.pretrain import PretrainConfig, Stage, StepLog, pretrain, summarize, task_stream
from ltopd.models.twins import twin_backbone

# Item seeds of the twins' own splits: outside LT-14K's (20260824/20260830) and the benchmarks'
# (>= 2**40) seed spaces, and apart from each other.
PRETRAIN_SEED_BASE = 5_000_000
HELDOUT_SEED = 6_000_000


def pretrain_config(pt: dict[str, Any], lr_scale: float = 1.0) -> PretrainConfig:
    """The profile's stages; `lr_scale` is the twin's own factor (families differ in how large a
    step they tolerate: docs/pretraining.md)."""
    stages = tuple(
        Stage(s["name"], s["steps"], lr_lm=lr_scale * s.get("lr_lm", s["lr"]),
              lr_merger=lr_scale * s.get("lr_merger", s["lr"]), lr_vision=lr_scale * s.get("lr_vision", s["lr"]))
        for s in pt["stages"])
    return PretrainConfig(stages=stages, batch_size=pt["batch_size"], seed=pt["seed"], warmup_steps=pt["warmup_steps"])


def stage_streams(pt: dict[str, Any], world: dict[str, Any]) -> dict[str, Any]:
    """One deterministic item stream per stage, each with its own world overrides and seed."""
    return {s["name"]: task_stream(s["tasks"], PRETRAIN_SEED_BASE + pt["seed"] * 100 + i,
                                   world_config({**world, **s.get("world", {})}),
                                   styles=[None if x == "plain" else x for x in s.get("styles", ["plain"])])
            for i, s in enumerate(pt["stages"])}


def heldout_records(pt: dict[str, Any], world: dict[str, Any]) -> list[dict[str, Any]]:
    cfg = world_config({**world, **pt["heldout"].get("world", {})})
    tasks, n = pt["heldout"]["tasks"], pt["heldout"]["n"]
    return [generate_task_item(tasks[i % len(tasks)], i // len(tasks), HELDOUT_SEED, cfg) for i in range(n)]


def probe(backbone: Backbone, records: list[dict[str, Any]], heldout: dict[str, Any], floor: int,
          progress: bool = True) -> dict[str, float]:
    """Accuracy at full tokens and at the held-out ratio for each selector, plus the
    question-only baseline of the same records."""
    out = {"question_only": answer_prior_baseline(records)}
    runs = [("full", 1.0, "cdpruner")] + [(s, heldout["ratio"], s) for s in heldout["selectors"]]
    for name, ratio, selector in runs:
        gens = predict(backbone, records, ratio, selector, floor, heldout["batch_size"], max_new_tokens=16,
                       progress=progress, desc=f"probe {name}")
        tag = "full" if ratio >= 1 else f"{name}-{ratio:g}"
        out.update({f"{tag}/{k}": v for k, v in answer_accuracy(records, gens).items()})
    return out


def run(twin: str, tokenizer, pt: dict[str, Any], world: dict[str, Any], floor: int, lr_scale: float = 1.0,
        on_step: Callable[[StepLog], None] | None = None, progress: bool = True) -> tuple[Backbone, dict[str, Any]]:
    """Build the twin from its config, pretrain it, probe it; return (backbone, metrics)."""
    backbone = twin_backbone(twin, tokenizer, seed=pt["seed"])
    curve = pretrain(backbone, stage_streams(pt, world), pretrain_config(pt, lr_scale), on_step=on_step)
    metrics = {**summarize(curve), **probe(backbone, heldout_records(pt, world), pt["heldout"], floor, progress)}
    metrics["parameters"] = sum(p.numel() for p in backbone.model.parameters())
    return backbone, metrics
