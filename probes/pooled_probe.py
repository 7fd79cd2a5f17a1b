"""Are colour answers linearly decodable from the mean of an image's merged tokens?

A linear probe (1,200 colour items: 900 train, 300 test) on mean-pooled visual tokens of a saved
state's vision tower, for one object and for 2-4 objects: the ceiling a language model reaches
without attending selectively. Usage: python probes/pooled_probe.py STATE.pt [TOKENIZER]"""

import json
import sys

import torch

from lab_scenes import lab_world, load_state  # probes/lab_scenes.py, beside this script
from ltopd.data.world import generate_task_item
from ltopd.data.world.palette import COLORS
from ltopd.models.loading import load_tokenizer
from ltopd.twins.architectures import twin_backbone

torch.set_num_threads(1)
tok = load_tokenizer(sys.argv[2] if len(sys.argv) > 2 else "releases/qwen35-tiny")
bb = twin_backbone("qwen35-tiny", tok, seed=0)
load_state(bb.model, sys.argv[1], vision_only=True)
bb.model.eval()
C = list(COLORS)
for lo, hi in ((1, 1), (2, 4)):
    w = lab_world(lo, hi)
    X, Y, P = [], [], []
    for k in range(0, 1200, 50):
        recs = [generate_task_item("color", i, 4_400_000, w) for i in range(k, k + 50)]
        b = bb.encode(recs)
        with torch.no_grad():
            f = bb.image_features(b)
        for r, t in zip(recs, f):
            X.append(t.mean(0))
            Y.append(C.index(r["answer"]))
            P.append([c in {o["color"] for o in json.loads(r["meta"])["scene"]["objects"]} for c in C])
    X = torch.stack(X)
    Y = torch.tensor(Y)
    P = torch.tensor(P, dtype=torch.float)
    X = (X - X.mean(0)) / (X.std(0) + 1e-6)
    tr, te = slice(0, 900), slice(900, None)
    lin = torch.nn.Linear(X.shape[1], len(C))
    opt = torch.optim.Adam(lin.parameters(), 1e-2)
    for _ in range(500):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(lin(X[tr]), Y[tr])
        loss.backward()
        opt.step()
    with torch.no_grad():
        pred = lin(X[te]).argmax(1)
        acc = float((pred == Y[te]).float().mean())
        present = float(P[te][torch.arange(len(pred)), pred].mean())
    print(
        f"objects {lo}-{hi}: mean-pool linear probe answer acc {acc:.3f}, predicted colour present {present:.3f}, "
        f"train loss {float(loss.detach()):.3f}, token norm {float(torch.cat(list(f)).norm(dim=1).mean()):.2f}"
    )
