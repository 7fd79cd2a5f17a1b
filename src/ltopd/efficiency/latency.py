"""The measured protocol of Appendix E, on any backbone the pipeline loads (twins or checkpoints).

* Questions: the TextVQA records whose most frequent reference answer (lower-cased, whitespace
  collapsed) has at least ``min_answer_tokens`` tokens under the backbone's own tokenizer.
* Reference: per question, a ``ref_tokens``-token continuation conditioned on its ground truth
  (the answer's tokens, cycled; stop tokens left out so nothing ends early). It is shared by every
  method, so all of them decode the same tokens: one prefill + ``ref_tokens - 1`` incremental
  forward passes with the KV cache, the reference forced by a logits processor inside the
  library's own generate loop (the reduction hook's path, as in evaluation).
* A request runs from prepared CPU tensors to decoded text: transfer, vision encoding, token
  selection, prefill, reference decoding, synchronisation, detokenisation. Batch 1; each question
  ``repeats`` times per method after ``warmup`` untimed requests; mean over repetitions within a
  question, then over questions.
* Outside the timed requests, one extra prefill per question and method records the prompt's
  token counts, the cache it leaves (KV bytes of full-attention layers and the constant
  linear-attention state, read from the cache object) and, where torch.profiler counts them, the
  prefill's FLOPs (matmul-type kernels only; see ``profiled_flops``).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor
from transformers import LogitsProcessor, LogitsProcessorList

from ltopd.models.backbone import Backbone, EncodedBatch
from ltopd.models.hook import Selection, choose
from ltopd.selectors import requirements


@dataclass(frozen=True)
class Protocol:
    """Appendix E's settings (the paper's values are the defaults; ``questions`` None = all)."""

    repeats: int = 5
    ref_tokens: int = 128
    min_answer_tokens: int = 6
    questions: int | None = None
    warmup: int = 1

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.ref_tokens < 2 or self.warmup < 0 or self.min_answer_tokens < 1:
            raise ValueError(f"invalid protocol {self}")
        if self.questions is not None and self.questions < 1:
            raise ValueError(f"questions must be >= 1 or None, got {self.questions}")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Protocol:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in cfg.items() if k in names})


# Methods whose inference runs a student module of their own (ltopd.models.addons): measured with
# that module attached to the base weights (the computation does not depend on the weights' values,
# so no trained student is needed).
MODULES = ("llava_mini", "learnable_merge")


@dataclass(frozen=True)
class Method:
    """A row of Table 5: a name, the kept fraction and the selector that keeps it (unused at ratio
    1; ltopd.pipeline.efficiency_jobs.methods gives each row the profile's), and the student module
    its inference runs (of MODULES; None: the base architecture)."""

    name: str
    ratio: float
    selector: str | None
    module: str | None = None

    def __post_init__(self) -> None:
        if self.module is not None and self.module not in MODULES:
            raise ValueError(f"inference module {self.module!r}; known: {list(MODULES)}")


@contextmanager
def module_attached(backbone: Backbone, module: str | None, sections: Mapping[str, Any] | None,
                    seed: int = 0) -> Iterator[None]:
    """``backbone`` with the student module ``module`` attached for the duration (from the
    profile's ``sections``; a random init drawn from ``seed``), taken off after; None: as it is."""
    if module is None:
        yield
        return
    from ltopd.models.addons import addon, attached

    if attached(backbone.model) is not None:
        raise ValueError(f"measuring {module!r}: the backbone carries a student module already")
    impl = addon(module)
    section = dict((sections or {}).get(module) or {})
    with torch.random.fork_rng():  # an init that draws leaves the global RNG alone
        torch.manual_seed(seed)
        impl.attach_section(backbone.model, section)
    try:
        yield
    finally:
        impl.remove(backbone.model)


def _meta(record: Mapping[str, Any]) -> dict[str, Any]:
    meta = record.get("meta") or {}
    return json.loads(meta) if isinstance(meta, str) else dict(meta)


def most_frequent_answer(record: Mapping[str, Any]) -> str:
    """The most frequent of the reference answers after lower-casing and collapsing whitespace
    (first seen wins a tie); the record's answer when it lists none."""
    answers = _meta(record).get("answers") or record.get("answers") or [record["answer"]]
    return Counter(" ".join(str(a).lower().split()) for a in answers).most_common(1)[0][0]


def answer_tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def select_questions(records: Sequence[Mapping[str, Any]], tokenizer: Any, min_tokens: int,
                     limit: int | None = None) -> list[Mapping[str, Any]]:
    """Records (in order) whose most frequent answer has >= ``min_tokens`` tokens, at most ``limit``."""
    chosen = [r for r in records if answer_tokens(tokenizer, most_frequent_answer(r)) >= min_tokens]
    if not chosen:
        raise ValueError(f"no question's most frequent answer has >= {min_tokens} tokens "
                         f"(of {len(records)} records); lower efficiency.min_answer_tokens")
    return chosen[:limit] if limit else chosen


def reference_ids(tokenizer: Any, record: Mapping[str, Any], n: int, banned: Sequence[int] = ()) -> list[int]:
    """``n`` token ids conditioned on the ground truth: the answer's tokens (and a space), cycled."""
    ids = [t for t in tokenizer(most_frequent_answer(record) + " ", add_special_tokens=False)["input_ids"]
           if t not in set(banned)]
    if not ids:
        raise ValueError(f"{record.get('id')}: the answer has no usable tokens for a reference")
    return [ids[i % len(ids)] for i in range(n)]


class ReplayReference(LogitsProcessor):
    """Logits processor forcing the reference: step t keeps only ``ids[t]`` (greedy picks it)."""

    def __init__(self, ids: Sequence[int]) -> None:
        self.ids = list(ids)
        self.step = 0

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.ids[min(self.step, len(self.ids) - 1)]] = 0.0
        self.step += 1
        return forced


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Prepared:
    """One question's model inputs on the CPU (what the timed request starts from)."""

    record: Mapping[str, Any]
    batch: EncodedBatch
    reference: list[int]


def prepare(backbone: Backbone, record: Mapping[str, Any], ref_tokens: int) -> Prepared:
    batch = backbone.encode([record])
    cpu = {k: v.detach().cpu() for k, v in batch.inputs.items()}
    if backbone.model.device.type == "cuda":
        cpu = {k: v.pin_memory() for k, v in cpu.items()}
    ref = reference_ids(backbone.tokenizer, record, ref_tokens, banned=backbone.stop_token_ids())
    return Prepared(record, replace(batch, inputs=cpu, response_mask=batch.response_mask.cpu(),
                                    labels=batch.labels.cpu()), ref)


def _select(backbone: Backbone, batch: EncodedBatch, features: Sequence[Tensor], method: Method, floor: int,
            seed: int) -> Selection:
    if method.ratio >= 1.0:
        return Selection.full([f.shape[0] for f in features])
    needs = requirements(method.selector)
    return choose(backbone.selection_inputs(batch, features, needs, seed), method.ratio, method.selector, floor)


def request(backbone: Backbone, prepared: Prepared, method: Method, floor: int, seed: int = 0) -> tuple[str, float]:
    """One timed request: (decoded text, seconds) from CPU tensors to text. The reduced context
    goes through the backbone's hook path (Backbone.generate), so a student module attached to
    it (Method.module) runs as in evaluation."""
    model, ops = backbone.model, backbone.ops
    device = model.device
    synchronize(device)
    start = time.perf_counter()
    inputs = {k: v.to(device, non_blocking=True) for k, v in prepared.batch.inputs.items()}
    batch = replace(prepared.batch, inputs=inputs)
    with torch.no_grad():
        features = ops.image_features(model, inputs)
        selection = _select(backbone, batch, features, method, floor, seed)
        n = len(prepared.reference)
        ids = backbone.generate(batch, selection, features, do_sample=False, max_new_tokens=n, min_new_tokens=n,
                                logits_processor=LogitsProcessorList([ReplayReference(prepared.reference)]),
                                eos_token_id=model.generation_config.eos_token_id,
                                pad_token_id=backbone.tokenizer.pad_token_id)
    text = backbone.tokenizer.decode(ids[0].cpu(), skip_special_tokens=False)
    synchronize(device)
    return text, time.perf_counter() - start


def cache_bytes(cache: Any) -> tuple[int, int]:
    """(KV bytes of attention layers, bytes of linear-attention states) held by a transformers cache."""
    kv = state = 0
    for layer in getattr(cache, "layers", None) or []:
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, Tensor):
                kv += t.numel() * t.element_size()
        for name in ("conv_states", "recurrent_states"):
            d = getattr(layer, name, None)
            if isinstance(d, Mapping):
                state += sum(t.numel() * t.element_size() for t in d.values() if isinstance(t, Tensor))
    if not getattr(cache, "layers", None) and isinstance(cache, (tuple, list)):  # legacy tuples
        kv = sum(t.numel() * t.element_size() for layer in cache for t in layer if isinstance(t, Tensor))
    return kv, state


def profiled_flops(fn: Any) -> float | None:
    """FLOPs torch.profiler attributes to ``fn()`` (it counts matmul/conv-type kernels only, and on
    some builds none), or None when it reports nothing."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError:  # pragma: no cover
        return None
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities, with_flops=True) as prof:
        fn()
    total = sum(e.flops or 0 for e in prof.key_averages())
    return float(total) if total else None


@dataclass
class PrefillStats:
    text_tokens: int
    visual_tokens: int
    kept_tokens: int
    prefill_tokens: int
    kv_bytes: int
    state_bytes: int
    profiler_flops: float | None


def prefill_stats(backbone: Backbone, prepared: Prepared, method: Method, floor: int, seed: int = 0,
                  profile_flops: bool = True) -> PrefillStats:
    """Token counts, cache size and profiled FLOPs of the language model's prefill (untimed)."""
    model, ops = backbone.model, backbone.ops
    inputs = {k: v.to(model.device) for k, v in prepared.batch.inputs.items()}
    batch = replace(prepared.batch, inputs=inputs)
    with torch.no_grad():
        features = ops.image_features(model, inputs)
        selection = _select(backbone, batch, features, method, floor, seed)

        def run() -> Any:
            return backbone.forward(batch, selection, features=features, use_cache=True, logits_to_keep=1)

        out, pruned = run()
        flops = profiled_flops(run) if profile_flops else None
    kv, state = cache_bytes(out.past_key_values)
    visual = sum(selection.n_tokens)
    kept = sum(int(k.numel()) for k in selection.kept)
    prefill = int(pruned.attention_mask.sum())
    return PrefillStats(prefill - kept, visual, kept, prefill, kv, state, flops)


@dataclass
class MethodResult:
    method: Method
    questions: int
    latency_ms: float  # mean over questions of the per-question mean over repetitions
    latency_sd_ms: float  # across questions
    per_question_ms: list[float]
    per_question_tokens: list[int]  # prefill tokens of each question (for the quadratic FLOPs term)
    text_tokens: float
    visual_tokens: float
    kept_tokens: float
    prefill_tokens: float
    kv_bytes: float
    state_bytes: float
    profiler_flops: float | None
    sample_text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("method", "extra")}
        return {"method": self.method.name, "ratio": self.method.ratio, "selector": self.method.selector,
                "module": self.method.module, **d, **self.extra}


def _mean(xs: Sequence[float]) -> float:
    return float(statistics.fmean(xs)) if xs else float("nan")


def measure(backbone: Backbone, records: Sequence[Mapping[str, Any]], methods: Sequence[Method],
            protocol: Protocol = Protocol(), *, floor: int, seed: int = 0, profile_flops: bool = True,
            progress: Any = None, sections: Mapping[str, Any] | None = None) -> list[MethodResult]:
    """Run the protocol for every method on the qualifying questions of ``records``; a method with
    a student module runs with it attached (from the profile's ``sections``), taken off after."""
    backbone.model.eval()
    questions = select_questions(records, backbone.tokenizer, protocol.min_answer_tokens, protocol.questions)
    prepared = [prepare(backbone, r, protocol.ref_tokens) for r in questions]
    results = []
    for method in methods:
        with module_attached(backbone, method.module, sections, seed):
            results.append(_measure_method(backbone, prepared, method, protocol, floor, seed, profile_flops,
                                           progress))
    return results


def _measure_method(backbone: Backbone, prepared: Sequence[Prepared], method: Method, protocol: Protocol,
                    floor: int, seed: int, profile_flops: bool, progress: Any) -> MethodResult:
    for p in prepared[:1] * protocol.warmup:  # untimed: lazy init, allocator, kernel selection
        request(backbone, p, method, floor, seed)
    per_question, stats, sample = [], [], ""
    for p in prepared:
        times = []
        for _ in range(protocol.repeats):
            text, seconds = request(backbone, p, method, floor, seed)
            times.append(seconds * 1e3)
        sample = sample or text
        per_question.append(_mean(times))
        stats.append(prefill_stats(backbone, p, method, floor, seed, profile_flops))
        if progress:
            progress(method, len(per_question), len(prepared))
    flops = [s.profiler_flops for s in stats]
    return MethodResult(
        method=method, questions=len(prepared), latency_ms=_mean(per_question),
        latency_sd_ms=statistics.stdev(per_question) if len(per_question) > 1 else 0.0,
        per_question_ms=per_question, per_question_tokens=[s.prefill_tokens for s in stats],
        text_tokens=_mean([s.text_tokens for s in stats]), visual_tokens=_mean([s.visual_tokens for s in stats]),
        kept_tokens=_mean([s.kept_tokens for s in stats]), prefill_tokens=_mean([s.prefill_tokens for s in stats]),
        kv_bytes=_mean([s.kv_bytes for s in stats]), state_bytes=_mean([s.state_bytes for s in stats]),
        profiler_flops=_mean(flops) if all(f is not None for f in flops) else None,
        sample_text=sample)
