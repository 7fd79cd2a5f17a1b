"""`ltopd study|figure1-right`: the tables and figures of the catalog's studies and Figure 1 right.

Wired into ltopd.cli like pipeline/efficiency_jobs.py (add_parser + run):
``ltopd study --study table3 --spec JSON --results ... --out CSV --markdown MD`` (a study table),
``ltopd study --study figure4 --spec JSON --results ... --out CSV --figure PNG`` (a study figure:
its catalog entry's outputs say which files it writes),
``ltopd figure1-right --spec JSON --results ... [--analytic-config JSON] --out CSV --figure PNG``.
The spec holds the config sections the job depends on: profile, grid, seeds, studies, efficiency.
A study is built by its job in :data:`STUDIES`, a study table without one by the common builder
(ltopd.report.studies.build_study).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

COMMANDS = ("study", "figure1-right")  # the catalog's studies, figure1_right


def add_parser(subparsers: Any) -> None:
    from ltopd.catalog import tables_of_kind
    from ltopd.pipeline.spec import add_source

    helps = {"study": "a study table (Tables 3, 4, 6, 14) -> results/<table>.csv/.md, or a study figure "
                      "(Figure 4: compression-gap recovery) -> CSV + plot",
             "figure1-right": "Figure 1 right: prefill FLOPs ratio vs average retain ratio -> CSV + scatter plot"}
    for name in COMMANDS:
        s = subparsers.add_parser(name, help=helps[name])
        add_source(s, name.replace("-", "_"))  # its rule's name
        s.add_argument("--results", nargs="+", required=True, help="metrics.json files of `ltopd evaluate`")
        s.add_argument("--out", required=True, help="CSV")
        if name == "study":
            s.add_argument("--study", required=True, choices=tables_of_kind("study"))
            s.add_argument("--markdown", help="the table as markdown (a study table)")
            s.add_argument("--figure", help="PNG (a study figure)")
        else:
            s.add_argument("--figure", required=True, help="PNG")
        if name == "figure1-right":
            s.add_argument("--analytic-config", help="HF-style config of the analytic architecture "
                                                    "(default: the profile's efficiency.analytic_config)")
        s.set_defaults(func=run)


    s = subparsers.add_parser("figure-pareto", help="Table 2's average retain ratio vs the measured prefill time "
                              "and KV cache of every row (`ltopd prefill-costs`), the Pareto front marked -> CSV + PNG")
    add_source(s, "figure_pareto")
    s.add_argument("--retain", required=True, help="Figure 1 right's CSV (results/figure1_right.csv): the retain axis")
    s.add_argument("--measurements", required=True, help="`ltopd prefill-costs` JSON of Table 2's backbone")
    s.add_argument("--out", required=True, help="CSV")
    s.add_argument("--figure", required=True, help="PNG")
    s.set_defaults(func=figure_pareto)


def _inputs(args: argparse.Namespace):
    from ltopd.pipeline.spec import job_inputs as _job_inputs

    return _job_inputs(args, ("grid", "seeds"), optional=("studies", "efficiency", "training"))


def study(args: argparse.Namespace) -> int:
    """A study: the files its catalog entry's outputs name (each given), by its job in STUDIES."""
    from ltopd.catalog import TABLES

    table = TABLES[args.study]
    flags = {"md": ("--markdown", args.markdown), "figure": ("--figure", args.figure)}
    if missing := [flags[o][0] for o in table.outputs if o in flags and not flags[o][1]]:
        raise SystemExit(f"ltopd study --study {args.study}: give {' and '.join(missing)} "
                         f"(its outputs: {list(table.outputs)})")
    if table.is_figure and args.study not in STUDIES:
        raise SystemExit(f"ltopd study --study {args.study}: a figure needs its job in "
                         f"ltopd.pipeline.study_jobs.STUDIES; known: {sorted(STUDIES)}")
    return STUDIES.get(args.study, study_table)(args)


def study_table(args: argparse.Namespace) -> int:
    from ltopd.atomic import atomic_file
    from ltopd.catalog import TABLES
    from ltopd.grid import study_benchmarks, study_scope
    from ltopd.report import grid_tables, studies
    from ltopd.tracking import job_run

    spec, settings = _inputs(args)
    benchmarks = study_benchmarks(spec, args.study)
    with job_run(settings, args.rule, {"table": args.study}, spec) as run:
        results = grid_tables.load_results(args.results)
        rows, notes = studies.build_study(results, args.study, *study_scope(spec, args.study))
        with atomic_file(args.out) as fh:
            fh.write(grid_tables.to_csv(rows, benchmarks))
        md = studies.study_markdown(rows, benchmarks, notes)
        with atomic_file(args.markdown) as fh:
            fh.write(f"# {TABLES[args.study].title} ({spec['profile']} profile)\n\n" + md)
        run.log_metrics({f"{r['backbone']}/{r['method']}-{r['budget']:g}/avg_retain": r["avg_retain"].mean
                         for r in rows if r["source"] == "ours" and r["avg_retain"].n})
        run.log_artifact(args.out)
        run.log_artifact(args.markdown)
    print(md)
    return 0


def figure4(args: argparse.Namespace) -> int:
    import math

    from ltopd.atomic import atomic_file
    from ltopd.catalog import TABLES
    from ltopd.grid import study_scope
    from ltopd.report import figures, grid_tables, studies
    from ltopd.tracking import job_run

    spec, settings = _inputs(args)
    with job_run(settings, args.rule, {"figure": args.study}, spec) as run:
        rows, notes = studies.recovery(grid_tables.load_results(args.results), *study_scope(spec, args.study))
        with atomic_file(args.out) as fh:
            fh.write(studies.recovery_csv(rows))
        figures.recovery_bars(rows, args.figure, f"{TABLES[args.study].title} ({spec['profile']} profile)\n"
                              "paper: LT-OPD exceeds every RL method by > 45 points on V*Bench", notes)
        run.log_metrics({f"{r['backbone']}/{r['method']}/{r['benchmark']}/recovery": r["recovery"]
                         for r in rows if not math.isnan(r["recovery"])})
        run.log_artifact(args.out)
        run.log_artifact(args.figure)
    print(studies.recovery_csv(rows) + "\n".join(f"- {n}" for n in notes))
    return 0


def figure1_right(args: argparse.Namespace) -> int:
    from ltopd.atomic import atomic_file
    from ltopd.efficiency.analytic import TextArch
    from ltopd.grid import reduction_defaults
    from ltopd.pipeline.efficiency_jobs import settings as efficiency_settings
    from ltopd.report import figures, grid_tables, studies
    from ltopd.tracking import job_run

    spec, settings = _inputs(args)
    backbone, benchmarks = spec["grid"]["backbones"][0], spec["grid"]["benchmarks"]  # Table 2's rows
    arch = TextArch.from_file(args.analytic_config or efficiency_settings(spec)["analytic_config"])
    n_text, n_visual, floor = studies.protocol_tokens(arch)
    with job_run(settings, args.rule, {"figure": "figure1_right"}, spec) as run:
        t2, _ = grid_tables.build(grid_tables.load_results(args.results), backbone, benchmarks,
                                  pruned=reduction_defaults(spec).selector)
        rows = studies.flops_vs_retain(t2, arch, floor, n_visual, n_text)
        with atomic_file(args.out) as fh:
            fh.write(studies.flops_csv(rows))
        note = (f"x: prefill FLOPs of the analytic {arch.name or 'Qwen3.5-4B'} at Table 5's tokens "
                f"({n_text:.1f} text + "
                f"{n_visual:.1f} visual, floor {floor}); y: ours on {backbone}. {studies.EPIC_NOTE}.")
        figures.flops_retain_scatter(rows, args.figure, f"Figure 1 right: FLOPs vs average retain "
                                     f"({spec['profile']} profile)", note)
        run.log_metrics({f"{r['method']}-{r['budget']:g}/flops_ratio": r["flops_ratio"]
                         for r in rows if r["source"] == "ours"})
        run.log_artifact(args.out)
        run.log_artifact(args.figure)
    print(studies.flops_csv(rows) + f"- {note}")
    return 0


def figure_pareto(args: argparse.Namespace) -> int:
    from ltopd.atomic import atomic_file
    from ltopd.report import pareto
    from ltopd.tracking import job_run

    spec, settings = _inputs(args)
    measurement = pareto.load_measurement(args.measurements)
    with job_run(settings, args.rule, {"figure": "figure_pareto"}, spec) as run:
        placed, missing = pareto.rows(pareto.read_retain(args.retain), measurement)
        with atomic_file(args.out) as fh:
            fh.write(pareto.to_csv(placed))
        title = (f"Average retain ratio vs measured prefill cost ({measurement['backbone']}, {measurement['device']} "
                 f"{measurement['clock']}, {measurement['repeats']} repeats; {spec['profile']} profile)")
        pareto.figure(placed, missing, args.figure, title)
        run.log_artifact(args.out)
        run.log_artifact(args.figure)
    print(pareto.to_csv(placed) + f"- not measured: {', '.join(missing) or 'none'}")
    return 0


# The studies with a job of their own (every study figure; a study table with its own builder).
STUDIES: dict[str, Callable[[argparse.Namespace], int]] = {"figure4": figure4}


def run(args: argparse.Namespace) -> int:
    return {"study": study, "figure1-right": figure1_right}[args.cmd](args)
