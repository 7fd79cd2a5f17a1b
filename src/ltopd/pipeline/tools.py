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
    from ltopd import config as config_mod
    from ltopd.grid import eval_jobs

    cfg = config_mod.load(args.config)
    print(f"{args.config}: valid profile {cfg['profile']!r}; "
          f"{sum(1 for _ in eval_jobs(cfg))} evaluation jobs in the grid")
    return 0


def mlflow_relocate(args: argparse.Namespace) -> int:
    from ltopd import config as config_mod
    from ltopd.tracking import Settings, relocate

    settings = Settings.from_config(config_mod.load(args.config))
    print(f"{settings.tracking_uri}: {relocate(settings)} runs now read artifacts from {settings.artifact_root}")
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
    from ltopd.jsonl import JsonlError, read_jsonl

    try:
        return read_jsonl(path)
    except JsonlError as e:
        raise SystemExit(str(e)) from None


def score(args: argparse.Namespace) -> int:
    from ltopd.bench.scoring import check_predictions, score

    preds = _read_jsonl(args.predictions)
    if args.records:
        reference = {r["id"]: r for r in _read_jsonl(args.records)}
    else:  # no reference given: the file itself, so ids are still checked for gaps and duplicates
        reference = {p["id"]: p for p in preds if "id" in p}
    try:
        check_predictions(reference, preds)
    except ValueError as e:
        raise SystemExit(f"{args.predictions}: {e}") from e
    records = [{**reference.get(p["id"], {}), **p} for p in preds]
    print(json.dumps(score(args.benchmark, records), indent=2, sort_keys=True))
    return 0
