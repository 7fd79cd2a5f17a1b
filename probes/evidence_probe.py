"""Does a twin take the step from evidence to answer? Teacher-forced accuracy on evidence-first
replies ("cyan, so B"; ltopd.bench.evidence) of the gate items of some benchmark twins:

    python probes/evidence_probe.py --release releases/qwen35-tiny [--bench pope,mmbench] [--n 200]
    python probes/evidence_probe.py --twin qwen35-tiny --state STATE.pt --tokenizer releases/qwen35-tiny

Per twin and per condition (with the image, and without it: the text alone), three accuracies
of the argmax next token under teacher forcing: `evidence` (every evidence token right: the
naming, from the image), `answer` (the answer tokens after ", so ", given the true evidence: the
comparison or the letter lookup, a step between words of the context), and `reply` (both).
Measurements: docs/lab/pretraining-record.md ("Naming first").
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch
import yaml

import twin_source  # probes/twin_source.py, beside this script
from ltopd.bench.evidence import EVIDENCE, text_only, with_evidence
from ltopd.bench.suites import synthetic_records
from ltopd.bench.suites.instruct import GATE_SEED
from ltopd.models.prompt import build_target

SEP = ", so "


def spans(tok, answer: str, target: str) -> tuple[int, int]:
    """Token counts of the evidence and of the evidence with ", so" in the target's own
    tokenisation (checked to be prefixes of it)."""
    ids = tok(target, add_special_tokens=False)["input_ids"]
    evidence = answer.rsplit(SEP, 1)[0]
    counts = []
    for prefix in (evidence, evidence + SEP.rstrip()):
        head = tok(prefix, add_special_tokens=False)["input_ids"]
        if ids[: len(head)] != head:
            raise ValueError(f"{prefix!r} does not tokenise as a prefix of {target!r}")
        counts.append(len(head))
    return counts[0], counts[1]


def marks(backbone, records: list[dict], batch: int = 50) -> dict[str, float]:
    """Teacher-forced accuracies (evidence, answer, reply) over `records` (all evidence-first)."""
    tok = backbone.processor.tokenizer
    out = {"evidence": [], "answer": [], "reply": []}
    for k in range(0, len(records), batch):
        recs = records[k : k + batch]
        targets = [build_target(r, "answer") for r in recs]
        b = backbone.encode(recs, targets)
        with torch.no_grad():
            logits = backbone.forward(b, with_labels=False)[0].logits
        for i, (r, target) in enumerate(zip(recs, targets)):
            at = torch.nonzero(b.response_mask[i])[:, 0]
            right = (logits[i, at - 1].argmax(-1) == b.labels[i, at]).tolist()
            evidence, glue = spans(tok, r["answer"], target)
            out["evidence"].append(all(right[:evidence]))
            out["answer"].append(all(right[glue : len(right) - 1]))  # the answer, without '</answer>'
            out["reply"].append(all(right))
    return {k: round(float(np.mean(v)), 3) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    twin_source.add_arguments(ap)
    ap.add_argument("--bench", default=",".join(EVIDENCE), help=f"comma-separated, of {sorted(EVIDENCE)}")
    ap.add_argument("--config", default="config/default.yaml", help="profile: the world of the gate items")
    ap.add_argument("--n", type=int, default=200, help="gate items per benchmark (the styled ones are probed)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    world = yaml.safe_load(open(args.config))["world"]  # as the release's gates draw them
    backbone, what = twin_source.load(ap, args)
    print(what)
    for bench in args.bench.split(","):
        plain = synthetic_records(bench, args.n, GATE_SEED, world)
        styled = [with_evidence(r, bench) for r in plain]
        styled = [r for r, p in zip(styled, plain) if r is not p]
        row = {"benchmark": bench, "n": len(styled), "image": marks(backbone, styled),
               "text": marks(backbone, [text_only(r) for r in styled])}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
