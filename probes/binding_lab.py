"""Can the twin's language model learn question-conditioned answers (binding, existence)?

The vision tower and merger come from a saved pretraining state (e.g. right after the dense
stage) or, with --dense-steps, from a dense stage run first on a fresh tower (--dense-heads:
throwaway linear heads, heads tied to the language model's word embeddings, or regression onto
those embeddings); the language model is fresh (or, with --full-state, the state's own), optionally
trained first on --pre-tasks (with --pre-text-only, without their images); --layers picks the
Qwen3.5 layer pattern (L: Gated DeltaNet, F: full attention); --tasks a world-task mix ("exists1":
single-attribute existence; "exists1cot": the same, answered "blue, so no"; "exists1pair": asked in
present / absent pairs on one image; "exists1hint": the values present stated in the question;
"exists1echo": answered "red no"); --oracle-tokens replaces the tower's output by the words of the
objects on each cell (image tokens that are words; "first": on the first object cell only;
"asked": there, only the word of the asked kind). Every --eval-every updates it prints one JSON
line: the mean training loss and the accuracy per task on 192 held-out items (the first answer
token; for exists1cot and exists1echo every response token, the verdict included, under teacher
forcing, and as "<task>_verdict" the verdict alone, its prefix given; held-out items of a
--pre-text-only stage are keyed "<task>_text"). Stops at --deadline s.
Measurements: docs/lab/pretraining-record.md ("Why existence is not learned" and the sections after it).

  python probes/binding_lab.py --name x --tok releases/qwen35-tiny --vision-state STATE.pt \
      --layers LLLF --tasks color --objects 2-4 [--save OUT.pt]
  python probes/binding_lab.py --name y --tok releases/qwen35-tiny --seed 1 --dense-steps 800 \
      --dense-heads words --pre-tasks exists1hint --pre-steps 1000 --pre-text-only --tasks exists1 --objects 1-1
"""

import argparse
import functools
import itertools
import json
import time

import numpy as np
import torch

import ltopd.twins.pretrain as pretrain_module
from lab_scenes import exists1, lab_world, load_state  # probes/lab_scenes.py, beside this script
from ltopd.data.world.palette import COLORS, SHAPES
from ltopd.models.backbone import Backbone, family_ops
from ltopd.models.loading import load_tokenizer
from ltopd.models.patch_linear import linearize_patch_convs
from ltopd.models.prompt import build_target
from ltopd.twins.architectures import twin_config, twin_processor
from ltopd.twins.dense_vision import cell_labels, record_scene
from ltopd.twins.pretrain import PretrainConfig, Stage, pretrain, task_stream

ap = argparse.ArgumentParser()
ap.add_argument("--name", required=True)
ap.add_argument("--tok", required=True)
ap.add_argument("--vision-state", help="a pretrain_state.pt; without it the tower starts fresh too")
ap.add_argument("--full-state", action="store_true", help="load the LM too (same layer pattern)")
ap.add_argument("--layers", default="LLLF")
ap.add_argument("--tasks", default="exists")
ap.add_argument("--objects", default="2-4")
ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--lr", type=float, default=2e-3)
ap.add_argument("--lr-vision", type=float, default=5e-4)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--eval-every", type=int, default=50)
ap.add_argument("--deadline", type=float, default=480)
ap.add_argument("--seed", type=int, default=0, help="seeds the fresh weights and torch's RNG in training")
ap.add_argument("--device", default="cpu")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--dense-steps", type=int, default=0, help="a dense vision stage of this many updates first")
ap.add_argument("--dense-heads", choices=("linear", "words", "embed"), default="linear",
                help="linear: throwaway heads; words: class vectors are the LM's (frozen) word embeddings; "
                "embed: no heads, an object's tokens regress onto the sum of its colour and shape words' embeddings")
ap.add_argument("--dense-objects", default="1-5")
ap.add_argument("--pre-tasks", default="exists1hint", help="tasks of a language stage after the dense one")
ap.add_argument("--pre-steps", type=int, default=0)
ap.add_argument("--pre-text-only", action="store_true", help="the language stage's items without their images")
ap.add_argument("--oracle-tokens", choices=("cells", "first", "asked"),
                help="no vision tower: each merged token is e(colour word) + e(shape word) of the object on its "
                "cell (zero on background), e the LM's live input embeddings: image tokens that are words; "
                "first: only the first object cell of the image carries them (one token per object at --objects 1-1); "
                "asked: as first, with only the word of the asked kind (colour or shape), as the hint states it")
ap.add_argument("--save", help="write the final weights here ({'model': state_dict}, what --vision-state reads)")
a = ap.parse_args()
torch.set_num_threads(a.threads)
t0 = time.time()
tok = load_tokenizer(a.tok)
config = twin_config("qwen35-tiny", tok)
L = {"L": "linear_attention", "F": "full_attention"}
config.text_config.layer_types = [L[c] for c in a.layers]
config.text_config.num_hidden_layers = len(a.layers)
with torch.random.fork_rng():
    torch.manual_seed(a.seed)
    model = family_ops(config.model_type).model_class(config)
linearize_patch_convs(model)
model.to(a.device)
bb = Backbone(model=model, processor=twin_processor("qwen35-tiny", tok))
missing = load_state(model, a.vision_state, vision_only=not a.full_state) if a.vision_state else []
lo, hi = (int(x) for x in a.objects.split("-"))
w = lab_world(lo, hi)


tasks = a.tasks.split(",")


def without_image(r: dict) -> dict:
    """The item without its image, its template keyed apart ("<template>_text")."""
    meta = json.loads(r["meta"])
    return {**r, "images": [], "meta": json.dumps({**meta, "template": meta["template"] + "_text"})}


def stream(seed, start=0, tasks=tasks, text_only=False):
    made = {
        "exists1": lambda: exists1(seed, 0, w),
        "exists1cot": lambda: exists1(seed, 0, w, cot=True),
        "exists1pair": lambda: exists1(seed, 0, w, pairs=True),
        "exists1hint": lambda: exists1(seed, 0, w, hint=True),
        "exists1echo": lambda: exists1(seed, 0, w, echo=True),
    }
    ws = [made[t]() if t in made else task_stream([t], seed, w, 0) for t in tasks]
    items = (next(ws[i % len(ws)]) for i in itertools.count())
    if text_only:  # the language model alone: no image in the prompt
        items = map(without_image, items)
    return itertools.islice(items, start, None)


pre_tasks = a.pre_tasks.split(",") if a.pre_steps else []
held = list(itertools.islice(stream(9_900_000), 192))
if pre_tasks:
    held += list(itertools.islice(stream(9_900_000, tasks=pre_tasks, text_only=a.pre_text_only), 192))


def evaluate():
    model.eval()
    right = {}
    with torch.no_grad():
        for k in range(0, len(held), 64):
            recs = held[k : k + 64]
            b = bb.encode(recs, [build_target(r, "answer") for r in recs])
            logits = bb.forward(b, with_labels=False)[0].logits
            for i, r in enumerate(recs):
                template = json.loads(r["meta"])["template"]
                at = torch.nonzero(b.response_mask[i])[:, 0]
                named = template.removesuffix("_text") in ("exists1cot", "exists1echo")
                if not named:  # the first answer token; else all (verdict too)
                    at = at[:1]
                ok = bool((logits[i, at - 1].argmax(-1) == b.labels[i, at]).all())
                right.setdefault(template, []).append(ok)
                if named:  # the verdict alone, its prefix given
                    v = [int(p) for p in at if int(b.labels[i, p]) in verdict_ids()][-1]
                    right.setdefault(f"{template}_verdict", []).append(
                        bool(logits[i, v - 1].argmax(-1) == b.labels[i, v]))
    model.train()
    return {k: round(float(np.mean(v)), 3) for k, v in sorted(right.items())}


@functools.cache
def verdict_ids() -> set[int]:
    """Token ids of "yes" and "no", with and without the leading space."""
    return {tok(w, add_special_tokens=False)["input_ids"][0] for w in ("yes", "no", " yes", " no")}


@functools.cache
def word_ids() -> dict[str, list[int]]:
    """Token ids of the shape and colour words as questions write them (one token each, with the space)."""
    return {k: [tok(" " + v, add_special_tokens=False)["input_ids"][0] for v in vals]
            for k, vals in (("shape", SHAPES), ("color", COLORS))}


def cell_words(lab, emb, kinds=("shape", "color"), first_only=False):
    """(cells, D): on each merged cell, the sum of the `kinds` words' embeddings `emb` of the object
    covering it (zero on background); with `first_only`, on the first object cell only."""
    out = torch.zeros(len(lab.color), emb.shape[1])
    for kind in kinds:
        ids, cls = torch.tensor(word_ids()[kind]), getattr(lab, kind)
        at = torch.nonzero(cls < len(ids))[:, 0]  # the background class is len(ids)
        at = at[:1] if first_only else at
        out = out.index_add(0, at, emb[ids[cls[at]]])
    return out


class WordHead(torch.nn.Module):
    """Class logits = scale * token . (the LM's input embedding of the class word), detached so the
    embeddings stay where the language model has them; background from its own vector."""

    def __init__(self, embed, ids):
        super().__init__()
        self.embed_weight = lambda: embed.weight  # not a submodule: the LM's weights stay out of the heads' group
        self.ids = ids
        self.scale = torch.nn.Parameter(torch.ones(()))
        self.background = torch.nn.Linear(embed.embedding_dim, 1)

    def forward(self, tokens):
        words = self.embed_weight()[self.ids].detach()
        return torch.cat([self.scale * tokens @ words.T, self.background(tokens)], dim=-1)


class WordHeads(torch.nn.Module):
    """DenseHeads' interface (shape and colour; the lab world has no text) with word-tied heads:
    the merger learns to put an object's tokens near the words that name it, as a projector
    pretrained on captions does."""

    def __init__(self, embed):
        super().__init__()
        self.heads = torch.nn.ModuleDict({k: WordHead(embed, v) for k, v in word_ids().items()})


def embed_loss(backbone, records, heads):
    """Dense stage variant: every merged token regresses onto e(colour word) + e(shape word) of the
    object covering its cell (zero for background), e the LM's input embeddings (detached); the mean
    squared error is divided by the targets' mean square. Back-propagates; returns the loss."""
    batch = backbone.encode(records)
    features = torch.cat(list(backbone.image_features(batch)))
    grids = backbone.ops.grid_hw(backbone.model, batch.inputs)
    emb = backbone.model.get_input_embeddings().weight.detach()
    target = torch.cat([cell_words(cell_labels(record_scene(r), g), emb) for r, g in zip(records, grids)])
    loss = ((features - target) ** 2).mean() / (target**2).mean().clamp_min(1e-8)
    loss.backward()
    return loss.detach()


def use_oracle_tokens(backbone, mode):
    """--oracle-tokens: Backbone.encode remembers its records; the family's image_features then
    returns, per image, the words of the object on each merged cell instead of the tower's output
    (the LM's live embeddings, so they train as words do)."""
    remembered = []
    encode, ops = backbone.encode, backbone.ops

    def remembering_encode(records, *args, **kwargs):
        remembered[:] = records
        return encode(records, *args, **kwargs)

    def oracle(model, inputs):
        grids = ops.grid_hw(model, inputs)
        with_images = [r for r in remembered if r.get("images")]
        if len(with_images) != len(grids):
            raise RuntimeError(f"{len(grids)} images but {len(with_images)} remembered records")
        emb = model.get_input_embeddings().weight
        out = []
        for r, g in zip(with_images, grids):
            # exists1 asks "Is there a red object ...?" for colour, "Is there a star ...?" for shape
            asked = "color" if " object in the image" in r["question"] else "shape"
            kinds = (asked,) if mode == "asked" else ("shape", "color")
            out.append(cell_words(cell_labels(record_scene(r), g), emb, kinds, first_only=mode != "cells"))
        return tuple(out)

    backbone.encode = remembering_encode
    ops.image_features = oracle


class Stop(Exception):
    pass


losses = []


def on_step(log):
    losses.append(log.loss)
    if log.step % a.eval_every == 0:
        print(
            json.dumps(
                {
                    "name": a.name,
                    "step": log.step,
                    "loss": round(float(np.mean(losses[-a.eval_every :])), 4),
                    "acc": evaluate(),
                    "s": round(time.time() - t0),
                }
            ),
            flush=True,
        )
    if time.time() - t0 > a.deadline:
        raise Stop


if a.oracle_tokens:
    use_oracle_tokens(bb, a.oracle_tokens)
print(
    json.dumps({"name": a.name, "args": vars(a), "step": 0, "acc": evaluate(), "missing_lm": len(missing)}), flush=True
)
dense = (Stage("dense", a.dense_steps, lr_lm=0.0, objective="dense"),) if a.dense_steps else ()
# The variants replace the dense stage's heads or loss inside the pretraining module for this process
# only: the release code (hashed into the manifests) stays as it is.
if a.dense_heads == "words":
    pretrain_module.DenseHeads = lambda hidden: WordHeads(model.get_input_embeddings())
if a.dense_heads == "embed":
    pretrain_module.dense_loss = embed_loss
dlo, dhi = (int(x) for x in a.dense_objects.split("-"))
pre = (Stage("pre", a.pre_steps, lr_lm=a.lr, lr_merger=a.lr, lr_vision=a.lr_vision),) if a.pre_steps else ()
cfg = PretrainConfig(
    stages=(*dense, *pre, Stage("lab", a.steps, lr_lm=a.lr, lr_merger=a.lr, lr_vision=a.lr_vision)),
    batch_size=a.batch,
    seed=a.seed,
    warmup_steps=10,
)
try:
    streams = {"lab": lambda s: stream(5_700_000, s),
               "dense": lambda s: task_stream(["color"], 5_800_000, lab_world(dlo, dhi), s),
               "pre": lambda s: stream(5_900_000, s, pre_tasks, a.pre_text_only)}
    pretrain(bb, streams, cfg, on_step=on_step)
except Stop:
    pass
if a.save:
    torch.save({"model": model.state_dict(), "layers": a.layers, "tasks": a.tasks}, a.save)
print(json.dumps({"name": a.name, "done": True, "s": round(time.time() - t0)}), flush=True)
