"""Does this environment run a twin as the one that trained it? One forward pass on fixed items:

    python probes/forward_fingerprint.py --release releases/qwen35-tiny
    python probes/forward_fingerprint.py --state STATE.pt --twin qwen35-tiny --tokenizer releases/qwen35-tiny

Prints the library versions, the response-token loss and the logits' sum on 32 procedural-world
items (2-4 objects, colour and shape questions, seed 9,900,000), and the sum of the merged visual
tokens' absolute values (the vision tower and merger alone). Run it under two environments and
compare: identical weights and items must give the same numbers up to float noise.
Measured (docs/lab/pretraining-record.md, "Library versions"): transformers 5.17 and 5.25 differ in the loss.
"""

from __future__ import annotations

import argparse

import torch
import transformers

import twin_source  # probes/twin_source.py, beside this script
from lab_scenes import lab_world  # probes/lab_scenes.py
from ltopd.data.world import generate_task_item
from ltopd.models.prompt import build_target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    twin_source.add_arguments(ap)
    args = ap.parse_args()
    torch.set_num_threads(1)
    backbone, what = twin_source.load(ap, args)
    world = lab_world(2, 4)
    records = [generate_task_item(t, i, 9_900_000, world) for i in range(16) for t in ("color", "shape")]
    batch = backbone.encode(records, [build_target(r, "answer") for r in records])
    with torch.no_grad():
        out = backbone.forward(batch, with_labels=True)[0]
        merged = torch.cat(backbone.image_features(batch))
    print(f"{what}: torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"  loss {float(out.loss):.6f}  logit sum {float(out.logits.double().sum()):.3f}")
    print(f"  merged visual tokens {tuple(merged.shape)}, sum |x| {float(merged.double().abs().sum()):.3f}")


if __name__ == "__main__":
    main()
