"""What a twin pretrained on larger canvases would cost: one pretraining update's CPU-seconds at
each canvas side, side by side, and the release recipe's projected cost at each.

    python benchmarks/pretrain_cost.py --sides 256 512 --updates 3

For each side the released twin (`--release`) gets the processor's pixel budget for that canvas
(more merged tokens per image, as the real processors give larger images) and the world rescaled
to it (`WorldConfig.for_size`). Each objective of the release's recipe that sees images is timed
on its own items: `answer` (the eight world tasks of the recipe's `mix` stages) and `dense` (the
vision stage's per-token labels); one update = forward, backward, clip and AdamW step on a batch
of the recipe's size, after one warm-up update, on one torch thread (time.process_time). The
projection weights each stage of the release's recipe by its steps: text-only stages cost the
same at every side (timed once), image stages the measured `answer` or `dense` update; `words`
stages count as `dense`. Ratios between sides of one run are what to read on shared cores.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial
from pathlib import Path

import torch

from ltopd.bench.evidence import text_only as as_text
from ltopd.data.world import WorldConfig
from ltopd.models.loading import load_backbone
from ltopd.models.processor import ImageTextProcessor, build_image_processor
from ltopd.twins.dense_vision import DenseHeads, dense_loss
from ltopd.twins.pretrain import accumulate_loss, task_stream

MIX = ["describe", "color", "shape", "exists", "count", "small_detail", "position", "read"]


def backbone_at(release: str, side: int):
    bb = load_backbone(release)
    bb.processor = ImageTextProcessor(bb.tokenizer, build_image_processor(side))
    bb.model.train()
    return bb


def time_updates(bb, batches: list[list[dict]], loss, heads: torch.nn.Module | None = None) -> float:
    """Mean CPU-seconds of an update (``loss(batch)`` back-propagates; clip, AdamW step, as
    `pretrain` does, heads included) over ``batches[1:]`` (the first warms up)."""
    params = [p for p in bb.model.parameters() if p.requires_grad] + (list(heads.parameters()) if heads else [])
    opt = torch.optim.AdamW(params, lr=1e-5)
    times = []
    for batch in batches:
        t = time.process_time()
        opt.zero_grad(set_to_none=True)
        loss(batch)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        times.append(time.process_time() - t)
    return statistics.mean(times[1:])


def items(tasks: list[str], world: WorldConfig, n: int, text_only: bool = False) -> list[dict]:
    stream = task_stream(tasks, seed=7, cfg=world)
    out = [next(stream) for _ in range(n)]
    return [as_text(r) for r in out] if text_only else out


def batches(records: list[dict], size: int) -> list[list[dict]]:
    return [records[i:i + size] for i in range(0, len(records), size)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default="releases/qwen35-tiny")
    ap.add_argument("--sides", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--updates", type=int, default=3, help="timed updates per objective (after one warm-up)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    manifest = json.loads((Path(args.release) / "manifest.json").read_text())
    recipe = manifest["recipe"]["pretrain"]
    batch = recipe["batch_size"]
    n = batch * (args.updates + 1)
    cost: dict[int, dict[str, float]] = {}
    for side in args.sides:
        world = WorldConfig.for_size(side)
        bb = backbone_at(args.release, side)
        torch.manual_seed(0)
        heads = DenseHeads(bb.model.get_input_embeddings().embedding_dim)
        cost[side] = {
            "answer": time_updates(bb, batches(items(MIX, world, n), batch), partial(accumulate_loss, bb)),
            "dense": time_updates(bb, batches(items(["color", "read"], world, n), batch),
                                  partial(dense_loss, bb, heads=heads), heads),
        }
        if side == args.sides[0]:
            text = time_updates(bb, batches(items(MIX, world, n, text_only=True), batch),
                                partial(accumulate_loss, bb))
        tokens = bb.processor.tokens_for_size(side, side)
        cost[side]["tokens"] = tokens
        print(f"side {side}: {tokens} merged tokens per image; answer {cost[side]['answer']:.2f} CPU-s/update, "
              f"dense {cost[side]['dense']:.2f}", flush=True)

    steps = {"text": 0, "answer": 0, "dense": 0}
    for s in recipe["stages"]:
        kind = "text" if s.get("text_only") else "dense" if s.get("objective") in ("dense", "words") else "answer"
        steps[kind] += s["steps"]
    base = args.sides[0]
    print(f"\n{args.release}: recipe of {sum(steps.values())} updates of {batch} ({steps['answer']} answer, "
          f"{steps['dense']} dense / words, {steps['text']} text-only); release's recorded pretraining wall "
          f"{manifest['pretraining']['wall_s'] / 3600:.1f} h; one torch thread, CPU-seconds\n")
    print("| canvas | merged tokens / image | answer update (CPU-s) | dense update (CPU-s) | x the first side | "
          "recipe projected (CPU-h) |")
    print("|---|---|---|---|---|---|")
    first_total = None
    for side in args.sides:
        c = cost[side]
        total = steps["answer"] * c["answer"] + steps["dense"] * c["dense"] + steps["text"] * text
        first_total = first_total or total
        print(f"| {side} px | {c['tokens']} | {c['answer']:.2f} | {c['dense']:.2f} | {total / first_total:.2f} | "
              f"{total / 3600:.1f} |")
    print(f"\ntext-only update (side {base}): {text:.2f} CPU-s")


if __name__ == "__main__":
    main()
