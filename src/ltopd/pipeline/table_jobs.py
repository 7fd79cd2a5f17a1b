"""`ltopd table`: Table 2 with its retain-vs-budget figure, or an ablation table (Tables 7, 12),
from the evaluations' metrics and predictions.
"""
from __future__ import annotations

import argparse
from typing import Any

from ltopd.pipeline.spec import add_source
from ltopd.pipeline.spec import job_inputs as _job_inputs  # every job's first step


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ltopd.catalog import tables_of_kind

    s = sub.add_parser("table", help="build results/<table>.csv/.md (Table 2 with its retain-vs-budget figure, "
                                     "or an ablation table) from evaluation metrics")
    add_source(s, "table")
    s.add_argument("--table", required=True, choices=tables_of_kind("grid") + tables_of_kind("ablation"))
    s.add_argument("--results", nargs="+", required=True, help="metrics.json files of `ltopd evaluate`")
    s.add_argument("--out", required=True, help="CSV")
    s.add_argument("--markdown", required=True)
    s.add_argument("--figure", help="PNG: retain ratio vs budget (Table 2)")
    s.add_argument("--json", help="headline numbers as JSON (average retain ratios, scores, gates), numbers only: "
                   "DVC metrics")
    s.add_argument("--predictions", nargs="*", help="predictions.jsonl files of `ltopd evaluate` (each "
                   "beside its metrics.json): adds the gates, the out-of-sample question-only baseline "
                   "and bootstrap intervals")
    s.add_argument("--fit-records", nargs="*", metavar="BENCHMARK:SEED=PATH",
                   help="records (build-bench output) the question-only baseline of that evaluation seed "
                   "is fitted on; a benchmark without them (real data) is cross-fitted")
    s.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates")
    s.add_argument("--boot-seed", type=int, default=0, help="bootstrap seed")
    s.set_defaults(func=table)


def table(args: argparse.Namespace) -> int:
    import math

    from ltopd.atomic import atomic_file, write_json
    from ltopd.catalog import TABLES, external_method
    from ltopd.grid import reduction_defaults, table2_methods
    from ltopd.lineage import records_name, use_dataset
    from ltopd.report import dvc_metrics, figures, grid_tables, headline, kept_tokens
    from ltopd.tracking import job_run

    spec, settings = _job_inputs(args, ("grid", "seeds"), optional=("training", "external_students"))
    backbone, benchmarks = spec["grid"]["backbones"][0], spec["grid"]["benchmarks"]
    methods = TABLES[args.table].methods or table2_methods(spec)  # Table 2: the grid's, but ablation variants
    if TABLES[args.table].kind == "grid":  # and a row per external student (spec: their entry names)
        methods = [*methods, *(external_method(name) for name in spec.get("external_students") or [])]
    predictions = fit = None
    fit_paths: dict[tuple[str, int], str] = {}
    if args.predictions:  # Table 2's gates, out-of-sample question-only baseline and bootstrap intervals
        from ltopd.bench.suites.baseline import load_fit_records

        predictions = {k: v for k, v in grid_tables.load_predictions(args.predictions).items() if k[0] == backbone}
        fit = {}
        for item in args.fit_records or []:
            key, sep, path = item.partition("=")
            bench, colon, seed = key.partition(":")
            if not (sep and colon and seed.isdigit() and path):
                raise SystemExit(f"--fit-records {item!r}: expected BENCHMARK:SEED=PATH")
            fit[(bench, int(seed))] = load_fit_records(path)
            fit_paths[(bench, int(seed))] = path
    with job_run(settings, args.rule, {"table": args.table}, spec) as run:
        for (bench, seed), path in fit_paths.items():  # the question-only baseline is fitted on them
            use_dataset(run, records_name(path), path, "baseline-fit", {"rows": len(fit[(bench, seed)])})
        results = grid_tables.load_results(args.results)
        rows, notes = grid_tables.build(results, backbone, benchmarks, args.table, methods, predictions, fit,
                                        args.n_boot, args.boot_seed,
                                        pruned=reduction_defaults(spec).selector)  # the untrained student's row
        rows = kept_tokens.annotate(rows, results, backbone, benchmarks)
        with atomic_file(args.out) as fh:
            fh.write(grid_tables.to_csv(rows, benchmarks))
        summary = None
        if args.json:  # Table 2: its headline opens the markdown, closes the run's log (the JSON's)
            summary = headline.lines(headline.headline(rows), _where(args, settings, run.experiment_id))
            write_json(args.json, dvc_metrics.table2_metrics(rows, summary))
            run.log_artifact(args.json)
        md = grid_tables.to_markdown(rows, benchmarks, notes)
        with atomic_file(args.markdown) as fh:
            fh.write(f"# {TABLES[args.table].title} ({spec['profile']} profile)\n\n"
                     + (headline.markdown(summary) if summary else "") + md)
        if args.figure:
            figures.retain_vs_budget(rows, args.figure, f"Average retain ratio vs budget ({backbone}, "
                                     f"{spec['profile']} profile; x = paper, Qwen3.5-4B)")
            run.log_artifact(args.figure)
        run.log_metrics({f"{r['method']}-{r['budget']:g}/avg_retain": r["avg_retain"].mean
                         for r in rows if r["source"] == "ours" and r["avg_retain"].n})
        run.log_metrics({f"gate/{b}/margin_se": s.mean for r in rows if r["source"] == "gate"
                         for b, s in r["bench"].items() if s.n and math.isfinite(s.mean)})
        run.log_artifact(args.out)
        run.log_artifact(args.markdown)
    print(md)
    return 0


def _where(args: argparse.Namespace, settings: Any, experiment_id: str) -> dict[str, str]:
    """Where a newcomer looks next: the table, the figure, the MLflow runs (the UI command and the
    experiment's runs page) and the command that records a Snakemake run for DVC."""
    out = {"Table": f"{args.markdown} (CSV {args.out})"}
    if args.figure:
        out["Figure"] = args.figure
    uri = settings.tracking_uri
    if uri.startswith("sqlite:"):
        # MLflow 3.18's UI takes the experiment's view from the URL's workflowType (else the browser's
        # last choice, GenAI at first) and ignores the experiment's mlflow.experimentKind tag
        out["MLflow"] = (f"mlflow ui --backend-store-uri {uri}, then "
                         f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
    # a plain Snakemake run leaves DVC's lock unwritten: `dvc status` would list every stage as new.
    # `dvc commit` needs every output of a stage, and the table2 stage holds the other tables too,
    # which a run for Table 2 alone does not build (the line is static: the table must not depend
    # on which other files happen to exist)
    from ltopd.dvcgen import profile_dvc_file

    dvc = profile_dvc_file(settings.profile)
    out["DVC"] = (f"{dvc}'s table2 stage holds the other tables too: `dvc repro {dvc}` builds what is missing "
                  f"(Snakemake reuses this run's jobs) and records the run in its dvc.lock; then `dvc status "
                  f"{dvc}`: up to date")
    return out
