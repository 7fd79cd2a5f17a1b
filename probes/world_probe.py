"""Where does a twin's image route break? Per procedural-world task and scene density, accuracy at
full tokens and at CDPruner 5% against the question-only prior of the same items:

    python probes/world_probe.py --release releases/qwen35-tiny [--n 120]
    python probes/world_probe.py --state train_state/release/qwen35-tiny/pretrain_state.pt \
        --twin qwen35-tiny --tokenizer releases/qwen35-tiny

Items use seed 7,000,000 (no pretraining stage, gate or benchmark uses it). Prints a markdown table.
"""
from __future__ import annotations

import argparse

import torch

import twin_source  # probes/twin_source.py, beside this script
from ltopd.data.sources import world_config
from ltopd.data.world import answer_prior_baseline, generate_task_item
from ltopd.models.inference import answer_accuracy, predict

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
    twin_source.add_arguments(ap)
    ap.add_argument("--n", type=int, default=120, help="items per task and density")
    args = ap.parse_args()
    torch.set_num_threads(1)
    backbone, what = twin_source.load(ap, args)
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
