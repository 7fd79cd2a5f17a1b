"""Do visual tokens that carry context make CDPruner's gap something training can give back? (issue 38)

The released twin's tower was pretrained with a label on every merged token (its cell's shape,
colour and word), so its tokens are local: under CDPruner at 5% an item whose evidence cells are
dropped has nothing left to read, and neither labels nor LT-OPD give the gap back
(docs/measured/regime-students.md). A contrastively pretrained ViT's patch tokens also carry the
image's content beyond their patch. This probe continues the release for ``--steps`` updates on
the benchmark twins' instruction items (a seed space no evaluation uses), every update training

* the answer loss (all parameter groups, as the release's last stages), and
* the dense cell labels (fresh throwaway heads, as the release's vision stage), and, in the
  ``context`` arm only,
* an image-level inventory on every token: a linear head on each merged token predicts which
  (shape, colour) pairs and which words the whole image holds (binary cross-entropy), weighted
  by ``--context-weight``; the ``control`` arm takes the same updates with weight 0, so what
  differs between the arms is the objective alone.

Each arm is then measured as regime_students.py measures a design (its functions): full tokens,
CDPruner 5%, and LT-OPD trained at 5% on in-distribution items, with the paired bootstrap and
recovery = (retain(student) - retain(CDPruner)) / (100 - retain(CDPruner)). ``inventory from
kept``: the context head's per-label accuracy (threshold 0.5) on the mean of the tokens CDPruner
keeps, beside the accuracy of predicting every label absent; the header gives the context loss of
a head that reads nothing (``base_rate_bce``), the bar a token carrying the image must pass.

    python probes/context_tower.py --steps 400 --out /tmp/regime/context.md
"""
from __future__ import annotations

import argparse
import itertools
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ltopd import config, grid  # noqa: E402
from ltopd.bench.evidence import restyle  # noqa: E402
from ltopd.bench.suites.instruct import instruct_stream  # noqa: E402
from ltopd.data.world.palette import COLORS, SHAPES  # noqa: E402
from ltopd.data.world.text import WORDS  # noqa: E402
from ltopd.models.loading import load_backbone, save_backbone  # noqa: E402
from ltopd.models.parts import parameter_groups  # noqa: E402
from ltopd.stats.bootstrap import format_ci, retain_diff_ci, retain_ratio_ci  # noqa: E402
from ltopd.twins.dense_vision import DenseHeads, batch_cell_labels, record_scene  # noqa: E402
from ltopd.twins.pretrain import accumulate_loss  # noqa: E402
from regime_students import BUDGET, eval_records, evaluate, train_student  # noqa: E402

PAIRS = [(s, c) for s in SHAPES for c in COLORS]
N_INVENTORY = len(PAIRS) + len(WORDS)


def has_scene(record: dict) -> bool:
    try:
        record_scene(record)
        return True
    except ValueError:
        return False


def inventory(scene: dict) -> torch.Tensor:
    """Multi-hot over (shape, colour) pairs and words present anywhere in the image."""
    y = torch.zeros(N_INVENTORY)
    for obj in scene["objects"]:
        y[PAIRS.index((obj["shape"], obj["color"]))] = 1.0
    block = scene.get("text")
    word = (block or {}).get("fields", {}).get("text") if block else None
    if word in WORDS:
        y[len(PAIRS) + WORDS.index(word)] = 1.0
    return y


def base_rate_bce(records: list[dict]) -> float:
    """The context loss of a head that reads nothing from the tokens: each label predicted at its
    rate over ``records`` (the bar a token carrying the image's content must pass)."""
    y = torch.stack([inventory(record_scene(r)) for r in records]).mean(0).clamp(1e-6, 1 - 1e-6)
    return float(-(y * y.log() + (1 - y) * (1 - y).log()).mean())


def vision_loss(bb, records: list[dict], heads: DenseHeads, context: torch.nn.Linear,  # noqa: ANN001
                weight: float) -> tuple[float, float]:
    """Back-propagate dense cell labels + weight * per-token inventory BCE; returns both terms."""
    batch = bb.encode(records)
    per_image = list(bb.image_features(batch))
    tokens = torch.cat(per_image)
    labels = batch_cell_labels(bb, batch, records)
    dense = torch.zeros(())
    for kind, head in heads.heads.items():
        dense = dense + torch.nn.functional.cross_entropy(head(tokens), torch.cat([getattr(x, kind) for x in labels]))
    target = torch.cat([inventory(record_scene(r)).expand(len(t), -1) for r, t in zip(records, per_image)])
    ctx = torch.nn.functional.binary_cross_entropy_with_logits(context(tokens), target)
    (dense + weight * ctx).backward()
    return float(dense.detach()), float(ctx.detach())


@torch.no_grad()
def inventory_from_kept(bb, context: torch.nn.Linear, records: list[dict], floor: int,  # noqa: ANN001
                        selector: str) -> tuple[float, float]:
    """Accuracy of the context head's labels read from the mean of CDPruner's kept tokens (and the
    all-absent predictor's), over ``records``."""
    from ltopd.selectors import keep_count, requirements, select  # noqa: PLC0415

    hits = base = total = 0.0
    for i in range(0, len(records), 16):
        chunk = records[i:i + 16]
        batch = bb.encode(chunk)
        feats = bb.image_features(batch)
        sel = bb.selection_inputs(batch, feats, requirements(selector))
        for r, t, inputs in zip(chunk, feats, sel):
            keep = select(selector, inputs, keep_count(len(t), BUDGET, floor))
            y = inventory(record_scene(r))
            p = (context(t[keep]).mean(0) > 0).float()
            hits += float((p == y).sum())
            base += float((y == 0).sum())
            total += len(y)
    return 100 * hits / total, 100 * base / total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--release", default="releases/qwen35-tiny")
    ap.add_argument("--backbone", default="qwen35-tiny")
    ap.add_argument("--arms", nargs="+", default=["control", "context"], choices=["control", "context"])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context-weight", type=float, default=1.0)
    ap.add_argument("--lr", type=float, nargs=3, default=[1e-4, 1e-4, 2e-4], metavar=("LM", "MERGER", "VISION"))
    ap.add_argument("--floor", type=int, default=1)
    ap.add_argument("--benches", nargs="+", default=["vstar", "hrbench4k", "gqa", "pope", "textvqa"])
    ap.add_argument("--n", type=int, default=160)
    ap.add_argument("--opd-steps", type=int, default=100)
    ap.add_argument("--opd-batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default="/tmp/regime/context")
    ap.add_argument("--out", default=None)
    ap.add_argument("--base-rate", action="store_true", help="print the base-rate context loss of the training "
                    "items (base_rate_bce) and stop")
    args = ap.parse_args()
    torch.set_num_threads(1)

    cfg = config.load(args.config)
    selector = grid.reduction_defaults(cfg).selector
    evidence = set(cfg["backbones"][args.backbone].get("evidence", ()))
    records = eval_records(args.benches, args.n, 0, cfg["world"], evidence)
    stream = restyle(instruct_stream(args.benches, 38, cfg["world"]), evidence)
    items = list(itertools.islice(stream, args.steps * args.batch + args.opd_steps * args.opd_batch))
    train_items, opd_items = items[:args.steps * args.batch], items[args.steps * args.batch:]
    probe_scenes = [r for r in itertools.chain(*records.values()) if has_scene(r)][:200]
    floor_bce = base_rate_bce([r for r in train_items if has_scene(r)])
    if args.base_rate:
        print(f"base-rate context loss over the {args.steps} x {args.batch} training items: {floor_bce:.3f}")
        return
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        "# Context-carrying tokens: does training then give back CDPruner's gap? (measured)", "",
        f"Generated by `python {' '.join(shlex.quote(a) for a in sys.argv)}` (probes/context_tower.py; its "
        f"docstring defines the arms and columns; git HEAD {head}). From `{args.release}`: {args.steps} updates x "
        f"{args.batch} instruction items (lr lm/merger/vision {args.lr}, heads 1e-3), context weight "
        f"{args.context_weight}; evaluation seed 0, n = {args.n} per benchmark ({', '.join(args.benches)}); "
        f"CDPruner 5%, floor {args.floor}; LT-OPD {args.opd_steps} x {args.opd_batch} on fresh instruction items, "
        f"training seed {args.seed}; one torch thread; CPU-seconds. The context loss of a head that reads "
        f"nothing (each label at its rate over the training items): {floor_bce:.3f}.", "",
        "| arm | model | dense / context loss (first -> last) | inventory from kept % (all-absent) | retain % [95%] | "
        "minus CDPruner [95%] | recovery % | " + " | ".join(args.benches) + " | CPU-s |",
        "|---|---|---|---|---|---|---|" + "---|" * len(args.benches) + "---|",
    ]

    def emit(line: str) -> None:
        lines.append(line)
        print(line, flush=True)
        if args.out:
            Path(args.out).write_text("\n".join(lines) + "\n")

    from ltopd.bench.scoring import score  # noqa: PLC0415

    print("\n".join(lines), flush=True)
    for arm in args.arms:
        t = time.process_time()
        torch.manual_seed(args.seed)
        bb = load_backbone(args.release)
        hidden = bb.model.get_input_embeddings().embedding_dim
        heads, context = DenseHeads(hidden), torch.nn.Linear(hidden, N_INVENTORY)
        groups = parameter_groups(bb.model)
        opt = torch.optim.AdamW(
            [{"params": groups[g], "lr": lr} for g, lr in zip(("lm", "merger", "vision"), args.lr)]
            + [{"params": list(heads.parameters()) + list(context.parameters()), "lr": 1e-3}], weight_decay=0.01)
        weight = args.context_weight if arm == "context" else 0.0
        curve = []
        bb.model.train()
        for step in range(args.steps):
            recs = train_items[step * args.batch:(step + 1) * args.batch]
            opt.zero_grad(set_to_none=True)
            ans = float(accumulate_loss(bb, recs))
            scened = [r for r in recs if has_scene(r)]
            dense, ctx = vision_loss(bb, scened, heads, context, weight) if scened else (float("nan"),) * 2
            torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
            opt.step()
            curve.append((ans, dense, ctx))
            if step % 25 == 0 or step == args.steps - 1:
                print(f"{arm} step {step}: answer {ans:.3f} dense {dense:.3f} context {ctx:.3f}", flush=True)
        bb.model.eval()
        inv = inventory_from_kept(bb, context, probe_scenes, args.floor, selector)
        folder = Path(args.work) / arm
        save_backbone(bb, folder)
        cost = time.process_time() - t
        out = evaluate(bb, records, [1.0, BUDGET], args.floor, selector)
        full, cdp = out[1.0], out[BUDGET]
        base = retain_ratio_ci(cdp, full)[0]
        k = max(1, len(curve) // 10)
        first = [sum(c[i] for c in curve[:k]) / k for i in range(3)]
        last = [sum(c[i] for c in curve[-k:]) / k for i in range(3)]
        losses = f"{first[1]:.3f} / {first[2]:.3f} -> {last[1]:.3f} / {last[2]:.3f}"
        scores = lambda rows: " | ".join(f"{score(b, rows[b])['score']:.1f}" for b in args.benches)  # noqa: E731
        emit(f"| {arm} | full tokens | {losses} | {inv[0]:.1f} ({inv[1]:.1f}) | 100.0 | - | - | {scores(full)} | "
             f"{cost:.0f} |")
        r = retain_ratio_ci(cdp, full)
        emit(f"| {arm} | CDPruner 5% | | | {r[0]:.1f} {format_ci(r)} | - | - | {scores(cdp)} | "
             f"{time.process_time() - t - cost:.0f} |")
        t = time.process_time()
        training = dict(cfg["training"])
        student, hist = train_student(str(folder), "ltopd", training, args.floor, selector, opd_items,
                                      args.opd_batch, args.seed)
        rows5 = evaluate(student, records, [BUDGET], args.floor, selector)[BUDGET]
        r = retain_ratio_ci(rows5, full)
        d = retain_diff_ci(rows5, cdp, full)
        emit(f"| {arm} | LT-OPD 5% | | | {r[0]:.1f} {format_ci(r)} | {d[0]:.1f} {format_ci(d)} | "
             f"{100 * d[0] / (100 - base):.0f} | {scores(rows5)} | {time.process_time() - t:.0f} |")


if __name__ == "__main__":
    main()
