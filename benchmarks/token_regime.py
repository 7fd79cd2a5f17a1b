"""What more visual tokens per image would cost: the qwen35-tiny twin at its 256 px canvas (64
merged tokens, 5% keeps 4) beside the same twin at 512 px (256 tokens, 5% keeps 13; the paper
keeps about 37). Measured in CPU-seconds on one thread (robust to other jobs on the machine):

    python benchmarks/token_regime.py [--updates 3] [--items 80]

Prints one row per canvas: tokens per image, tokens kept at 5%, CPU-seconds per pretraining
update (a batch of 32 instruction items, the default recipe's mix) and evaluation questions per
CPU-second at full tokens and at CDPruner 5%, all on randomly initialised weights.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import time

import torch

from ltopd.bench.evaluate import evaluate
from ltopd.bench.suites import synthetic_records
from ltopd.catalog import BENCHMARKS
from ltopd.twins import job as twin_job
from ltopd.twins.architectures import TWINS, twin_backbone
from ltopd.twins.corpus import corpus
from ltopd.twins.pretrain import accumulate_loss
from ltopd.twins.tokenizer import build_tokenizer


def measure(twin: str, side: int, tok, updates: int, items: int) -> dict:
    world = {"image_size": side}
    bb = twin_backbone(twin, tok, seed=0)
    pt = {"seed": 0, "stages": [{"name": "mix", "steps": updates, "lr": 1e-3, "bench": list(BENCHMARKS)}]}
    stream = twin_job.stage_sources(pt, world)["mix"](0)
    bb.model.train()
    times = []
    for _ in range(updates + 1):  # the first update pays one-off costs
        batch = list(itertools.islice(stream, 32))
        t = time.process_time()
        accumulate_loss(bb, batch)
        bb.model.zero_grad(set_to_none=True)
        times.append(time.process_time() - t)
    bb.model.eval()
    tokens = (TWINS[twin].image_side // TWINS[twin].patch_size // TWINS[twin].merge_size) ** 2
    row = {"canvas_px": side, "tokens": tokens, "kept_5pct": max(1, math.ceil(0.05 * tokens)),
           "update_cpu_s": sum(times[1:]) / updates}
    records = synthetic_records("gqa", items, 0, world)
    for name, ratio in (("full", 1.0), ("cdp5", 0.05)):
        t = time.process_time()
        evaluate(bb, records, "gqa", ratio, "cdpruner", 1, 40, progress=False)
        row[f"eval_q_per_cpu_s_{name}"] = items / (time.process_time() - t)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--items", type=int, default=80)
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = build_tokenizer(list(corpus({"image_size": 256}, 20, BENCHMARKS)), 2000)
    TWINS["qwen35-tiny-512"] = dataclasses.replace(TWINS["qwen35-tiny"], image_side=512)  # a registry entry
    rows = [measure("qwen35-tiny", 256, tok, args.updates, args.items),
            measure("qwen35-tiny-512", 512, tok, args.updates, args.items)]
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in r.values()) + " |")
    print(f"ratio 512/256 px: update x{rows[1]['update_cpu_s'] / rows[0]['update_cpu_s']:.2f}, "
          f"evaluation (full) x{rows[0]['eval_q_per_cpu_s_full'] / rows[1]['eval_q_per_cpu_s_full']:.2f}")


if __name__ == "__main__":
    main()
