"""`ltopd <subcommand>`: the entry point of every Snakemake rule (each rule runs one subcommand).

Dispatch only: each subcommand is declared with its job in ltopd.pipeline (one module per job
kind, each with an `add_parser`). A job gets its settings either from a profile (`--config
config/default.yaml`, validated) or, as Snakemake passes them, as `--spec` JSON holding just the
config sections the job depends on (so Snakemake's params trigger reruns exactly the affected
jobs).
"""
from __future__ import annotations

import argparse
import importlib
import sys

# The job modules under ltopd.pipeline, in the order `ltopd --help` lists their subcommands.
JOB_MODULES = ("tools", "data_jobs", "twin_jobs", "train_job", "evaluate", "table_jobs", "study_jobs",
               "efficiency_jobs")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ltopd", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in JOB_MODULES:
        importlib.import_module(f"ltopd.pipeline.{name}").add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    import os

    job: dict[str, str] = {}
    if os.environ.get("LTOPD_TRACE_IMPORTS"):  # the tests' check on the rules' code inputs
        from ltopd import import_trace

        import_trace.install(os.environ["LTOPD_TRACE_IMPORTS"], job)
    from ltopd import preempt, watchdog
    from ltopd.atomic import disk_full
    from ltopd.config import ConfigError

    watchdog.start()  # a job started by Snakemake stops once that Snakemake process is gone
    args = parser().parse_args(argv)
    job.update(module=args.func.__module__, command=args.cmd)
    restore = preempt.install()  # SIGTERM (SLURM's preemption): save the state, exit preempt.EXIT_CODE
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except preempt.Preempted as e:
        print(f"ltopd: {e}", file=sys.stderr)
        return preempt.EXIT_CODE
    except Exception as e:
        # a full disk, a corrupt file, broken real data, a short source, an unreachable store: said in full
        if getattr(e, "one_line", False):
            print(f"ltopd: {e}", file=sys.stderr)
            return 1
        if not disk_full(e):
            raise
        where = getattr(e, "filename", None) or "a file of this job (or the MLflow store)"
        print(f"ltopd: no space left on device writing {where}; free space and rerun the same command "
              f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})", file=sys.stderr)
        return 1
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
