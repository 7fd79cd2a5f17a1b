"""Where an evaluation's CPU time goes, per question: image preprocessing (the HF image
processor), the vision tower, selection, and generation (of which the Gated DeltaNet layers'
kernels), with transformers' reference kernels and with ltopd.models.delta_rule's side by side:

    python benchmarks/eval_breakdown.py [--model releases/qwen35-tiny] [--benchmark gqa] [--n 160]

One thread; CPU-seconds (robust on shared cores). The phases run exactly as
ltopd.models.inference.predict_settings runs them, batch by batch; the first batch is a warm-up.
Each batch runs once per kernel set, one after the other (an A/B on the same inputs, so that
the load on shared cores falls on both alike); both give the same answers (checked here).
The last column is the share of the FLOP-bound rate: the FLOPs per question (torch's
FlopCounterMode on the warm-up batch, reference kernels) over this core's float32 GEMM rate, as
benchmarks/pipeline_time.py --flops counts them.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers.models.qwen3_5 import modeling_qwen3_5

from ltopd.bench.suites import SUITES, synthetic_records
from ltopd.models import delta_rule
from ltopd.models.hook import choose
from ltopd.models.loading import load_backbone
from ltopd.selectors import requirements
from pipeline_time import gemm_flops

KERNELS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")  # what each layer calls
KERNEL_SETS = {"reference": False, "delta_rule": True}  # label -> delta_rule.install(enabled=...)
PHASES = ("preprocess", "vision", "selection", "generate")


def timed(totals: dict[str, float], key: str, fn: Callable) -> Callable:
    def wrapper(*args, **kwargs):
        c0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[key] += time.process_time() - c0
    return wrapper


def run_batch(bb, chunk, ratio: float, start: int, cap: int, totals: dict[str, float]) -> torch.Tensor:
    """One batch through every phase, CPU-seconds added to `totals`; the generated ids."""
    c0 = time.process_time()
    batch = bb.encode(chunk)
    c1 = time.process_time()
    features = bb.image_features(batch)
    c2 = time.process_time()
    if ratio < 1:
        inputs = bb.selection_inputs(batch, features, requirements("cdpruner"), start)
        selection = choose(inputs, ratio, "cdpruner", 1)
    else:
        selection = bb.full_selection(batch)
    c3 = time.process_time()
    ids = bb.generate(batch, selection, features, do_sample=False, max_new_tokens=cap)
    c4 = time.process_time()
    for key, dt in zip(PHASES, (c1 - c0, c2 - c1, c3 - c2, c4 - c3)):
        totals[key] += dt
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="releases/qwen35-tiny")
    ap.add_argument("--benchmark", default="gqa")
    ap.add_argument("--n", type=int, default=160)
    ap.add_argument("--batch-size", type=int, default=40)
    ap.add_argument("--ratios", type=float, nargs="+", default=[1.0, 0.05])
    args = ap.parse_args()
    torch.set_num_threads(1)
    bb = load_backbone(args.model)
    bb.model.eval()
    bb.model.requires_grad_(False)  # FlopCounterMode's module hooks trip over leaf weights passed as arguments
    records = synthetic_records(args.benchmark, args.n + args.batch_size, 0, {"image_size": 256})
    cap = SUITES[args.benchmark].generation_cap
    peak = gemm_flops()
    print(f"{args.model}, {args.benchmark}, {args.n} questions, batch {args.batch_size}, one thread; "
          f"CPU-ms per question; GEMM rate of this core {peak / 1e9:.1f} GFLOP/s")
    print("| setting | kernels | preprocess | vision tower | selection | generate | of which DeltaNet kernels "
          "| total | q/CPU-s | % of FLOP bound |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    originals = {k: getattr(modeling_qwen3_5, k) for k in KERNELS}
    for ratio in args.ratios:
        totals: dict[str, dict[str, float]] = {label: defaultdict(float) for label in KERNEL_SETS}
        flops = 0.0
        try:
            with torch.no_grad():
                for start in range(0, len(records), args.batch_size):
                    chunk = records[start:start + args.batch_size]
                    answers = {}
                    for label, enabled in KERNEL_SETS.items():
                        delta_rule.install(bb.model, enabled=enabled)
                        for k, fn in originals.items():
                            setattr(modeling_qwen3_5, k, timed(totals[label], "kernels", fn))
                        if start == 0 and not enabled:  # the warm-up batch: count the FLOPs too
                            with FlopCounterMode(display=False) as counter:
                                answers[label] = run_batch(bb, chunk, ratio, start, cap, defaultdict(float))
                            flops = counter.get_total_flops() / len(chunk)
                        answers[label] = run_batch(bb, chunk, ratio, start, cap, totals[label])
                        if start == 0:  # the first batch warmed up: count from here
                            totals[label].clear()
                    ref, fast = answers.values()
                    if not torch.equal(ref, fast):
                        raise SystemExit(f"the kernel sets answer differently in the batch at {start}")
        finally:
            for k, fn in originals.items():
                setattr(modeling_qwen3_5, k, fn)
            delta_rule.install(bb.model)
        name = "full tokens" if ratio >= 1 else f"CDPruner {ratio:g}"
        for label, t in totals.items():
            total = sum(t[k] for k in PHASES)
            ms = {k: 1000 * v / args.n for k, v in t.items()}
            rate = args.n / total
            print(f"| {name} | {label} | {ms['preprocess']:.2f} | {ms['vision']:.2f} | {ms['selection']:.2f} | "
                  f"{ms['generate']:.2f} | {ms['kernels']:.2f} | {1000 * total / args.n:.2f} | {rate:.1f} | "
                  f"{100 * rate * flops / peak:.1f}% |")


if __name__ == "__main__":
    main()
