"""Where the answer position looks: per head of each full-attention layer, the attention mass on
image tokens and its entropy, for colour questions on one object and on 2-4 objects.

Usage: python probes/answer_attention.py STATE.pt [STATE.pt ...]  (qwen35-tiny states; the
tokenizer from releases/qwen35-tiny). Measurements: docs/lab/pretraining-record.md."""

import sys

import torch

from lab_scenes import lab_world, load_state  # probes/lab_scenes.py, beside this script
from ltopd.data.world import generate_task_item
from ltopd.models.loading import load_tokenizer
from ltopd.twins.architectures import twin_backbone

torch.set_num_threads(1)
tok = load_tokenizer("releases/qwen35-tiny")
for path in sys.argv[1:]:
    bb = twin_backbone("qwen35-tiny", tok, seed=0)
    load_state(bb.model, path)
    bb.model.set_attn_implementation("eager")
    bb.model.eval()
    img = tok.convert_tokens_to_ids("<|image_pad|>")
    for lo, hi in ((1, 1), (2, 4)):
        w = lab_world(lo, hi)
        recs = [generate_task_item("color", i, 4_500_000, w) for i in range(32)]
        b = bb.encode(recs)
        with torch.no_grad():
            out = bb.model(**b.inputs, output_attentions=True)
        ids = b.inputs["input_ids"]
        isimg = ids == img
        for li, a in enumerate(out.attentions):
            if a is None:
                continue
            last = a[:, :, -1, :]  # (B, H, T) at the answer position
            mass = (last * isimg[:, None, :]).sum(-1).mean(0)
            ent = -(last.clamp_min(1e-9).log() * last).sum(-1).mean(0)
            print(
                path.split("/")[-1],
                f"{lo}-{hi}",
                "layer",
                li,
                "image mass per head",
                [round(float(x), 3) for x in mass],
                "entropy",
                [round(float(x), 2) for x in ent],
            )
