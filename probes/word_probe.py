"""Can a twin's vision tower tell the 40 closed-vocabulary words apart? Supervises the tower and
merger directly (no language model in the path), with one linear word head on the merged-token
cells a word or sign block covers (ltopd.twins.dense_vision.cell_labels), and prints held-out
word accuracy (the argmax of the head's votes summed over the word's cells; chance 1/40):

    python probes/word_probe.py [--init release|fresh] [--font 22] [--lr 2e-3] [--steps 400]
    python probes/word_probe.py --state S/step1500.pt --frozen   # a saved state's tower, head only
    python probes/word_probe.py --lr 5e-4 --steps 2400 --save W.pt   # then continue_release.py --init W.pt

Every image carries one word or sign (the world's `read` items, 1-4 objects beside it); `--font`
is the world's `font_px` (22 is the default world's: capitals ~15 px, about one 16 px patch).
"""
from __future__ import annotations

import argparse
import time

import torch

from ltopd.data.sources import world_config
from ltopd.data.world import generate_task_item
from ltopd.data.world.text import WORDS
from ltopd.models.loading import load_backbone, load_tokenizer
from ltopd.models.parts import parameter_groups
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.dense_vision import WORD_KINDS, batch_cell_labels, record_scene

SEED = 9_100_000  # this probe's item seed (vision_probe.py draws from 9,000,000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--init", choices=["release", "fresh"], default="release",
                    help="the released tower (--release) or a fresh one of the same twin")
    ap.add_argument("--release", default="releases/qwen35-tiny")
    ap.add_argument("--twin", default="qwen35-tiny", help="the fresh twin (--init fresh)")
    ap.add_argument("--state", help="load these weights (a continue_release.py --snapshots file) into the twin")
    ap.add_argument("--frozen", action="store_true", help="train the word head only: what the tower already separates")
    ap.add_argument("--font", type=int, default=22)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save", help="save the twin's weights here at the end (continue_release.py --init)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    bb = (load_backbone(args.release) if args.init == "release"
          else twin_backbone(args.twin, load_tokenizer(args.release), seed=0))
    if args.state:
        bb.model.load_state_dict(torch.load(args.state, map_location="cpu", weights_only=False)["model"])
    cfg = world_config({"image_size": 256, "text_prob": 1.0, "font_px": args.font,
                        "min_objects": 1, "max_objects": 4})

    def word_items(start: int, n: int) -> tuple[list[dict], int]:
        """n read items whose text is one word (word or sign), from item index `start` on."""
        out, i = [], start
        while len(out) < n:
            record = generate_task_item("read", i, SEED, cfg)
            i += 1
            if record_scene(record)["text"]["kind"] in WORD_KINDS:
                out.append(record)
        return out, i

    def features(records: list[dict]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        batch = bb.encode(records)
        return list(bb.image_features(batch)), [lab.text for lab in batch_cell_labels(bb, batch, records)]

    head = torch.nn.Linear(bb.model.get_input_embeddings().embedding_dim, len(WORDS))
    groups = parameter_groups(bb.model)
    tower = [] if args.frozen else groups["vision"] + groups["merger"]
    opt = torch.optim.AdamW(tower + list(head.parameters()), lr=args.lr)
    held_out, _ = word_items(10**7, 200)

    def accuracy() -> float:
        right = scored = 0
        with torch.no_grad():
            for k in range(0, len(held_out), 50):
                for x, lab in zip(*features(held_out[k:k + 50])):
                    on_word = lab < len(WORDS)
                    if on_word.any():  # a word labels the cells it covers by >= MIN_COVER
                        right += int(head(x[on_word]).sum(0).argmax()) == int(lab[on_word][0])
                        scored += 1
        return right / scored

    what = f"{args.state} tower" if args.state else f"{args.init} tower"
    what += " (frozen)" if args.frozen else ""
    print(f"{args.twin}, {what}, font {args.font} px, lr {args.lr:g}, batch {args.batch} "
          f"(chance {1 / len(WORDS):.3f}; cross-entropy at chance {torch.log(torch.tensor(len(WORDS))):.3f})\n")
    print("| updates | train loss (last batch) | held-out word accuracy | CPU s |\n|---|---|---|---|")
    start, cursor = time.process_time(), 0
    for step in range(args.steps):
        batch, cursor = word_items(cursor, args.batch)
        opt.zero_grad()
        feats, labels = features(batch)
        x, y = torch.cat(feats), torch.cat(labels)
        on_word = y < len(WORDS)
        loss = torch.nn.functional.cross_entropy(head(x[on_word]), y[on_word])
        loss.backward()
        opt.step()
        if (step + 1) % args.every == 0:
            print(f"| {step + 1} | {loss.item():.3f} | {accuracy():.3f} | {time.process_time() - start:.0f} |",
                  flush=True)
    if args.save:
        torch.save({"model": bb.model.state_dict(), "steps": args.steps}, args.save)


if __name__ == "__main__":
    main()
