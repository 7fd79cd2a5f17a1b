"""`ltopd validate | dvc-yaml | mlflow-relocate | score`: the researcher's tools around the pipeline.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    for name, help, fn in (
        ("validate", "check a profile against the schema and print the experiment grid size", validate),
        ("mlflow-relocate", "after moving the project folder: point the MLflow runs at this folder's artifacts",
         mlflow_relocate),
        ("dvc-yaml", "write dvc.yaml for a profile from the experiment grid", dvc_yaml),
    ):
        s = sub.add_parser(name, help=help)
        s.add_argument("--config", required=True, help="profile YAML, e.g. config/default.yaml")
        if name == "dvc-yaml":
            s.add_argument("--out", help="output file, - for stdout (default: dvc.yaml for the default "
                           "profile, pipelines/<profile>/dvc.yaml otherwise)")
        s.set_defaults(func=fn)
    s = sub.add_parser("score", help="score a predictions JSONL file with a benchmark's official metric")
    s.add_argument("--benchmark", required=True)
    s.add_argument("--predictions", required=True, help="JSONL: id, prediction and the record's fields")
    s.add_argument("--records", help="optional JSONL of the benchmark records (to check ids against)")
    s.set_defaults(func=score)


def validate(args: argparse.Namespace) -> int:
    """The schema and cross-field rules (as every entry point checks them), then what only a run on
    this machine would find out: every local path the profile names exists and holds the fields
    its loader needs."""
    from ltopd import config as config_mod
    from ltopd.grid import eval_jobs

    cfg = config_mod.load(args.config)
    from ltopd.pipeline.external import external_student_problems

    problems = config_mod.path_problems(cfg) + external_student_problems(cfg)
    if problems:
        print(f"{args.config}: profile {cfg['profile']!r} names local data this machine lacks:\n  - "
              + "\n  - ".join(problems), file=sys.stderr)
        return 2
    print(f"{args.config}: valid profile {cfg['profile']!r}; "
          f"{sum(1 for _ in eval_jobs(cfg))} evaluation jobs in the grid")
    return 0


def mlflow_relocate(args: argparse.Namespace) -> int:
    from ltopd import config as config_mod
    from ltopd.tracking import Settings, relocate

    settings = Settings.from_config(config_mod.load(args.config))
    done = relocate(settings)
    print(f"{settings.tracking_uri}: {done['runs']} runs and {done['models']} logged models now read artifacts "
          f"from {settings.artifact_root}; {done['mlmodel_files']} MLmodel files point at their model's new place")
    return 0


def dvc_yaml(args: argparse.Namespace) -> int:
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


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    from ltopd.jsonl import read_jsonl

    rows = read_jsonl(path)
    if not rows:
        raise ValueError(f"{path}: no predictions (the file is empty)")
    bad = next((i for i, r in enumerate(rows, 1) if not isinstance(r, dict)), None)
    if bad:
        raise ValueError(f"{path}:{bad}: each line must be a JSON object")
    return rows


def score(args: argparse.Namespace) -> int:
    """Scores a predictions file; every bad input (unknown benchmark, missing or empty file, a
    line that is not JSON, a row without its id or prediction, ids that do not match the records)
    is one line on stderr and exit status 2."""
    from ltopd.bench.scoring import check_predictions, score
    from ltopd.catalog import benchmark

    try:
        benchmark(args.benchmark)
        preds = _read_jsonl(args.predictions)
        for i, p in enumerate(preds, 1):
            missing = [k for k in ("id", "prediction") if k not in p]
            if missing:
                raise ValueError(f"{args.predictions}:{i}: no {' or '.join(repr(k) for k in missing)} field")
        if args.records:
            reference = {r["id"]: r for r in _read_jsonl(args.records) if "id" in r}
        else:  # no reference given: the file itself, so ids are still checked for gaps and duplicates
            reference = {p["id"]: p for p in preds}
        check_predictions(reference, preds)
        records = [{**reference.get(p["id"], {}), **p} for p in preds]
        metrics = score(args.benchmark, records)
    except (OSError, ValueError) as e:  # JsonlError is a ValueError
        reason = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else str(e)
        print(f"ltopd score: {reason}", file=sys.stderr)
        return 2
    print(json.dumps(metrics, indent=2, sort_keys=True))
    return 0
