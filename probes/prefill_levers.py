"""What the two prefill levers left by issue 39 would buy, and what they would change.

An evaluation batch is left-padded to its longest prompt, and every prompt starts with the same
system turn and template. Both are work that the answers do not need, but removing it changes
the shapes the kernels see (the Gated DeltaNet chunks, the GEMMs' rows), hence float summation
order and possibly greedy answers. This probe measures, on the released twin and the default's
batch size, one thread, CPU-seconds (the variants interleaved, medians):

* **sorted**: each benchmark's records batched in order of prompt length (answers put back in
  record order): the padding the batches carry, measured, and how many generations change;
* **no system turn**: the prompts without the system turn, a cost proxy only (its answers are
  not the protocol's): what computing the shared prefix once would save at most.

    python probes/prefill_levers.py [--benchmarks gqa mmbench] [--n 200] [--repeats 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import ltopd.models.backbone as backbone_module
from ltopd.bench.evaluate import clean
from ltopd.bench.scoring import score
from ltopd.bench.suites import SUITES, synthetic_records
from ltopd.models.inference import predict_settings
from ltopd.models.loading import load_backbone
from ltopd.models.prompt import SYSTEM_PROMPT, extract_answer, render_prompt

SETTINGS = [(1.0, None), (0.05, "cdpruner")]


def without_system(record) -> str:
    return render_prompt(record).replace(f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n", "", 1)


def run(bb, records, cap, order=None, prompt=render_prompt):
    backbone_module.render_prompt = prompt
    try:
        recs = records if order is None else [records[i] for i in order]
        c0 = time.process_time()
        out = predict_settings(bb, recs, SETTINGS, floor=1, batch_size=40, max_new_tokens=cap)
        took = time.process_time() - c0
    finally:
        backbone_module.render_prompt = render_prompt
    if order is not None:  # back to record order
        back = [0] * len(order)
        for pos, i in enumerate(order):
            back[i] = pos
        out = [[gens[back[i]] for i in range(len(records))] for gens in out]
    return out, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="releases/qwen35-tiny")
    ap.add_argument("--benchmarks", nargs="+", default=["gqa", "mmbench"])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    bb = load_backbone(args.model)
    system = f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
    prefix = len(bb.tokenizer(system, add_special_tokens=False)["input_ids"])
    print(f"{args.model}, batch 40, one thread, settings full + CDPruner 0.05; the system turn is {prefix} tokens")
    print("| benchmark | questions | padding (as is) | padding (sorted) | CPU-s as is | sorted | no system turn "
          "| answers changed by sorting | score as is -> sorted (full, 5%) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.benchmarks:
        records = synthetic_records(name, args.n, 0, {"image_size": 256})
        lengths = [len(bb.encode([r]).inputs["input_ids"][0]) for r in records]
        order = sorted(range(len(records)), key=lambda i: lengths[i])

        def padding(seq):
            batches = [seq[s:s + 40] for s in range(0, len(seq), 40)]
            return 1 - sum(sum(b) for b in batches) / sum(max(b) * len(b) for b in batches)

        cap = SUITES[name].generation_cap
        run(bb, records[:40], cap)  # warm-up: the first call's allocations and the patch table's check
        times = {"as is": [], "sorted": [], "no system": []}
        for _ in range(args.repeats):
            base, t = run(bb, records, cap)
            times["as is"].append(t)
            moved, t = run(bb, records, cap, order)
            times["sorted"].append(t)
            times["no system"].append(run(bb, records, cap, prompt=without_system)[1])
        # the answers (a row's text past its closing tag is the batch's padding, which sorting changes)
        changed = sum(extract_answer(a) != extract_answer(b) for ga, gb in zip(base, moved) for a, b in zip(ga, gb))
        # (full, 5%) scores of the two orders
        scores = [[score(name, [{**r, "prediction": clean(g)} for r, g in zip(records, setting)])["score"]
                   for setting in gens] for gens in (base, moved)]
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"| {name} | {len(records)} | {padding(lengths):.1%} | {padding([lengths[i] for i in order]):.1%} "
              f"| {med['as is']:.2f} | {med['sorted']:.2f} ({med['sorted'] / med['as is']:.2f}x) "
              f"| {med['no system']:.2f} ({med['no system'] / med['as is']:.2f}x) "
              f"| {changed} of {2 * len(records)} | {scores[0][0]:.2f} -> {scores[1][0]:.2f}, "
              f"{scores[0][1]:.2f} -> {scores[1][1]:.2f} |")


if __name__ == "__main__":
    main()
