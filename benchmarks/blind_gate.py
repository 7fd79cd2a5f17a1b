"""Does a twin's score come from the image? The same twin on the gate items with and without
their images (a blind twin: a stronger question-only baseline than the fitted answer prior,
because it keeps the twin's own text skills, e.g. looking up the letter of the option it names):

    python benchmarks/blind_gate.py --release releases/qwen35-tiny [--bench mmbench,mmmu] [--n 200]
    python benchmarks/blind_gate.py --twin qwen35-tiny --state STATE.pt --tokenizer releases/qwen35-tiny \
        [--evidence pope]

Prints per twin the official score with the images, without them, and their difference.
Measurements: docs/pretraining.md ("Naming first").
"""
from __future__ import annotations

import argparse

import torch
import yaml

import twin_source  # benchmarks/twin_source.py, beside this script
from ltopd.bench.evaluate import evaluate_settings
from ltopd.bench.evidence import instructed, text_only
from ltopd.bench.suites import synthetic_records
from ltopd.bench.suites.instruct import GATE_SEED


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    twin_source.add_arguments(ap)
    ap.add_argument("--bench", default="hrbench4k,mmbench,mmmu,muirbench,pope")
    ap.add_argument("--config", default="config/default.yaml", help="profile: the world of the gate items")
    ap.add_argument("--n", type=int, default=200, help="gate items per benchmark")
    ap.add_argument("--evidence", default="", help="twins asked evidence-first, as a continuation with their "
                    "`evidence` stage key was trained (the question with its instruction: ltopd.bench.evidence)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    world = yaml.safe_load(open(args.config))["world"]  # as the release's gates draw them
    backbone, what = twin_source.load(ap, args)
    print(f"{what}, {args.n} gate items per benchmark\n")
    print("| benchmark | with the images | without them (blind) | difference |\n|---|---|---|---|")
    for bench in args.bench.split(","):
        records = synthetic_records(bench, args.n, GATE_SEED, world)
        if bench in args.evidence.split(","):
            records = [instructed(r, bench) for r in records]
        scores = []
        for recs in (records, [text_only(r) for r in records]):
            [(_, metrics)] = evaluate_settings(backbone, recs, bench, [(1.0, "cdpruner")], progress=False)
            scores.append(metrics["score"])
        print(f"| {bench} | {scores[0]:.1f} | {scores[1]:.1f} | {scores[0] - scores[1]:+.1f} |", flush=True)


if __name__ == "__main__":
    main()
