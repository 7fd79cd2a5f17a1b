"""The twin a benchmark script probes: a release folder, or a pretraining state saved by a running
or killed build (`--state` with `--twin` and `--tokenizer`)."""
from __future__ import annotations

import argparse

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.loading import load_backbone, load_tokenizer
from ltopd.models.manifest import read_manifest
from ltopd.twins.architectures import twin_backbone


def add_arguments(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--release", help="a release folder")
    src.add_argument("--state", help="a pretrain_state.pt (with --twin and --tokenizer)")
    ap.add_argument("--twin")
    ap.add_argument("--tokenizer")


def load(ap: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Backbone, str]:
    """(backbone in eval mode, what it is: the folder and its updates, or the twin and state step)."""
    if args.release:
        backbone = load_backbone(args.release)
        what = f"{args.release} ({read_manifest(args.release)['pretraining']['steps']} updates)"
    else:
        if not (args.twin and args.tokenizer):
            ap.error("--state needs --twin and --tokenizer")
        backbone = twin_backbone(args.twin, load_tokenizer(args.tokenizer), seed=0)
        state = torch.load(args.state, map_location="cpu", weights_only=False)
        backbone.model.load_state_dict(state["model"])
        what = (f"{args.twin} after {state['steps']} updates ({state['wall_s'] / 60:.0f} min)" if "steps" in state
                else f"{args.twin} from {args.state}")  # a state with weights only
    backbone.model.eval()
    return backbone, what
