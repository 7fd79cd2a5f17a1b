"""The twins' held-out probe (pretrain.heldout: questions the twin answers far above chance)
applied to every trained student: does training at 5% recover what pruning to 5% lost?

Needs a finished default run (twin + students):

    python probes/probe_students.py [--config config/default.yaml] [--root .]

Prints accuracy at full tokens and at the probe's ratio for each selector, for the base twin and
each student (students are evaluated exactly as the base twin: same records, same selectors).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from ltopd import catalog, config, grid
from ltopd.models.loading import load_backbone
from ltopd.twins.job import heldout_records, probe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--root", default=".", help="where the run's models/ live")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = config.load(args.config)
    backbone, seed = cfg["grid"]["backbones"][0], cfg["seeds"][0]
    p = grid.paths({**cfg, "out_root": args.root})
    held = cfg["pretrain"]["heldout"]
    records = heldout_records(cfg["pretrain"], cfg["world"])
    models = {"base twin": p["twin"].format(backbone=backbone)}
    for m in cfg["grid"]["methods"]:
        if catalog.METHODS[m].kind == "trained":
            models[m] = p["student"].format(backbone=backbone, method=m, seed=seed)
    cols = ["full"] + [f"{s}-{held['ratio']:g}" for s in held["selectors"]]
    print(f"held-out probe: {len(records)} questions ({', '.join(held['tasks'])}), {backbone}, "
          f"question-only baseline printed last")
    print(f"| model | {' | '.join(cols)} |\n|---|" + "---|" * len(cols))
    baseline = None
    for name, path in models.items():
        if not Path(path).is_dir():
            print(f"| {name} | (missing: {path}) |")
            continue
        out = probe(load_backbone(path), records, held, cfg["reduction"]["floor"], progress=False)
        baseline = out["question_only"]
        print(f"| {name} | " + " | ".join(f"{out[f'{c}/all']:.3f}" for c in cols) + " |", flush=True)
    print(f"question-only baseline: {baseline:.3f}")


if __name__ == "__main__":
    main()
