"""One training update's wall time, split into rollout / teacher scoring / student forward /
backward + optimiser, for each trained method on a profile (default: the embedded default).

Needs a built twin and LT-14K (`snakemake --cores all models/qwen35-tiny data/lt14k`):

    python benchmarks/train_step.py --updates 3 [--methods ltopd sft] [--model models/qwen35-tiny]

Prints a table (mean over the updates after the first, which pays one-off warm-up costs) and the
projected wall time of a full run of each method.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from ltopd import config
from ltopd.grid import target_budget
from ltopd.train import job
from ltopd.train.methods import TRAINED, method_spec

PARTS = ("rollout_s", "teacher_s", "student_s")


def measure(model: str, data: str, method: str, training: dict, budget: float, floor: int, updates: int,
            method_params: dict | None = None) -> dict:
    trainer, batches = job.build(model, data, method, training, budget, floor, seed=0, method_params=method_params)
    total = trainer.total_steps
    t0 = time.perf_counter()
    logs = trainer.fit(batches, None, stop_after=updates)  # no checkpoints: timing only
    wall = time.perf_counter() - t0
    kept = logs[1:] or logs
    row = {p: statistics.mean(log.metrics.get(p, 0.0) for log in kept) for p in PARTS}
    row["step_s"] = statistics.mean(log.metrics["step_s"] for log in kept)
    row["optim_s"] = row["step_s"] - sum(row[p] for p in PARTS)  # clip, AdamW step, EMA
    row["first_step_s"] = logs[0].metrics["step_s"]
    row["run_min"] = row["step_s"] * total / 60
    row["total"] = total
    row["wall_s"] = wall
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--model", default="models/qwen35-tiny")
    ap.add_argument("--data", default="data/lt14k")
    ap.add_argument("--methods", nargs="+", default=sorted(TRAINED))
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = config.load(args.config)
    budget = target_budget(cfg)
    cols = ("rollout_s", "teacher_s", "student_s", "optim_s", "step_s", "first_step_s", "run_min")
    print(f"profile {cfg['profile']}: {args.model}, budget {budget:g}, {args.updates} updates per method, "
          f"{args.threads} thread(s); seconds per update (mean after the first)")
    print(f"{'method':<22}" + "".join(f"{c:>18}" for c in cols))
    for m in args.methods:
        section = method_spec(m).section  # rl / epic / llava_mini: the family's own profile section
        r = measure(args.model, args.data, m, cfg["training"], budget, cfg["reduction"]["floor"], args.updates,
                    cfg.get(section) if section else None)
        print(f"{m:<22}" + "".join(f"{r[c]:>18.3f}" for c in cols), flush=True)
    print("run_min: projected minutes for all updates of one run at this speed (one thread).")


if __name__ == "__main__":
    main()
