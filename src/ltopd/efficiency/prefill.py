"""Measured prefill cost of every Table 2 row: the x axis of the Pareto figure (ltopd.report.pareto).

Appendix E's questions and request path (ltopd.efficiency.latency), the prefill alone: a timed
request runs from prepared CPU tensors through transfer, vision encoding, token selection and one
language-model forward that fills the KV cache (logits of the last position only). Decoding is
left out: Table 5 times it with the prefill; here the cost axis is the prefill's, and the decode
cost per token follows the KV cache, which is measured beside it.

* Clock: on the CPU the process's CPU time (``time.process_time``: other processes sharing the
  cores do not inflate it; with ``torch_threads`` 1 it is the computation's own time); on a GPU
  wall time between synchronisations.
* Each distinct computation (a :class:`CostPoint`) is measured once: ``repeats`` timed prefills
  per question after ``warmup`` untimed ones; mean over repetitions, then over questions.
* Rows that run the same computation share it: a trained student has its selector's token count
  at its budget and the base architecture, so its prefill costs what the selector's costs (the row
  says whose cost it carries). A method whose inference runs a student module of its own
  (LLaVA-Mini's pre-fusion and compressor, the learnable merge: :data:`MODULES`) is measured with
  that module attached to the base weights, one module at a time: the computation does not depend
  on the weights' values, so no trained student is needed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from ltopd.efficiency.latency import (
    MODULES,
    Prepared,
    Protocol,
    cache_bytes,
    module_attached,
    prepare,
    select_questions,
    synchronize,
)
from ltopd.models.backbone import Backbone
from ltopd.models.hook import Selection, choose
from ltopd.selectors import requirements


@dataclass(frozen=True)
class CostPoint:
    """One distinct prefill computation: the kept fraction, the selector that keeps it (None: all
    tokens, or the downsampling control's smaller image), whether the image is resized to the
    budget instead, and the method's own inference module (None: the base architecture)."""

    ratio: float
    selector: str | None
    resized: bool = False
    module: str | None = None

    def __post_init__(self) -> None:
        if self.module is not None and self.module not in MODULES:
            raise ValueError(f"inference module {self.module!r}; known: {sorted(MODULES)}")


def cost_point(method: str, budget: float, train_selector: str | None) -> CostPoint:
    """The computation a Table 2 row of ``method`` at ``budget`` runs at inference."""
    from ltopd.catalog import METHODS, eval_setting

    ratio, selector = eval_setting(method, budget, train_selector)
    return CostPoint(ratio, selector if ratio < 1 else None, METHODS[method].kind == "resize",
                     method if method in MODULES else None)  # a method named as the module it runs


def _clock(device: torch.device) -> Callable[[], float]:
    return time.perf_counter if device.type == "cuda" else time.process_time


def clock_name(device: torch.device) -> str:
    return "wall (perf_counter, synchronised)" if device.type == "cuda" else "process CPU time (process_time)"


def prefill(backbone: Backbone, prepared: Prepared, point: CostPoint, floor: int,
            seed: int = 0) -> tuple[Any, Any, Selection, float]:
    """One timed prefill from CPU tensors: (the model's output, the pruned sequence, the
    selection, seconds on the device's clock)."""
    model, ops = backbone.model, backbone.ops
    device = model.device
    clock = _clock(device)
    synchronize(device)
    start = clock()
    inputs = {k: v.to(device, non_blocking=True) for k, v in prepared.batch.inputs.items()}
    batch = replace(prepared.batch, inputs=inputs)
    with torch.no_grad():
        features = ops.image_features(model, inputs)
        if point.ratio >= 1.0 or point.selector is None:
            selection = Selection.full([f.shape[0] for f in features])
        else:
            needs = requirements(point.selector)
            selection = choose(backbone.selection_inputs(batch, features, needs, seed), point.ratio,
                               point.selector, floor)
        out, pruned = backbone.forward(batch, selection, features=features, use_cache=True, logits_to_keep=1)
    synchronize(device)
    return out, pruned, selection, clock() - start


@dataclass
class PointCost:
    point: CostPoint
    questions: int
    prefill_ms: float  # mean over questions of the per-question mean over repetitions
    prefill_sd_ms: float  # across questions
    per_question_ms: list[float]
    visual_tokens: float
    kept_tokens: float
    prefill_tokens: float
    kv_bytes: float
    state_bytes: float

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "point"}
        return {**self.point.__dict__, **d}


def _mean(xs: Sequence[float]) -> float:
    return float(statistics.fmean(xs))


def _measure_one(backbone: Backbone, prepared: Sequence[Prepared], point: CostPoint, protocol: Protocol,
                 floor: int, seed: int, repeats: int) -> PointCost:
    for p in prepared[:1] * protocol.warmup:  # untimed: lazy init, allocator, kernel selection
        prefill(backbone, p, point, floor, seed)
    per_question, tokens = [], []
    for p in prepared:
        times = []
        for _ in range(repeats):
            out, pruned, selection, seconds = prefill(backbone, p, point, floor, seed)
            times.append(seconds * 1e3)
        kv, state = cache_bytes(out.past_key_values)
        tokens.append((sum(selection.n_tokens), sum(int(k.numel()) for k in selection.kept),
                       int(pruned.attention_mask.sum()), kv, state))
        per_question.append(_mean(times))
    cols = list(zip(*tokens))
    return PointCost(point, len(prepared), _mean(per_question),
                     statistics.stdev(per_question) if len(per_question) > 1 else 0.0, per_question,
                     *[_mean(c) for c in cols])


def measure(backbone: Backbone, records: Sequence[Mapping[str, Any]], points: Sequence[CostPoint],
            protocol: Protocol, *, floor: int, repeats: int, seed: int = 0,
            sections: Mapping[str, Any] | None = None, progress: Any = None) -> list[PointCost]:
    """The prefill cost of each distinct point, in the order given, on Appendix E's questions of
    ``records``. The points with a module are measured after the others, each module's with it
    attached to ``backbone`` and taken off after; ``sections``: the profile's sections the modules
    read (``llava_mini``, ``learnable_merge``)."""
    from ltopd.models.downsample import downsampled

    backbone.model.eval()
    questions = select_questions(records, backbone.tokenizer, protocol.min_answer_tokens, protocol.questions)
    encoded: dict[tuple[bool, float], list[Prepared]] = {}

    def inputs(point: CostPoint) -> list[Prepared]:
        # the downsampling control encodes each budget's smaller images; every other point the full ones
        key = (point.resized, point.ratio if point.resized else 1.0)
        if key not in encoded:
            bb = downsampled(backbone, point.ratio, floor) if point.resized else backbone
            encoded[key] = [prepare(bb, r, 1) for r in questions]  # (a one-token reference: unused here)
        return encoded[key]

    unique = list(dict.fromkeys(points))
    modules = list(dict.fromkeys(p.module for p in unique))  # None (the base architecture) first when it is there
    modules.sort(key=lambda m: m is not None)
    results: dict[CostPoint, PointCost] = {}
    for module in modules:
        with module_attached(backbone, module, sections, seed):
            for point in (p for p in unique if p.module == module):
                results[point] = _measure_one(backbone, inputs(point), point, protocol, floor, seed, repeats)
                if progress:
                    progress(point, len(results), len(unique))
    return [results[p] for p in unique]
