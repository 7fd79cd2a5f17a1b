"""The answers a pretraining stage teaches: yes / no counts per item template over the first --n
items of one stage of a twin's recipe (is a yes/no drift a label skew?):

    python probes/stage_answers.py [--backbone qwen35-tiny] [--stage mix] [--n 3000]
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json

import yaml

from ltopd.twins import job as twin_job
from ltopd.twins.release import twin_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--backbone", default="qwen35-tiny")
    ap.add_argument("--stage", default="mix")
    ap.add_argument("--n", type=int, default=3000)
    args = ap.parse_args()
    spec = twin_spec(yaml.safe_load(open(args.config)), args.backbone)
    stages = spec["pretrain"]["stages"]
    index = next((i for i, s in enumerate(stages) if s["name"] == args.stage), None)
    if index is None:
        ap.error(f"--stage {args.stage!r}: {args.backbone}'s stages are {[s['name'] for s in stages]}")
    source = twin_job.stage_source(stages[index], index, spec["pretrain"], spec["world"])
    counts = collections.Counter()
    for record in itertools.islice(source(0), args.n):
        answer = str(record["answer"]).strip().lower()
        if answer in ("yes", "no"):
            counts[json.loads(record["meta"])["template"], answer] += 1  # e.g. mme/color, exists/color-shape
    print(f"{args.backbone} stage {args.stage!r}, first {args.n} items: yes / no answers by template\n")
    print("| template | yes | no |\n|---|---|---|")
    for template in sorted({k for k, _ in counts}):
        print(f"| {template} | {counts[template, 'yes']} | {counts[template, 'no']} |")


if __name__ == "__main__":
    main()
