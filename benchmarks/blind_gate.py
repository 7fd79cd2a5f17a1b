"""Does a twin's score come from the image? The same twin on the gate items with and without
their images (a blind twin: a stronger question-only baseline than the fitted answer prior,
because it keeps the twin's own text skills, e.g. looking up the letter of the option it names):

    python benchmarks/blind_gate.py --release releases/qwen35-tiny [--bench mmbench,mmmu] [--n 200]
    python benchmarks/blind_gate.py --twin qwen35-tiny --state STATE.pt --tokenizer releases/qwen35-tiny \
        [--evidence pope]

Prints per twin the official score with the images, without them, their difference, the
question-only baseline (ltopd.report.gates.question_only, fitted on the gate's fit seed) and
Table 2's gate verdict on these items (3 SE over both baselines).
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
from ltopd.report.gates import gate, question_only


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
    print("| benchmark | with the images | without them (blind) | difference | question-only | gate (Table 2's) |\n"
          "|---|---|---|---|---|---|")
    for bench in args.bench.split(","):
        records = synthetic_records(bench, args.n, GATE_SEED, world)
        fit = synthetic_records(bench, max(args.n, 400), GATE_SEED + 1, world)  # the question-only fit set
        if bench in args.evidence.split(","):
            records, fit = ([instructed(r, bench) for r in recs] for recs in (records, fit))
        (full, m_full), (blind, m_blind) = (
            evaluate_settings(backbone, recs, bench, [(1.0, "cdpruner")], progress=False)[0]
            for recs in (records, [text_only(r) for r in records]))
        qo, _ = question_only([dict(r) for r in full], bench, fit)
        verdict = gate(full, qo, bench, blind_rows=blind)
        print(f"| {bench} | {m_full['score']:.1f} | {m_blind['score']:.1f} | {m_full['score'] - m_blind['score']:+.1f} "
              f"| {verdict.qo:.1f} | {verdict.verdict} |", flush=True)

if __name__ == "__main__":
    main()
