"""`ltopd build-lt14k | build-tokenizer | build-bench`: the data the pipeline trains, pretrains and
evaluates on.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ltopd.pipeline.spec import add_source
from ltopd.pipeline.spec import job_inputs as _job_inputs  # every job's first step


def add_parser(sub: argparse._SubParsersAction) -> None:
    for name, help, fn in (
        ("build-lt14k", "sample LT-14K from its four sources into a `datasets` dataset + manifest", build_lt14k),
        ("build-tokenizer", "learn the tiny twins' byte-level BPE from the pipeline's own text", build_tokenizer),
    ):
        s = sub.add_parser(name, help=help)
        add_source(s, name)
        s.add_argument("--out", required=True)
        s.add_argument("--metrics", help="small JSON summary (DVC metrics)")
        s.add_argument("--wildcards", default="{}")
        s.set_defaults(func=fn)
    s = sub.add_parser("build-bench", help="build one benchmark's records (synthetic twin or real data) for evaluation")
    add_source(s, "build-bench")
    s.add_argument("--benchmark", required=True)
    s.add_argument("--seed", type=int, required=True, help="evaluation seed")
    s.add_argument("--out", required=True, help="folder for the records (a `datasets` dataset)")
    s.add_argument("--text-only", action="store_true",
                   help="save the records without their images (the question-only baseline's fit records)")
    s.set_defaults(func=build_bench)


def build_lt14k(args: argparse.Namespace) -> int:
    from ltopd.atomic import write_json
    from ltopd.data import lt14k
    from ltopd.tracking import job_run

    spec, settings = _job_inputs(args, ("lt14k", "world"))
    with job_run(settings, args.rule, json.loads(args.wildcards), spec) as run:
        manifest = lt14k.build(spec["lt14k"], spec["world"], args.out)
        summary = {k: manifest[k] for k in ("num_questions", "build_seconds", "questions_per_second")}
        summary.update({f"source_{k}": v for k, v in manifest["per_source"].items()})
        run.log_metrics(summary)
        run.set_tags({"content_sha256": manifest["content_sha256"]})
        run.log_artifact(Path(args.out) / "manifest.json")
        if args.metrics:  # what the data is, not how fast it was built: the file is the same on every machine
            timing = ("build_seconds", "questions_per_second")
            write_json(args.metrics, {**{k: v for k, v in summary.items() if k not in timing},
                                      "content_sha256": manifest["content_sha256"]})
    mixes = sorted({tuple(sorted(b.items())) for b in manifest["per_batch"]})
    print(f"LT-14K: {manifest['num_questions']} questions in {manifest['num_batches']} batches of "
          f"{manifest['batch_size']} -> {args.out}")
    print(f"  per source: {manifest['per_source']}; distinct batch mixes: {[dict(m) for m in mixes]}")
    print(f"  content sha256 {manifest['content_sha256'][:16]}...; built in {manifest['build_seconds']:.1f} s "
          f"({manifest['questions_per_second']} questions/s)")
    return 0


def build_tokenizer(args: argparse.Namespace) -> int:
    from ltopd.atomic import atomic_dir
    from ltopd.catalog import BENCHMARKS
    from ltopd.tracking import job_run
    from ltopd.twins.corpus import corpus
    from ltopd.twins.tokenizer import build_tokenizer

    spec, settings = _job_inputs(args, ("pretrain", "world"))
    tk = spec["pretrain"]["tokenizer"]
    with job_run(settings, args.rule, json.loads(args.wildcards), spec) as run:
        texts = list(corpus(spec["world"], tk["per_kind"], BENCHMARKS))
        tokenizer = build_tokenizer(texts, tk["vocab_size"])
        with atomic_dir(args.out) as tmp:
            tokenizer.save_pretrained(str(tmp))
        n_tokens = sum(len(tokenizer(t)["input_ids"]) for t in texts)
        run.log_metrics({"vocab": len(tokenizer), "corpus_texts": len(texts), "tokens_per_text": n_tokens / len(texts)})
    print(f"tokenizer: {len(tokenizer)} ids from {len(texts)} texts "
          f"({n_tokens / len(texts):.1f} tokens per text) -> {args.out}")
    return 0


def build_bench(args: argparse.Namespace) -> int:
    from ltopd.bench.store import build_records, save_records
    from ltopd.tracking import job_run

    spec, settings = _job_inputs(args, ("evaluation", "world"))
    entries = spec["evaluation"]["benchmarks"]
    if args.benchmark not in entries:
        raise SystemExit(f"evaluation.benchmarks has no entry for {args.benchmark!r}; it has {sorted(entries)}")
    with job_run(settings, args.rule, {"benchmark": args.benchmark, "seed": str(args.seed)}, spec) as run:
        records = build_records(args.benchmark, entries[args.benchmark], args.seed, spec["world"])
        if args.text_only:  # drawn as the evaluation's records are (the same questions), never encoded
            records = [{**r, "images": []} for r in records]
        save_records(records, args.out)
        run.log_metrics({"records": len(records), "images": sum(len(r["images"]) for r in records)})
    kind = "real data" if entries[args.benchmark].get("path") else f"synthetic twin, seed {args.seed}"
    text = ", without images" if args.text_only else ""
    print(f"{args.benchmark}: {len(records)} records ({kind}{text}) -> {args.out}")
    return 0
