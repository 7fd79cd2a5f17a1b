"""`ltopd <subcommand>`: the entry point of every Snakemake rule (each rule runs one subcommand).

A job gets its settings either from a profile (`--config config/default.yaml`, validated) or, as
Snakemake passes them, as `--spec` JSON holding just the config sections the job depends on
(so Snakemake's params trigger reruns exactly the affected jobs).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ltopd.pipeline.spec import job_inputs as _job_inputs  # every job's first step

COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {}


def command(name: str, help: str):
    def deco(fn):
        COMMANDS[name] = (fn, help)
        return fn
    return deco


@command("validate", "check a profile against the schema and print the experiment grid size")
def _validate(args: argparse.Namespace) -> int:
    from ltopd import config as config_mod
    from ltopd.grid import eval_jobs

    cfg = config_mod.load(args.config)
    print(f"{args.config}: valid profile {cfg['profile']!r}; "
          f"{sum(1 for _ in eval_jobs(cfg))} evaluation jobs in the grid")
    return 0


@command("mlflow-relocate", "after moving the project folder: point the MLflow runs at this folder's artifacts")
def _mlflow_relocate(args: argparse.Namespace) -> int:
    from ltopd import config as config_mod
    from ltopd.tracking import Settings, relocate

    settings = Settings.from_config(config_mod.load(args.config))
    print(f"{settings.tracking_uri}: {relocate(settings)} runs now read artifacts from {settings.artifact_root}")
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


@command("build-tokenizer", "learn the tiny twins' byte-level BPE from the pipeline's own text")
def _build_tokenizer(args: argparse.Namespace) -> int:
    from ltopd.atomic import atomic_dir
    from ltopd.catalog import BENCHMARKS
    from ltopd.models.corpus import corpus
    from ltopd.models.tokenizer import build_tokenizer
    from ltopd.tracking import job_run

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


@command("pretrain-twin", "pretrain a tiny twin on the procedural world and probe it on a held-out split")
def _pretrain_twin(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoTokenizer

    from ltopd.atomic import write_json
    from ltopd.models import twin_job
    from ltopd.models.loading import save_backbone
    from ltopd.progress import bar as progress_bar
    from ltopd.tracking import flatten, job_run

    # Snakemake's `threads`: parallel 1-thread jobs beat one 2-thread job on small CPUs
    torch.set_num_threads(args.threads)
    spec, settings = _job_inputs(args, ("backbones", "pretrain", "reduction", "world"))
    from ltopd.models.release import twin_spec

    spec = twin_spec(spec, args.backbone)  # the twin's own stages, if its entry has them
    twin = spec["backbones"][args.backbone]["twin"]
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
    total = sum(s["steps"] for s in spec["pretrain"]["stages"])
    with job_run(settings, args.rule, {"backbone": args.backbone}, spec,
                 inputs={"tokenizer": args.tokenizer}) as run, progress_bar(total, f"pretrain {twin}", "step") as bar:
        def on_step(log):
            run.log_metrics({"loss": log.loss, **{f"lr_{k}": v for k, v in log.lrs.items()}}, step=log.step)
            bar.set_postfix(stage=log.stage, loss=f"{log.loss:.3f}", refresh=False)
            bar.update()

        backbone, metrics = twin_job.run(twin, tokenizer, spec["pretrain"], spec["world"], spec["reduction"]["floor"],
                                         spec["backbones"][args.backbone].get("lr_scale", 1.0), on_step=on_step)
        save_backbone(backbone, args.out)
        flat = {k: float(v) for k, v in flatten(metrics).items()}
        run.log_metrics(flat)
        write_json(args.metrics, metrics)
    ratio = spec["pretrain"]["heldout"]["ratio"]
    print(f"{args.backbone} ({twin}, {metrics['parameters']:,} parameters): {metrics['steps']} updates in "
          f"{metrics['wall_s']:.0f} s, loss {metrics['loss_first']:.3f} -> {metrics['loss_last']:.3f}")
    print(f"  held-out accuracy ({spec['pretrain']['heldout']['n']} items): question-only baseline "
          f"{metrics['question_only']:.3f}, full tokens {metrics['full/all']:.3f}, "
          + ", ".join(f"{s} at {ratio:g} {metrics[f'{s}-{ratio:g}/all']:.3f}"
                      for s in spec["pretrain"]["heldout"]["selectors"]))
    return 0


@command("release-twin", "pretrain a twin (resumable), gate it on every benchmark twin, write its release folder")
def _release_twin(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoTokenizer

    from ltopd.models import release_job
    from ltopd.progress import bar as progress_bar
    from ltopd.report import releases
    from ltopd.tracking import flatten, job_run

    torch.set_num_threads(args.threads)
    spec, settings = _job_inputs(args, ("backbones", "pretrain", "reduction", "world", "evaluation"))
    entry = spec["backbones"].get(args.backbone) or {}
    if not entry.get("twin"):
        raise SystemExit(f"backbones.{args.backbone}: no `twin` to release; twins: "
                         f"{sorted(b for b, e in spec['backbones'].items() if e.get('twin'))}")
    from ltopd.models.release import twin_spec

    spec = twin_spec(spec, args.backbone)  # the twin's own stages, if its entry has them
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
    total = sum(s["steps"] for s in spec["pretrain"]["stages"])
    with (job_run(settings, args.rule, {"backbone": args.backbone}, spec,
                  inputs={"tokenizer": args.tokenizer}) as run,
          progress_bar(total, f"release {entry['twin']}", "step") as bar):
        def on_step(log):
            if bar.n == 0 and log.step > 1:  # resumed: the bar starts where the saved state stopped
                bar.update(log.step - 1)
            run.log_metrics({"loss": log.loss, **{f"lr_{k}": v for k, v in log.lrs.items()}}, step=log.step)
            bar.set_postfix(stage=log.stage, loss=f"{log.loss:.3f}", refresh=False)
            bar.update()

        manifest = release_job.build(spec, args.backbone, tokenizer, args.state, args.out, on_step=on_step,
                                     checkpoint_every=spec["pretrain"].get("checkpoint_every", 50))
        run.log_metrics({k: float(v) for k, v in flatten(manifest["gates"]["benchmarks"]).items()
                         if isinstance(v, (int, float)) and not isinstance(v, bool)})
    cost, gates = manifest["pretraining"], manifest["gates"]
    reduced = releases.reduced_key(gates["settings"])
    print(f"{args.backbone} ({entry['twin']}): {cost['steps']} updates, {cost['wall_s'] / 60:.1f} min of pretraining "
          f"-> {args.out}")
    for bench, g in gates["benchmarks"].items():
        print(f"  {bench:10s} QO {g['question_only']:7.1f}  full {g['full']:7.1f}  "
              f"{gates['settings']['selector']} {gates['settings']['ratio']:g} "
              f"{g[reduced]:7.1f}  "
              f"{g['margin_se']:+6.1f} SE  {'pass' if g['passed'] else 'FAIL'}")
    print(f"  gates passed: {len(gates['passed'])} of {len(gates['benchmarks'])}")
    return 0


@command("release-report", "the released twins' cost and gates as markdown (docs/releases.md, README block)")
def _release_report(args: argparse.Namespace) -> int:
    from ltopd import config as config_mod
    from ltopd.atomic import atomic_file
    from ltopd.grid import paths, released
    from ltopd.report import releases

    cfg = config_mod.load(args.config)
    root = Path(paths(cfg)["release"]).parent
    found = releases.manifests(root)
    table = releases.render(found, root, [b for b in released(cfg) if b not in found])
    with atomic_file(args.out) as fh:
        fh.write(f"# Released twins\n\nRendered by `ltopd release-report --config {args.config}` from the "
                 f"manifests in `{root}/`.\n\n{table}")
    if args.readme:
        readme = Path(args.readme)
        updated = releases.update_block(readme.read_text(), table)
        with atomic_file(readme) as fh:
            fh.write(updated)
    print(table, end="")
    return 0


@command("build-bench", "build one benchmark's records (synthetic twin or real data) for evaluation")
def _build_bench(args: argparse.Namespace) -> int:
    from ltopd.bench.store import build_records, save_records
    from ltopd.tracking import job_run

    spec, settings = _job_inputs(args, ("evaluation", "world"))
    entries = spec["evaluation"]["benchmarks"]
    if args.benchmark not in entries:
        raise SystemExit(f"evaluation.benchmarks has no entry for {args.benchmark!r}; it has {sorted(entries)}")
    with job_run(settings, args.rule, {"benchmark": args.benchmark, "seed": str(args.seed)}, spec) as run:
        records = build_records(args.benchmark, entries[args.benchmark], args.seed, spec["world"])
        save_records(records, args.out)
        run.log_metrics({"records": len(records), "images": sum(len(r["images"]) for r in records)})
    kind = "real data" if entries[args.benchmark].get("path") else f"synthetic twin, seed {args.seed}"
    print(f"{args.benchmark}: {len(records)} records ({kind}) -> {args.out}")
    return 0


@command("evaluate", "predict and score one (backbone, method, budget, benchmark, seed)")
def _evaluate(args: argparse.Namespace) -> int:
    from ltopd.pipeline import evaluate

    return evaluate.main(args)


@command("evaluate-group", "predict and score every (budget, benchmark) setting of one model (backbone, method, seed)")
def _evaluate_group(args: argparse.Namespace) -> int:
    from ltopd.pipeline import evaluate

    return evaluate.main(args)


@command("table", "build results/<table>.csv/.md (Table 2 with its retain-vs-budget figure, or an "
                  "ablation table) from evaluation metrics")
def _table(args: argparse.Namespace) -> int:
    import math

    from ltopd.atomic import atomic_file, write_json
    from ltopd.catalog import TABLES
    from ltopd.report import figures, table2
    from ltopd.tracking import job_run

    spec, settings = _job_inputs(args, ("grid", "seeds"))
    backbone, benchmarks = spec["grid"]["backbones"][0], spec["grid"]["benchmarks"]
    methods = TABLES[args.table].methods or None  # Table 2: every method of the grid
    predictions = fit = None
    if args.predictions:  # Table 2's gates, out-of-sample question-only baseline and bootstrap intervals
        from ltopd.bench.suites.baseline import load_fit_records

        predictions = {k: v for k, v in table2.load_predictions(args.predictions).items() if k[0] == backbone}
        fit = {}
        for item in args.fit_records or []:
            key, sep, path = item.partition("=")
            bench, colon, seed = key.partition(":")
            if not (sep and colon and seed.isdigit() and path):
                raise SystemExit(f"--fit-records {item!r}: expected BENCHMARK:SEED=PATH")
            fit[(bench, int(seed))] = load_fit_records(path)
    with job_run(settings, args.rule, {"table": args.table}, spec) as run:
        rows, notes = table2.build(table2.load_results(args.results), backbone, benchmarks, args.table, methods,
                                   predictions, fit, args.n_boot, args.boot_seed)
        with atomic_file(args.out) as fh:
            fh.write(table2.to_csv(rows, benchmarks))
        if args.json:
            write_json(args.json, table2.headline(rows))
        md = table2.to_markdown(rows, benchmarks, notes)
        with atomic_file(args.markdown) as fh:
            fh.write(f"# {TABLES[args.table].title} ({spec['profile']} profile)\n\n" + md)
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


class NoRun:
    """The MLflow handle of a non-main rank: it logs nothing (rank 0 logs the run)."""

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        pass


@command("train", "train one method's student from a backbone on LT-14K (resumes from its checkpoints)")
def _train(args: argparse.Namespace) -> int:
    import torch

    from ltopd.atomic import write_json
    from ltopd.models.loading import save_backbone
    from ltopd.progress import bar as progress_bar
    from ltopd.tracking import job_run
    from ltopd.train import job
    from ltopd.train.methods import SECTIONS, method_spec

    torch.set_num_threads(args.threads)
    section = method_spec(args.method).section  # rl / epic: the family's own hyperparameters
    spec, settings = _job_inputs(args, ("training", "reduction"), optional=tuple(SECTIONS.values()))
    key = {"backbone": args.backbone, "method": args.method, "seed": str(args.seed)}
    batches = json.loads((Path(args.data) / "manifest.json").read_text())["num_batches"]
    steps = job.total_updates(spec["training"], batches)
    main = int(os.environ.get("RANK", "0")) == 0  # under `accelerate launch`, rank 0 logs and writes
    tracked = job_run(settings, args.rule, key, spec, inputs={"model": args.model, "lt14k": args.data}) if main \
        else contextlib.nullcontext(NoRun())
    with tracked as run, progress_bar(steps, f"train {args.method}", "update", enabled=main) as bar:
        def on_step(log):
            run.log_metrics(log.metrics, step=log.step)
            bar.set_postfix(loss=f"{log.metrics['loss']:.4f}", r=f"{log.metrics['keep_ratio']:.3f}", refresh=False)
            bar.update()

        student, logs, total = job.run(args.model, args.data, args.method, spec["training"], args.budget,
                                       spec["reduction"]["floor"], args.seed, args.checkpoints, on_step=on_step,
                                       stop_after=args.stop_after, method_params=spec[section] if section else None)
        if args.stop_after is not None and args.stop_after < total:
            print(f"stopped after {args.stop_after} of {total} updates; checkpoints in {args.checkpoints}, "
                  f"no student written (rerun without --stop-after to resume)")
            return 0
        summary = {"updates": total, "budget": args.budget,
                   **{f"last_{k}": v for k, v in (logs[-1].metrics if logs else {}).items()},
                   "wall_s": sum(log.metrics["step_s"] for log in logs)}
        if not main:
            return 0
        save_backbone(student, args.out)
        write_json(args.metrics, summary)
    print(f"{args.method} on {args.backbone} (seed {args.seed}): {total} updates to budget {args.budget:g}, "
          f"{len(logs)} run now; last loss {summary.get('last_loss', float('nan')):.4f} -> {args.out}")
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


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    from ltopd.jsonl import JsonlError, read_jsonl

    try:
        return read_jsonl(path)
    except JsonlError as e:
        raise SystemExit(str(e)) from None


@command("score", "score a predictions JSONL file with a benchmark's official metric")
def _score(args: argparse.Namespace) -> int:
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ltopd", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, (_, help) in COMMANDS.items():
        s = sub.add_parser(name, help=help)
        if name == "release-report":
            s.add_argument("--config", required=True, help="profile YAML (its release_dir and released backbones)")
            s.add_argument("--out", default="docs/releases.md")
            s.add_argument("--readme", help="also replace the README's releases block")
        if name in ("validate", "dvc-yaml", "mlflow-relocate"):
            s.add_argument("--config", required=True, help="profile YAML, e.g. config/default.yaml")
        if name == "dvc-yaml":
            s.add_argument("--out", help="output file, - for stdout (default: dvc.yaml for the default "
                           "profile, pipelines/<profile>/dvc.yaml otherwise)")
        if name == "score":
            s.add_argument("--benchmark", required=True)
            s.add_argument("--predictions", required=True, help="JSONL: id, prediction and the record's fields")
            s.add_argument("--records", help="optional JSONL of the benchmark records (to check ids against)")
        if name in ("build-lt14k", "build-tokenizer", "pretrain-twin"):
            g = s.add_mutually_exclusive_group(required=True)
            g.add_argument("--config", help="profile YAML (run by hand)")
            g.add_argument("--spec", help="JSON of the config sections the job depends on (from Snakemake)")
            s.add_argument("--out", required=True)
            s.add_argument("--metrics", help="small JSON summary (DVC metrics)", required=name == "pretrain-twin")
            s.add_argument("--rule", default=name)
            s.add_argument("--wildcards", default="{}")
        if name in ("build-bench", "evaluate", "evaluate-group", "table"):
            g = s.add_mutually_exclusive_group(required=True)
            g.add_argument("--config", help="profile YAML (run by hand)")
            g.add_argument("--spec", help="JSON of the config sections the job depends on (from Snakemake)")
            s.add_argument("--rule", default="evaluate" if name == "evaluate-group" else name)
        if name in ("build-bench", "evaluate"):
            s.add_argument("--benchmark", required=True)
            s.add_argument("--seed", type=int, required=True, help="evaluation seed")
        if name == "build-bench":
            s.add_argument("--out", required=True, help="folder for the records (a `datasets` dataset)")
        if name in ("evaluate", "evaluate-group"):
            s.add_argument("--backbone", required=True, help="backbone name (recorded with the results)")
            s.add_argument("--model", required=True, help="model folder (twin, checkpoint or trained student)")
            s.add_argument("--method", required=True, help="grid method: full, a selector, or a trained method")
            s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
        if name == "evaluate":
            s.add_argument("--records", required=True, help="folder written by build-bench")
            s.add_argument("--budget", type=float, required=True, help="visual-token budget (1 for full)")
            s.add_argument("--out-dir", required=True, help="gets predictions.jsonl and metrics.json")
        if name == "evaluate-group":
            s.add_argument("--seed", type=int, required=True, help="evaluation seed")
            s.add_argument("--settings", required=True, help='JSON list of {"budget", "benchmark", "records", '
                           '"out_dir"}: the group\'s settings (rule evaluate_*)')
        if name == "train":
            g = s.add_mutually_exclusive_group(required=True)
            g.add_argument("--config", help="profile YAML (run by hand)")
            g.add_argument("--spec", help="JSON of the config sections the job depends on (from Snakemake)")
            s.add_argument("--rule", default=name)
            s.add_argument("--backbone", required=True)
            s.add_argument("--model", required=True, help="the starting model folder (twin or checkpoint)")
            s.add_argument("--data", required=True, help="LT-14K folder (build-lt14k output)")
            s.add_argument("--method", required=True)
            s.add_argument("--budget", type=float, required=True, help="target visual-token budget")
            s.add_argument("--seed", type=int, required=True)
            s.add_argument("--checkpoints", required=True, help="folder for resumable checkpoints")
            s.add_argument("--out", required=True, help="the trained student (save_pretrained folder)")
            s.add_argument("--metrics", required=True)
            s.add_argument("--threads", type=int, default=1)
            s.add_argument("--stop-after", type=int, help="stop after this many updates, as a killed job would "
                                                         "(checkpoints kept, no student written; to test resume)")
        if name == "table":
            from ltopd.catalog import tables_of_kind

            s.add_argument("--table", required=True, choices=tables_of_kind("grid") + tables_of_kind("ablation"))
            s.add_argument("--results", nargs="+", required=True, help="metrics.json files of `ltopd evaluate`")
            s.add_argument("--out", required=True, help="CSV")
            s.add_argument("--markdown", required=True)
            s.add_argument("--figure", help="PNG: retain ratio vs budget (Table 2)")
            s.add_argument("--json", help="headline numbers as JSON (average retain ratios, gates passed): DVC metrics")
            s.add_argument("--predictions", nargs="*", help="predictions.jsonl files of `ltopd evaluate` (each "
                           "beside its metrics.json): adds the gates, the out-of-sample question-only baseline "
                           "and bootstrap intervals")
            s.add_argument("--fit-records", nargs="*", metavar="BENCHMARK:SEED=PATH",
                           help="records (build-bench output) the question-only baseline of that evaluation seed "
                           "is fitted on; a benchmark without them (real data) is cross-fitted")
            s.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates")
            s.add_argument("--boot-seed", type=int, default=0, help="bootstrap seed")
        if name == "release-twin":
            g = s.add_mutually_exclusive_group(required=True)
            g.add_argument("--config", help="profile YAML (run by hand)")
            g.add_argument("--spec", help="JSON of the config sections the job depends on (from Snakemake)")
            s.add_argument("--out", required=True, help="the release folder")
            s.add_argument("--state", required=True, help="folder of the resumable pretraining state")
            s.add_argument("--rule", default=name)
        if name in ("pretrain-twin", "release-twin"):
            s.add_argument("--backbone", required=True, help="a backbone of the profile that has a `twin`")
            s.add_argument("--tokenizer", required=True, help="folder written by build-tokenizer")
            s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    from ltopd.pipeline import efficiency_jobs as efficiency_cli  # `ltopd table5 measure|build`

    efficiency_cli.add_parser(sub)
    from ltopd.pipeline import study_jobs as report_cli  # `ltopd study|figure4|figure1`

    report_cli.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from ltopd.config import ConfigError

    args = _parser().parse_args(argv)
    try:
        if args.cmd == "table5":
            from ltopd.pipeline import efficiency_jobs as efficiency_cli

            return efficiency_cli.run(args)
        if args.cmd in ("study", "figure4", "figure1"):
            from ltopd.pipeline import study_jobs as report_cli

            return report_cli.run(args)
        return COMMANDS[args.cmd][0](args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
