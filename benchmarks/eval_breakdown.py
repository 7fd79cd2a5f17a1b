"""Where an evaluation's CPU time goes, per question: image preprocessing (the HF image
processor), the vision tower, selection, and generation (of which the Gated DeltaNet layers'
reference PyTorch kernels, which run where flash-linear-attention has no CPU kernel):

    python benchmarks/eval_breakdown.py [--model releases/qwen35-tiny] [--benchmark gqa] [--n 160]

One thread; CPU-seconds (robust on shared cores). The phases run exactly as
ltopd.models.inference.predict_settings runs them, batch by batch; the first batch is a warm-up.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable

import torch
from transformers.models.qwen3_5 import modeling_qwen3_5

from ltopd.bench.suites import SUITES, synthetic_records
from ltopd.models.hook import choose
from ltopd.models.loading import load_backbone
from ltopd.selectors import requirements

KERNELS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")


def timed(totals: dict[str, float], key: str, fn: Callable) -> Callable:
    def wrapper(*args, **kwargs):
        c0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[key] += time.process_time() - c0
    return wrapper


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
    records = synthetic_records(args.benchmark, args.n + args.batch_size, 0, {"image_size": 256})
    cap = SUITES[args.benchmark].generation_cap
    print(f"{args.model}, {args.benchmark}, {args.n} questions, batch {args.batch_size}, one thread; "
          "CPU-ms per question")
    print("| setting | preprocess | vision tower | selection | generate | of which DeltaNet kernels | total "
          "| q/CPU-s |")
    print("|---|---|---|---|---|---|---|---|")
    for ratio in args.ratios:
        totals: dict[str, float] = defaultdict(float)
        originals = {k: getattr(modeling_qwen3_5, k) for k in KERNELS if hasattr(modeling_qwen3_5, k)}
        for k, fn in originals.items():
            setattr(modeling_qwen3_5, k, timed(totals, "kernels", fn))
        try:
            with torch.no_grad():
                for start in range(0, len(records), args.batch_size):
                    if start == args.batch_size:  # the first batch warmed up: count from here
                        totals.clear()
                    chunk = records[start:start + args.batch_size]
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
                    bb.generate(batch, selection, features, do_sample=False, max_new_tokens=cap)
                    c4 = time.process_time()
                    for key, dt in zip(("preprocess", "vision", "selection", "generate"),
                                       (c1 - c0, c2 - c1, c3 - c2, c4 - c3)):
                        totals[key] += dt
        finally:
            for k, fn in originals.items():
                setattr(modeling_qwen3_5, k, fn)
        total = sum(totals[k] for k in ("preprocess", "vision", "selection", "generate"))
        ms = {k: 1000 * v / args.n for k, v in totals.items()}
        name = "full tokens" if ratio >= 1 else f"CDPruner {ratio:g}"
        print(f"| {name} | {ms['preprocess']:.2f} | {ms['vision']:.2f} | {ms['selection']:.2f} | "
              f"{ms['generate']:.2f} | {ms['kernels']:.2f} | {1000 * total / args.n:.2f} | {args.n / total:.1f} |")


if __name__ == "__main__":
    main()
