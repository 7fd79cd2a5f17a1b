"""How fast does a twin's vision tower learn shape? Supervises the tower and merger directly (no
language model in the path) and prints held-out shape accuracy as it trains:

    python probes/vision_probe.py --labels image   # one shape label per image, mean-pooled head
    python probes/vision_probe.py --labels dense   # ltopd.twins.dense_vision's per-cell labels

`image` asks the shape of one large object (72-120 px, clean background); `dense` trains on 1-5
objects of 32-120 px and scores, per held-out image, each labelled shape by the summed shape
votes of the cells it labels.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from ltopd.data.sources import world_config
from ltopd.data.world import generate_task_item
from ltopd.data.world.palette import SHAPES
from ltopd.models.loading import load_tokenizer
from ltopd.models.parts import parameter_groups
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.dense_vision import CLASSES, DenseHeads, cell_labels, dense_loss

WORLDS = {
    "image": {"min_objects": 1, "max_objects": 1, "text_prob": 0.0, "clutter": 0.0,
              "min_object_px": 72, "max_object_px": 120},
    "dense": {"min_objects": 1, "max_objects": 5, "text_prob": 0.0, "clutter": 0.1,
              "min_object_px": 32, "max_object_px": 120},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", choices=sorted(WORLDS), required=True)
    ap.add_argument("--twin", default="qwen35-tiny")
    ap.add_argument("--tokenizer", default="releases/qwen35-tiny")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--every", type=int, default=100)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bb = twin_backbone(args.twin, load_tokenizer(args.tokenizer), seed=0)
    cfg = world_config({"image_size": 256, **WORLDS[args.labels]})
    task = "shape" if args.labels == "image" else "color"

    def items(start: int, n: int) -> list[dict]:
        return [generate_task_item(task, i, 9_000_000, cfg) for i in range(start, start + n)]

    heads = DenseHeads(bb.model.get_input_embeddings().embedding_dim)
    groups = parameter_groups(bb.model)
    opt = torch.optim.AdamW(groups["vision"] + groups["merger"] + list(heads.parameters()), lr=args.lr)
    held_out = items(10**6, 200)
    print(f"{args.twin}, {args.labels} labels, lr {args.lr:g}, batch {args.batch}\n")
    print("| updates | held-out shape accuracy | CPU s |\n|---|---|---|")
    start = time.process_time()
    for step in range(args.steps):
        batch = items(step * args.batch, args.batch)
        opt.zero_grad()
        if args.labels == "image":
            feats = bb.image_features(bb.encode(batch))
            logits = torch.stack([heads.heads["shape"](f).mean(0)[: len(SHAPES)] for f in feats])
            target = torch.tensor([SHAPES.index(r["answer"]) for r in batch])
            torch.nn.functional.cross_entropy(logits, target).backward()
        else:
            dense_loss(bb, batch, heads)
        opt.step()
        if (step + 1) % args.every == 0:
            print(f"| {step + 1} | {accuracy(bb, heads, held_out, args.labels):.3f} | "
                  f"{time.process_time() - start:.0f} |", flush=True)


def accuracy(bb: object, heads: DenseHeads, records: list[dict], labels: str) -> float:
    right = total = 0
    with torch.no_grad():
        for k in range(0, len(records), 50):
            chunk = records[k:k + 50]
            for r, f in zip(chunk, bb.image_features(bb.encode(chunk))):
                votes = heads.heads["shape"](f)[:, : len(SHAPES)]
                if labels == "image":
                    right += int(votes.mean(0).argmax()) == SHAPES.index(r["answer"])
                    total += 1
                    continue
                shapes = cell_labels(json.loads(r["meta"])["scene"], (8, 8)).shape
                for sid in shapes[shapes < CLASSES.shape - 1].unique():
                    right += int(votes[shapes == sid].sum(0).argmax()) == int(sid)
                    total += 1
    return right / total


if __name__ == "__main__":
    main()
