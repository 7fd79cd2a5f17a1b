"""`ltopd <subcommand>`: the entry point of every Snakemake rule (each rule runs one subcommand).

A job gets its settings either from a profile (`--config config/default.yaml`, validated) or, as
Snakemake passes them, as `--spec` JSON holding just the config sections the job depends on
(so Snakemake's params trigger reruns exactly the affected jobs).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {}


def command(name: str, help: str):
    def deco(fn):
        COMMANDS[name] = (fn, help)
        return fn
    return deco


def _job_inputs(args: argparse.Namespace, sections: tuple[str, ...]):
    """(spec, MLflow settings) from --spec (Snakemake) or --config (by hand)."""
    from ltopd import config as config_mod
    from ltopd.tracking import Settings

    if args.config:
        cfg = config_mod.load(args.config)
        return {"profile": cfg["profile"], **{k: cfg[k] for k in sections}}, Settings.from_config(cfg)
    if not args.spec:
        raise SystemExit("give --config PROFILE.yaml or --spec JSON")
    spec = json.loads(args.spec)
    missing = [k for k in ("profile", *sections) if k not in spec]
    if missing:
        raise SystemExit(f"--spec lacks section(s) {missing}")
    return spec, Settings.from_env()


@command("validate", "check a profile against the schema and print the experiment grid size")
def _validate(args: argparse.Namespace) -> int:
    from ltopd import config as config_mod
    from ltopd.grid import eval_jobs

    cfg = config_mod.load(args.config)
    print(f"{args.config}: valid profile {cfg['profile']!r}; {sum(1 for _ in eval_jobs(cfg))} evaluation jobs in the grid")
    return 0


@command("build-lt14k", "sample LT-14K from its four sources into a `datasets` dataset + manifest")
def _build_lt14k(args: argparse.Namespace) -> int:
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
        if args.metrics:
            write_json(args.metrics, {**summary, "content_sha256": manifest["content_sha256"]})
    mixes = sorted({tuple(sorted(b.items())) for b in manifest["per_batch"]})
    print(f"LT-14K: {manifest['num_questions']} questions in {manifest['num_batches']} batches of "
          f"{manifest['batch_size']} -> {args.out}")
    print(f"  per source: {manifest['per_source']}; distinct batch mixes: {[dict(m) for m in mixes]}")
    print(f"  content sha256 {manifest['content_sha256'][:16]}...; built in {manifest['build_seconds']:.1f} s "
          f"({manifest['questions_per_second']} questions/s)")
    return 0


@command("dvc-yaml", "write dvc.yaml for a profile from the experiment grid")
def _dvc_yaml(args: argparse.Namespace) -> int:
    from ltopd.dvcgen import dvc_file, render

    text = render(args.config)
    args.out = args.out or dvc_file(args.config)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        from ltopd.atomic import atomic_file
        with atomic_file(args.out) as fh:
            fh.write(text)
        print(f"wrote {args.out}")
    return 0


@command("score", "score a predictions JSONL file with a benchmark's official metric")
def _score(args: argparse.Namespace) -> int:
    from ltopd.bench.scoring import check_predictions, score

    preds = []
    for n, line in enumerate(Path(args.predictions).read_text().splitlines(), 1):
        if line.strip():
            try:
                preds.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"{args.predictions}:{n}: not valid JSON ({e})")
    reference = {}
    if args.records:
        for line in Path(args.records).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                reference[r["id"]] = r
    else:  # no reference given: the file itself, so ids are still checked for gaps and duplicates
        reference = {p["id"]: p for p in preds if "id" in p}
    try:
        check_predictions(reference, preds)
    except ValueError as e:
        raise SystemExit(f"{args.predictions}: {e}")
    records = [{**reference.get(p["id"], {}), **p} for p in preds]
    print(json.dumps(score(args.benchmark, records), indent=2, sort_keys=True))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ltopd", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, (_, help) in COMMANDS.items():
        s = sub.add_parser(name, help=help)
        if name in ("validate", "dvc-yaml"):
            s.add_argument("--config", required=True, help="profile YAML, e.g. config/default.yaml")
        if name == "dvc-yaml":
            s.add_argument("--out", help="output file, - for stdout (default: dvc.yaml for the default "
                           "profile, pipelines/<profile>/dvc.yaml otherwise)")
        if name == "score":
            s.add_argument("--benchmark", required=True)
            s.add_argument("--predictions", required=True, help="JSONL: id, prediction and the record's fields")
            s.add_argument("--records", help="optional JSONL of the benchmark records (to check ids against)")
        if name == "build-lt14k":
            g = s.add_mutually_exclusive_group(required=True)
            g.add_argument("--config", help="profile YAML (run by hand)")
            g.add_argument("--spec", help="JSON of the config sections the job depends on (from Snakemake)")
            s.add_argument("--out", required=True)
            s.add_argument("--metrics", help="small JSON summary (DVC metrics)")
            s.add_argument("--rule", default=name)
            s.add_argument("--wildcards", default="{}")
    return p


def main(argv: list[str] | None = None) -> int:
    from ltopd.config import ConfigError

    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd][0](args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
