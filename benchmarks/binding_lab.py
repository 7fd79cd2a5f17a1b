"""Can the twin's language model learn question-conditioned answers (binding, existence)?

The vision tower and merger come from a saved pretraining state (e.g. right after the dense
stage); the language model is fresh (or, with --full-state, the state's own); --layers picks the
Qwen3.5 layer pattern (L: Gated DeltaNet, F: full attention); --tasks a world-task mix ("exists1":
single-attribute existence; "exists1cot": the same, answered "blue, so no"; "exists1pair": asked in
present / absent pairs on one image). Every --eval-every updates it prints one JSON line: the mean
training loss and the accuracy per task on 192 held-out items (the first answer token; for
exists1cot every response token, the verdict included, under teacher forcing). Stops at
--deadline s.
Measurements: docs/pretraining.md ("Why existence is not learned").

  python benchmarks/binding_lab.py --name x --tok releases/qwen35-tiny --vision-state STATE.pt \
      --layers LLLF --tasks color --objects 2-4 [--save OUT.pt]
"""

import argparse
import itertools
import json
import time

import numpy as np
import torch
from transformers import AutoTokenizer

from lab_scenes import lab_world, load_state  # benchmarks/lab_scenes.py, beside this script
from ltopd.data.world import generate_task_item
from ltopd.data.world.palette import COLORS, SHAPES
from ltopd.models.backbone import Backbone, family_ops
from ltopd.models.patch_linear import linearize_patch_convs
from ltopd.models.pretrain import PretrainConfig, Stage, pretrain, task_stream
from ltopd.models.prompt import build_target
from ltopd.models.twins import twin_config, twin_processor

ap = argparse.ArgumentParser()
ap.add_argument("--name", required=True)
ap.add_argument("--tok", required=True)
ap.add_argument("--vision-state", required=True)
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
ap.add_argument("--device", default="cpu")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--save", help="write the final weights here ({'model': state_dict}, what --vision-state reads)")
a = ap.parse_args()
torch.set_num_threads(a.threads)
t0 = time.time()
tok = AutoTokenizer.from_pretrained(a.tok)
config = twin_config("qwen35-tiny", tok)
L = {"L": "linear_attention", "F": "full_attention"}
config.text_config.layer_types = [L[c] for c in a.layers]
config.text_config.num_hidden_layers = len(a.layers)
with torch.random.fork_rng():
    torch.manual_seed(0)
    model = family_ops(config.model_type).model_class(config)
linearize_patch_convs(model)
model.to(a.device)
bb = Backbone(model=model, processor=twin_processor("qwen35-tiny", tok))
missing = load_state(model, a.vision_state, vision_only=not a.full_state)
lo, hi = (int(x) for x in a.objects.split("-"))
w = lab_world(lo, hi)


def exists1(seed, start, cot=False, pairs=False):
    """Single-attribute existence: 'Is there a red object?' / 'Is there a star?' (balanced). With
    `cot` ("exists1cot") the answer names the values present before the verdict: "blue, so no".
    With `pairs` ("exists1pair") items come in pairs on one image, a present then an absent value,
    so a batch's yes and no share their images and the answer prior's gradient cancels."""
    for i in itertools.count(start):
        scene, yes = (i // 2, i % 2 == 0) if pairs else (i, (i // 2) % 2 == 0)
        r = dict(generate_task_item("color", scene, seed, w))
        sc = json.loads(r["meta"])["scene"]
        rng = np.random.default_rng(i)
        by = ("color", "shape")[(scene if pairs else i) % 2]
        present = sorted({o[by] for o in sc["objects"]})
        pool = list(COLORS) if by == "color" else list(SHAPES)
        absent = [v for v in pool if v not in present]
        v = present[rng.integers(len(present))] if yes else absent[rng.integers(len(absent))]
        r["question"] = f"Is there a {v} object in the image?" if by == "color" else f"Is there a {v} in the image?"
        verdict = "yes" if yes else "no"
        r["answer"] = r["response"] = f"{' '.join(present)}, so {verdict}" if cot else verdict
        r["options"] = []
        template = "exists1cot" if cot else "exists1pair" if pairs else "exists1"
        r["meta"] = json.dumps({**json.loads(r["meta"]), "template": template})
        yield r


tasks = a.tasks.split(",")


def stream(seed, start=0):
    made = {
        "exists1": lambda: exists1(seed, 0),
        "exists1cot": lambda: exists1(seed, 0, cot=True),
        "exists1pair": lambda: exists1(seed, 0, pairs=True),
    }
    ws = [made[t]() if t in made else task_stream([t], seed, w, 0) for t in tasks]
    return itertools.islice((next(ws[i % len(ws)]) for i in itertools.count()), start, None)


held = list(itertools.islice(stream(9_900_000), 192))


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
                if template != "exists1cot":  # the first answer token; all of them (verdict included) for cot
                    at = at[:1]
                ok = bool((logits[i, at - 1].argmax(-1) == b.labels[i, at]).all())
                right.setdefault(template, []).append(ok)
    model.train()
    return {k: round(float(np.mean(v)), 3) for k, v in sorted(right.items())}


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


print(
    json.dumps({"name": a.name, "args": vars(a), "step": 0, "acc": evaluate(), "missing_lm": len(missing)}), flush=True
)
cfg = PretrainConfig(
    stages=(Stage("lab", a.steps, lr_lm=a.lr, lr_merger=a.lr, lr_vision=a.lr_vision),),
    batch_size=a.batch,
    seed=0,
    warmup_steps=10,
)
try:
    pretrain(bb, {"lab": lambda s: stream(5_700_000, s)}, cfg, on_step=on_step)
except Stop:
    pass
if a.save:
    torch.save({"model": model.state_dict(), "layers": a.layers, "tasks": a.tasks}, a.save)
print(json.dumps({"name": a.name, "done": True, "s": round(time.time() - t0)}), flush=True)
