"""Where does a twin's image route break? Per procedural-world task and scene density, accuracy at
full tokens and at CDPruner 5% against the question-only prior of the same items:

    python benchmarks/world_probe.py --release releases/qwen35-tiny [--n 120]
    python benchmarks/world_probe.py --state train_state/release/qwen35-tiny/pretrain_state.pt \
        --twin qwen35-tiny --tokenizer releases/qwen35-tiny

Items use seed 7,000,000 (no pretraining stage, gate or benchmark uses it). Prints a markdown table.
"""
from __future__ import annotations

import argparse

import torch
from transformers import AutoTokenizer

from ltopd.data.sources import world_config
from ltopd.data.world import answer_prior_baseline, generate_task_item
from ltopd.models.inference import answer_accuracy, predict
from ltopd.models.loading import load_backbone
from ltopd.models.twins import twin_backbone

SEED = 7_000_000
# (scene density, WorldConfig overrides, tasks asked there)
PROBES = [
    ("1 large object", {"min_objects": 1, "max_objects": 1, "text_prob": 0.0, "clutter": 0.0,
                        "min_object_px": 72, "max_object_px": 120}, ["color", "shape"]),
    ("2-4 objects", {"min_objects": 2, "max_objects": 4, "text_prob": 0.0, "clutter": 0.1,
                     "min_object_px": 32, "max_object_px": 96}, ["color", "shape", "exists"]),
    ("default world", {}, ["color", "shape", "exists", "count", "read"]),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--release", help="a release folder")
    src.add_argument("--state", help="a pretrain_state.pt (with --twin and --tokenizer)")
    ap.add_argument("--twin")
    ap.add_argument("--tokenizer")
    ap.add_argument("--n", type=int, default=120, help="items per task and density")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.release:
        backbone, what = load_backbone(args.release), args.release
    else:
        if not (args.twin and args.tokenizer):
            ap.error("--state needs --twin and --tokenizer")
        backbone = twin_backbone(args.twin, AutoTokenizer.from_pretrained(args.tokenizer), seed=0)
        state = torch.load(args.state, map_location="cpu", weights_only=False)
        backbone.model.load_state_dict(state["model"])
        what = f"{args.twin} after {state['steps']} updates"
    backbone.model.eval()
    print(f"{what}: {args.n} items per row\n")
    print("| scenes | task | question-only | full | cdpruner 5% |\n|---|---|---|---|---|")
    for density, overrides, tasks in PROBES:
        cfg = world_config({"image_size": 256, **overrides})
        for task in tasks:
            records = [generate_task_item(task, i, SEED, cfg) for i in range(args.n)]
            scores = []
            for ratio in (1.0, 0.05):
                gens = predict(backbone, records, ratio, "cdpruner", 1, 40, max_new_tokens=12, progress=False)
                scores.append(answer_accuracy(records, gens)["all"])
            print(f"| {density} | {task} | {answer_prior_baseline(records):.3f} | {scores[0]:.3f} | {scores[1]:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
