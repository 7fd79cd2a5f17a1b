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
from transformers import AutoTokenizer

from ltopd.models import release_job
from ltopd.models.loading import load_backbone
from ltopd.models.release import read_manifest, reduced_key
from ltopd.models.twins import twin_backbone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--state", help="a pretrain_state.pt (with --twin and --tokenizer)")
    src.add_argument("--release", help="a release folder")
    ap.add_argument("--twin")
    ap.add_argument("--tokenizer")
    ap.add_argument("--config", default="config/default.yaml", help="profile: world, floor and benchmarks")
    ap.add_argument("--n", type=int, default=100, help="gate items per benchmark")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = yaml.safe_load(open(args.config))
    cfg["pretrain"]["gates"] = {**(cfg["pretrain"].get("gates") or {}), "n": args.n}
    if args.release:
        backbone = load_backbone(args.release)
        what = f"{args.release} ({read_manifest(args.release)['pretraining']['steps']} updates)"
    else:
        if not (args.twin and args.tokenizer):
            ap.error("--state needs --twin and --tokenizer")
        backbone = twin_backbone(args.twin, AutoTokenizer.from_pretrained(args.tokenizer), seed=0)
        state = torch.load(args.state, map_location="cpu", weights_only=False)
        backbone.model.load_state_dict(state["model"])
        what = f"{args.twin} after {state['steps']} updates ({state['wall_s'] / 60:.0f} min)"
    backbone.model.eval()
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
