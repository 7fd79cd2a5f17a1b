"""What a twin answers to a yes/no benchmark twin, per category: how often it says "yes", how often
"yes" is right, and its accuracy (a constant answer shows as said-yes 0.00 or 1.00 at accuracy 0.50):

    python probes/yes_no_breakdown.py --release releases/qwen35-tiny [--benchmark mme] [--n 400]
    python probes/yes_no_breakdown.py --state STATE/pretrain_state.pt --twin qwen35-tiny \
        --tokenizer releases/qwen35-tiny

Full tokens, greedy, the items of seed --seed (not the gates' or Table 2's). One thread.
"""
from __future__ import annotations

import argparse
import collections
import json

import torch
import yaml

import twin_source  # probes/twin_source.py, beside this script
from ltopd.bench.evaluate import evaluate_settings
from ltopd.bench.suites import synthetic_records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    twin_source.add_arguments(ap)
    ap.add_argument("--config", default="config/default.yaml", help="profile: world and floor")
    ap.add_argument("--benchmark", default="mme", choices=("mme", "pope"))
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=4242)
    args = ap.parse_args()
    torch.set_num_threads(1)
    spec = yaml.safe_load(open(args.config))
    backbone, what = twin_source.load(ap, args)
    records = synthetic_records(args.benchmark, args.n, args.seed, spec["world"])
    (rows, score), = evaluate_settings(backbone, records, args.benchmark, [(1.0, "cdpruner")],
                                       spec["reduction"]["floor"], spec["evaluation"]["batch_size"],
                                       progress=False)
    counts = collections.defaultdict(collections.Counter)
    for record, row in zip(records, rows):
        meta = json.loads(record["meta"])
        category = meta.get("category") or meta.get("split") or meta["template"]
        said = row["prediction"].strip().lower().startswith("yes")
        truth = record["answer"].strip().lower() == "yes"
        counts[category].update(n=1, said_yes=said, yes=truth, right=said == truth)
    print(f"{what}: {args.benchmark} score {score['score']:.1f} on {len(records)} items (seed {args.seed})\n")
    print("| category | n | said yes | is yes | accuracy |\n|---|---|---|---|---|")
    for category, c in sorted(counts.items()):
        print(f"| {category} | {c['n']} | {c['said_yes'] / c['n']:.2f} | {c['yes'] / c['n']:.2f} | "
              f"{c['right'] / c['n']:.2f} |")


if __name__ == "__main__":
    main()
