"""How is a release build doing? The gates of a saved pretraining state (a running or killed
`release_twin` job's train_state/release/<backbone>/pretrain_state.pt), without stopping it:

    python benchmarks/gate_state.py --twin qwen35-tiny \
        --state train_state/release/qwen35-tiny/pretrain_state.pt --tokenizer models/tokenizer [--n 100]

or of a release folder at another number of gate items (the manifest's gates use 200):

    python benchmarks/gate_state.py --release releases/qwen35-tiny --n 1000

Prints the update the state was saved at and, per benchmark twin, the out-of-sample
question-only baseline, full tokens, CDPruner at 5% and the margin in standard errors (the same
gate code and held-out items as the release's manifest, fewer items by default).
"""
from __future__ import annotations

import argparse

import torch
import yaml

import twin_source  # benchmarks/twin_source.py, beside this script
from ltopd.models import release_job
from ltopd.models.release import reduced_key


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    twin_source.add_arguments(ap)
    ap.add_argument("--config", default="config/default.yaml", help="profile: world, floor and benchmarks")
    ap.add_argument("--n", type=int, default=100, help="gate items per benchmark")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = yaml.safe_load(open(args.config))
    cfg["pretrain"]["gates"] = {**(cfg["pretrain"].get("gates") or {}), "n": args.n}
    backbone, what = twin_source.load(ap, args)
    gates = release_job.twin_gates(backbone, cfg)
    s = gates["settings"]
    reduced = reduced_key(s)
    print(f"{what}, {s['n']} items per benchmark\n")
    print(f"| benchmark | question-only | full | {reduced} | full - QO (SE) | gate |\n|---|---|---|---|---|---|")
    for bench, g in gates["benchmarks"].items():
        print(f"| {bench} | {g['question_only']:.1f} | {g['full']:.1f} | {g[reduced]:.1f} | "
              f"{g['diff']:+.1f} ({g['se']:.1f}) | {'pass' if g['passed'] else 'fail'} ({g['margin_se']:+.1f} SE) |")


if __name__ == "__main__":
    main()
