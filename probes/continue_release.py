"""Train a released twin further: the pipeline's own pretraining on extra stages, started from the
release's weights (a fresh optimiser), what appending those stages to its recipe would add without
rebuilding the stages before them. Resumable; the state is what gate_state.py reads:

    python probes/continue_release.py --release releases/qwen35-tiny --backbone qwen35-tiny \
        --stages '[{"name": "exist", "steps": 800, "lr": 0.0005, "lr_vision": 0.0005, "tasks": ["exists"]}]' \
        --state OUT
    python probes/gate_state.py --twin qwen35-tiny --state OUT/pretrain_state.pt \
        --tokenizer releases/qwen35-tiny --n 200

The extra stages' item streams are those they would get appended to the recipe (their index
counts on from the recipe's last stage) and this run starts a fresh optimiser and warm-up, so a
recipe with them appended, the first with `fresh_optimizer: true`, gives the same weights (and
`ltopd release-twin --warm-start` builds it from the release in the time of these stages).
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import yaml

from ltopd.models.loading import load_backbone
from ltopd.twins import job as twin_job
from ltopd.twins.pretrain import pretrain
from ltopd.twins.release import twin_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", required=True, help="a release folder")
    ap.add_argument("--backbone", required=True, help="its entry in --config (its recipe)")
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--stages", required=True, help="the extra stages, a JSON list in the recipe's stage format")
    ap.add_argument("--state", required=True, help="state folder (resumable)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--init", help="start from this saved state's weights (a --snapshots file), not the release's")
    ap.add_argument("--index-offset", type=int, help="the recipe index of the first extra stage (default: right after "
                    "the release's own stages); with --init, count the stages that state already ran")
    ap.add_argument("--snapshots", default="", help="comma-separated update counts at which to save the "
                    "weights as STATE/step<N>.pt as well (gate_state.py reads them): the end of each stage")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = twin_spec(yaml.safe_load(open(args.config)), args.backbone)
    extra = json.loads(args.stages)
    pt = {**spec["pretrain"], "stages": extra}
    offset = len(spec["pretrain"]["stages"]) if args.index_offset is None else args.index_offset
    sources = {s["name"]: twin_job.stage_source(s, offset + i, pt, spec["world"]) for i, s in enumerate(extra)}
    backbone = load_backbone(args.release)  # its own tokenizer (not AutoTokenizer's: see loading.load_tokenizer)
    if args.init:
        backbone.model.load_state_dict(torch.load(args.init, map_location="cpu", weights_only=False)["model"])
    t0 = time.perf_counter()

    snapshots = {int(x) for x in args.snapshots.split(",") if x}

    def on_step(log) -> None:
        if log.step in snapshots:
            torch.save({"model": backbone.model.state_dict(), "steps": log.step, "wall_s": log.elapsed_s},
                       f"{args.state}/step{log.step}.pt")
        if log.step % 50 == 0:
            print(json.dumps({"step": log.step, "stage": log.stage, "loss": round(log.loss, 4),
                              "s": round(time.perf_counter() - t0)}), flush=True)

    lr_scale = spec["backbones"][args.backbone].get("lr_scale", 1.0)
    metrics = pretrain(backbone, sources, twin_job.pretrain_config(pt, lr_scale), on_step=on_step,
                       state_dir=args.state, checkpoint_every=100,
                       recipe={"release": args.release, "init": args.init, "stages": extra, "offset": offset})
    print(json.dumps({"done": metrics.steps, "wall_s": round(metrics.wall_s)}), flush=True)


if __name__ == "__main__":
    main()
