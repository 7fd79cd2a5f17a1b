"""Can training at 5% give back what pruning to 5% takes, at a given design? (issue 38)

For each reduction floor (the design knob this probe turns on the released twin), it measures
on a probe subset of the benchmark twins (evaluation seed 0, the pipeline's records and
instructions):

* the base twin at full tokens and under CDPruner at 5% (its retain ratio);
* the oracle ceiling: a student trained *with labels* at 5% (CDPruner, the floor) on
  in-distribution items, the benchmark twins' own instruction items (a seed space no evaluation
  uses, ltopd.bench.suites.instruct), answered as the twin was taught (evidence-first where its
  profile says). The share of CDPruner's gap it gives back is the most a method can show here;
* LT-OPD (and any other trained method named) on the same items, from the pipeline's trainer.

Each student is the pipeline's own trainer (ltopd.train.families.make_trainer) with the
profile's `training` section; the probe only chooses its items, updates and learning-rate scale.
Recovery = (retain(student at 5%) - retain(CDPruner 5%)) / (100 - retain(CDPruner 5%)), with
the paired unit bootstrap's 95% interval on the retain difference (ltopd.stats.bootstrap).

    python probes/regime_students.py --floors 1 8 --methods sft ltopd --out docs/measured/regime-students.md
    python probes/regime_students.py --floors 16 --methods ltopd --steps 100 --batch 8 --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import itertools
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch

from ltopd import config, grid
from ltopd.bench.evaluate import evaluate_settings
from ltopd.bench.evidence import instructed, restyle
from ltopd.bench.scoring import score
from ltopd.bench.suites import synthetic_records
from ltopd.bench.suites.instruct import instruct_stream
from ltopd.models.loading import load_backbone
from ltopd.stats.bootstrap import format_ci, interval, retain_diff_ci, retain_ratio_ci, retain_replicates, seed_interval
from ltopd.train.families import make_trainer
from ltopd.train.methods import method_spec
from ltopd.train.trainer import TrainConfig

BUDGET = 0.05


def eval_records(benches: list[str], n: int, seed: int, world: dict, evidence: set[str]) -> dict[str, list[dict]]:
    """The pipeline's evaluation records (seed ``seed``), asked as the twin was taught."""
    out = {}
    for b in benches:
        recs = synthetic_records(b, n, seed, world)
        out[b] = [instructed(r, b) for r in recs] if b in evidence else recs
    return out


def evaluate(bb, records: dict[str, list[dict]], ratios: list[float], floor: int, selector: str) -> dict[float, dict]:
    """ratio -> benchmark -> prediction rows, one vision pass per batch for all ratios."""
    out: dict[float, dict] = {r: {} for r in ratios}
    for b, recs in records.items():
        res = evaluate_settings(bb, recs, b, [(r, selector) for r in ratios], floor, 40, seed=0, progress=False)
        for r, (rows, _) in zip(ratios, res):
            out[r][b] = rows
    return out


def load_twin(release: str, state: str | None = None, processor_side: int | None = None):
    """The release, or a build's saved weights on its twin; the processor's pixel budget at
    ``processor_side`` when given (a continued build's, before its release saves it)."""
    bb = load_backbone(release)
    if state:
        bb.model.load_state_dict(torch.load(state, map_location="cpu", weights_only=False)["model"])
    if processor_side:
        from ltopd.twins.architectures import twin_processor

        bb.processor = twin_processor(json.loads((Path(release) / "manifest.json").read_text())["twin"],
                                      bb.tokenizer, processor_side)
    return bb


def train_student(twin, method: str, training: dict, floor: int, selector: str, items: list[dict],
                  batch: int, seed: int):
    batches = [items[i:i + batch] for i in range(0, len(items), batch)]
    cfg = TrainConfig.from_profile(training, budget=BUDGET, floor=floor, seed=seed)
    assert cfg.selector == selector
    trainer = make_trainer(twin(), method_spec(method), cfg, len(batches))
    trainer.fit(batches, None)
    return trainer.student, trainer.history


def plateau_loss(hist) -> tuple[float, float, int]:
    """The loss over the curriculum's final plateau (the updates at the smallest keep ratio): the
    mean of its first fifth and of its last fifth, and its length. Unlike the first and last
    update's loss, the two are at one budget, so a fall is learning, not the curriculum."""
    low = min(h.metrics["keep_ratio"] for h in hist)
    losses = [h.metrics["loss"] for h in hist if h.metrics["keep_ratio"] == low]
    k = max(1, len(losses) // 5)
    return sum(losses[:k]) / k, sum(losses[-k:]) / k, len(losses)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--release", default="releases/qwen35-tiny")
    ap.add_argument("--state", help="a release build's pretrain_state.pt (its weights on --release's twin, with "
                                    "the profile entry's processor_side): probe a build before it is released")
    ap.add_argument("--backbone", default="qwen35-tiny", help="the profile's backbone entry (its evidence list)")
    ap.add_argument("--floors", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--benches", nargs="+", default=["vstar", "hrbench4k", "gqa", "pope", "textvqa"])
    ap.add_argument("--n", type=int, default=160, help="evaluation records per benchmark (seed 0)")
    ap.add_argument("--methods", nargs="+", default=["sft", "ltopd"])
    ap.add_argument("--steps", type=int, nargs="+", default=[300, 100],
                    help="updates per method (one value, or one per method)")
    ap.add_argument("--batch", type=int, nargs="+", default=[16, 8], help="questions per update (as --steps)")
    ap.add_argument("--lr-scale", type=float, nargs="+", default=[1.0], help="learning-rate multipliers to try")
    ap.add_argument("--item-seed", type=int, default=38, help="instruction-stream run seed")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="training seeds; with several, a pooled row per method: the mean over seeds of its "
                         "difference from CDPruner with the seeds' Student t interval")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    per = lambda xs: xs if len(xs) == len(args.methods) else xs * len(args.methods)  # noqa: E731
    steps, batches = per(args.steps), per(args.batch)

    cfg = config.load(args.config)
    selector = grid.reduction_defaults(cfg).selector
    evidence = set(cfg["backbones"][args.backbone].get("evidence", ()))
    records = eval_records(args.benches, args.n, 0, cfg["world"], evidence)
    n_items = max(s * b for s, b in zip(steps, batches))
    items = list(restyle(itertools.islice(instruct_stream(args.benches, args.item_seed, cfg["world"]), n_items),
                         evidence))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        "# Can training at 5% give back what pruning takes? Oracle ceiling and LT-OPD per design (measured)",
        "",
        f"Generated by `python {' '.join(shlex.quote(a) for a in sys.argv)}` (probes/regime_students.py; "
        f"its docstring defines the columns; git HEAD {head}). Twin: `{args.release}`"
        + (f" with the weights of `{args.state}`" if args.state else "") + "; evaluation seed 0, "
        f"n = {args.n} per benchmark ({', '.join(args.benches)}); training items: the benchmark twins' "
        f"instruction items (run seed {args.item_seed}), training seeds {', '.join(map(str, args.seeds))}; "
        f"selector {selector}, "
        f"budget {BUDGET:g}; the profile's `training` section (lr {cfg['training']['lr']}) times the lr scale; "
        f"one torch thread; costs in CPU-seconds.",
        "",
        "| floor | model | lr scale | updates x batch | retain % [95%] | minus CDPruner [95%] | recovery % | "
        + " | ".join(args.benches) + " | CPU-s |",
        "|---|---|---|---|---|---|---|" + "---|" * len(args.benches) + "---|",
    ]

    def row(floor, name, scale, shape, rows5, full, cdp, cpu, base):
        r = retain_ratio_ci(rows5, full)
        # told apart by identity: a student whose rows equal CDPruner's still gets its difference
        d = None if any(rows5 is x for x in (cdp, full)) else retain_diff_ci(rows5, cdp, full)
        rec = "-" if d is None else f"{100 * d[0] / (100 - base):.0f}"
        scores = " | ".join(f"{score(b, rows5[b])['score']:.1f}" for b in args.benches)
        est = lambda ci: f"{ci[0]:.1f} {format_ci(ci)}"  # noqa: E731
        line = (f"| {floor} | {name} | {scale} | {shape} | {est(r)} | "
                f"{'-' if d is None else est(d)} | {rec} | {scores} | {cpu:.0f} |")
        lines.append(line)
        print(line, flush=True)
        if args.out:  # after every row: a long probe's finished rows survive its interruption
            Path(args.out).write_text("\n".join(lines) + "\n")

    def pooled(floor, name, scale, shape, students, diffs, cdp, full, base, cpu):
        """The seeds' mean difference from CDPruner with two intervals: the item bootstrap of the
        seed-averaged retain (every seed's student and CDPruner on the same draws) and the Student t
        interval over the seeds' differences (training-seed variation alone)."""
        reps = retain_replicates({**students, "cdp": cdp}, full)
        mean = [sum(reps[k][i] for k in students) / len(students) for i in (0, 1)]
        boot = interval(mean[0] - reps["cdp"][0], mean[1] - reps["cdp"][1])
        t = seed_interval(diffs)
        line = (f"| {floor} | **{name}** | {scale} | {shape} | {base + boot.estimate:.1f} | "
                f"**{boot.estimate:.1f} {format_ci(boot)}** (seeds' t: {format_ci(t)}) | "
                f"{100 * boot.estimate / (100 - base):.0f} | " + " | ".join("" for _ in args.benches)
                + f" | {cpu:.0f} |")
        lines.append(line)
        print(line, flush=True)
        if args.out:
            Path(args.out).write_text("\n".join(lines) + "\n")

    print("\n".join(lines), flush=True)
    side = cfg["backbones"][args.backbone].get("processor_side")
    twin = lambda: load_twin(args.release, args.state, side)  # noqa: E731
    base_bb = twin()
    for floor in args.floors:
        t = time.process_time()
        out = evaluate(base_bb, records, [1.0, BUDGET], floor, selector)
        full, cdp = out[1.0], out[BUDGET]
        base = retain_ratio_ci(cdp, full)[0]  # CDPruner's retain, the recovery's reference (once per floor)
        row(floor, "full tokens", "-", "-", full, full, cdp, 0, base)
        row(floor, "CDPruner 5%", "-", "-", cdp, full, cdp, time.process_time() - t, base)
        for (method, s, b), scale in itertools.product(zip(args.methods, steps, batches), args.lr_scale):
            label = "oracle ceiling (SFT, labels)" if method == "sft" else method
            diffs, cpus, students = [], [], {}
            for seed in args.seeds:
                t = time.process_time()
                training = {**cfg["training"], "lr": {k: v * scale for k, v in cfg["training"]["lr"].items()}}
                student, hist = train_student(twin, method, training, floor, selector, items[:s * b], b, seed)
                rows5 = evaluate(student, records, [BUDGET], floor, selector)[BUDGET]
                first, last, n_low = plateau_loss(hist)
                cpus.append(time.process_time() - t)
                row(floor, f"{label} s{seed}; loss at 5% {first:.3f} -> {last:.3f} ({n_low} updates)", scale,
                    f"{s} x {b}", rows5, full, cdp, cpus[-1], base)
                diffs.append(retain_diff_ci(rows5, cdp, full)[0])
                students[seed] = rows5
            if len(args.seeds) > 1:
                pooled(floor, f"{label}, mean of {len(diffs)} seeds", scale, f"{s} x {b}", students, diffs, cdp, full,
                       base, sum(cpus))


if __name__ == "__main__":
    main()
