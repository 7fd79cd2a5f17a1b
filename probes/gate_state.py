"""How is a twin doing on Table 2's gates? The release gates (ltopd.twins.build.twin_gates:
the out-of-sample question-only baseline, the blind twin, full tokens, CDPruner at 5%) of a saved
pretraining state (a running or killed `release_twin` job's, or a --snapshots file of
continue_release.py), without stopping it:

    python probes/gate_state.py --twin qwen35-tiny \
        --state train_state/release/qwen35-tiny/pretrain_state.pt --tokenizer models/tokenizer [--n 100]

or of a release folder at another number of gate items or on some benchmarks only (without --n,
each benchmark's evaluation n, as the manifest's gates):

    python probes/gate_state.py --release releases/qwen35-tiny --n 1000 --bench pope,gqa,mme

`--evidence pope` asks POPE with the twin's instruction, as a twin whose entry has
`evidence: [pope]` is asked (a release reads its own entry from --config). Prints the update
the state was saved at and, per benchmark twin, both baselines, full tokens, CDPruner at 5% and
the gate's verdict (3 SE over both baselines).
"""
from __future__ import annotations

import argparse

import torch
import yaml

import twin_source  # probes/twin_source.py, beside this script
from ltopd.models.manifest import read_manifest
from ltopd.report.releases import gate_table
from ltopd.twins.build import twin_gates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    twin_source.add_arguments(ap)
    ap.add_argument("--config", default="config/default.yaml", help="profile: world, floor and benchmarks")
    ap.add_argument("--n", type=int, help="gate items per benchmark (default: its evaluation n, as the manifest's)")
    ap.add_argument("--bench", help="comma-separated benchmark twins (default: the profile's)")
    ap.add_argument("--evidence", help="comma-separated twins asked evidence-first (default: the twin's entry)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = yaml.safe_load(open(args.config))
    if args.n:
        cfg["pretrain"]["gates"] = {**(cfg["pretrain"].get("gates") or {}), "n": args.n}
    if args.bench:
        cfg["evaluation"]["benchmarks"] = {b: cfg["evaluation"]["benchmarks"][b] for b in args.bench.split(",")}
    name = read_manifest(args.release)["recipe"]["backbone"] if args.release else args.twin
    entry = cfg["backbones"].setdefault(name, {})
    if args.evidence is not None:
        entry["evidence"] = [b for b in args.evidence.split(",") if b]
    backbone, what = twin_source.load(ap, args)
    gates = twin_gates(backbone, cfg, name)
    print(f"{what}; asked evidence-first: {entry.get('evidence') or 'none'}\n")
    print("\n".join(gate_table(gates)), flush=True)


if __name__ == "__main__":
    main()
