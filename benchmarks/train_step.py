"""One training update's wall time, split into rollout / teacher scoring / student forward /
backward + optimiser, for each trained method on a profile (default: the embedded default).

Needs a built twin and LT-14K (`snakemake --cores all models/qwen35-tiny data/lt14k`):

    python benchmarks/train_step.py --updates 3 [--methods ltopd sft] [--model models/qwen35-tiny]
        [--sharing both]   # also without the shared vision pass (training.share_features), side by side

Prints a table (mean over the updates after the first, which pays one-off warm-up costs) and the
projected wall time of a full run of each method.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from ltopd import config
from ltopd.grid import reduction_defaults
from ltopd.train import job
from ltopd.train.methods import TRAINED, method_spec

PARTS = ("rollout_s", "teacher_s", "student_s")


def measure(model: str, data: str, method: str, training: dict, budget: float, floor: int, updates: int,
            method_params: dict | None = None) -> dict:
    trainer, batches = job.build(model, data, method, training, budget, floor, seed=0, method_params=method_params)
    total = trainer.total_steps
    t0, c0 = time.perf_counter(), time.process_time()
    logs = trainer.fit(batches, None, stop_after=updates)  # no checkpoints: timing only
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    kept = logs[1:] or logs
    row = {p: statistics.mean(log.metrics.get(p, 0.0) for log in kept) for p in PARTS}
    row["step_s"] = statistics.mean(log.metrics["step_s"] for log in kept)
    row["optim_s"] = row["step_s"] - sum(row[p] for p in PARTS)  # clip, AdamW step, EMA
    row["first_step_s"] = logs[0].metrics["step_s"]
    row["run_min"] = row["step_s"] * total / 60
    row["total"] = total
    row["wall_s"] = wall
    row["cpu_s"] = cpu / len(logs)  # CPU-seconds per update, the first included (robust on shared cores)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--model", default="models/qwen35-tiny")
    ap.add_argument("--data", default="data/lt14k")
    ap.add_argument("--methods", nargs="+", default=sorted(TRAINED))
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sharing", choices=("on", "off", "both"), default="on",
                    help="one vision pass per model and update (on, the default), a pass per use (off), or both")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = config.load(args.config)
    budget = reduction_defaults(cfg).budget
    cols = ("rollout_s", "teacher_s", "student_s", "optim_s", "step_s", "first_step_s", "cpu_s", "run_min")
    shares = {"on": [True], "off": [False], "both": [False, True]}[args.sharing]
    print(f"profile {cfg['profile']}: {args.model}, budget {budget:g}, {args.updates} updates per method, "
          f"{args.threads} thread(s); seconds per update (mean after the first)")
    print(f"{'method':<30}" + "".join(f"{c:>14}" for c in cols))
    for m in args.methods:
        section = method_spec(m).section  # rl / epic / llava_mini: the family's own profile section
        rows = {}
        for share in shares:
            training = {**cfg["training"], "share_features": share}
            rows[share] = r = measure(args.model, args.data, m, training, budget, cfg["reduction"]["floor"],
                                      args.updates, cfg.get(section) if section else None)
            name = m if share else f"{m} (no sharing)"
            print(f"{name:<30}" + "".join(f"{r[c]:>14.3f}" for c in cols), flush=True)
        if len(rows) == 2:
            print(f"{'  sharing speed-up':<30}{rows[False]['step_s'] / rows[True]['step_s']:>14.2f}x wall per update, "
                  f"{rows[False]['cpu_s'] / rows[True]['cpu_s']:.2f}x CPU per update", flush=True)
    print("cpu_s: CPU-seconds per update (first included); run_min: projected minutes for all updates of one "
          "run at this speed (one thread).")


if __name__ == "__main__":
    main()
