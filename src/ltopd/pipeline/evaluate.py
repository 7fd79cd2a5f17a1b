"""The evaluation job: one model, every (method, budget, benchmark) setting of its group.

A group is a trained student's settings, or every training-free row of a backbone (full tokens,
blind, each selector at each budget, the downsampling control: ltopd.grid.eval_groups). The model
and each benchmark's records are loaded once; each batch's images run through the vision tower
once for all of the settings that see the same pixels (ltopd.bench.evaluate.evaluate_settings):
the full-token row and every selector share one pass, the blind row sees no image, and each
downsampling budget has its own resized images, hence its own pass. The outputs are those of one
evaluation per setting: `predictions.jsonl` and `metrics.json` in the setting's folder and one
MLflow run named after it, so tables and `ltopd score` read them as before.
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltopd.tracking import Settings


@dataclass(frozen=True)
class EvalTarget:
    """One setting of a group: its method, where its records are and where its outputs go."""

    method: str
    budget: float
    benchmark: str
    records: str
    out_dir: str


def parse_targets(text: str, method: str | None = None) -> list[EvalTarget]:
    """The --settings JSON: [{"method", "budget", "benchmark", "records", "out_dir"}, ...]; a
    target without "method" is `method`'s (--method)."""
    targets = []
    for i, t in enumerate(json.loads(text)):
        if "method" not in t and method is None:
            raise ValueError(f"--settings item {i} names no method; give it a \"method\" field or pass --method")
        targets.append(EvalTarget(t.get("method", method), float(t["budget"]), t["benchmark"], t["records"],
                                  t["out_dir"]))
    return targets


def vision_pass(method: str, ratio: float) -> tuple[str, float]:
    """Which pass over a record set's images a setting reads: the blind row's (no image), a
    downsampling budget's own (its images resized), or the shared one (the processor's images,
    every selector choosing from the same features)."""
    from ltopd.catalog import method as method_entry  # a declared method or an external student's row

    if not method_entry(method).images:
        return ("blind", 1.0)
    if method_entry(method).kind == "resize":
        return ("resize", ratio)
    return ("shared", 1.0)


def _finished(state: Path, t: EvalTarget) -> Path:
    """Where a group's resumable state keeps a finished setting's files."""
    return state / t.benchmark / t.method / f"{t.budget:g}"


def _copy(src: Path, dest: Path) -> None:
    """`src`'s files (predictions.jsonl, then metrics.json: the file Snakemake waits for) into
    `dest`, each written atomically and sealed (ltopd.integrity)."""
    from ltopd import integrity
    from ltopd.atomic import atomic_file

    for name in ("predictions.jsonl", "metrics.json"):
        with atomic_file(dest / name, "wb") as fh:
            fh.write((src / name).read_bytes())
        integrity.seal_file(dest / name)


def _restore(state: Path, t: EvalTarget) -> dict[str, Any] | None:
    """A setting the group finished before it was stopped, copied to its outputs; None when
    there is none (or its saved files are cut short: one line, and it is evaluated again)."""
    from ltopd import integrity

    kept = _finished(state, t)
    if not (kept / "metrics.json").is_file():
        return None
    try:
        for name in ("predictions.jsonl", "metrics.json"):
            if not integrity.check(kept / name):
                raise integrity.Corrupt(kept / name, "not sealed")
    except integrity.Corrupt as e:
        print(f"ltopd: {e.file}: {e.detail}; evaluating that setting again", flush=True)
        return None
    _copy(kept, Path(t.out_dir))
    return json.loads((kept / "metrics.json").read_text())


def run_group(spec: dict[str, Any], settings: Settings, backbone_name: str, seed: int, model: str,
              targets: Sequence[EvalTarget], rule: str = "evaluate", progress: bool = True,
              state_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Evaluate `model` on every target; returns the metrics written, in target order.

    With `state_dir`, each finished setting is also kept there (outside the outputs, which
    Snakemake removes when a job fails), under the group's identity (ltopd.job_identity: its
    settings, model, records and code). A group stopped by SIGTERM (SLURM's preemption) saves
    there after the vision pass in progress and exits (ltopd.preempt); its rerun copies the
    finished settings back and evaluates only the others (each setting's answers do not depend
    on which others share its pass: tests/pipeline/test_grouped_evaluation.py). The folder is
    removed once every setting is written."""
    import shutil

    from ltopd import preempt
    from ltopd.bench.evaluate import evaluate_settings
    from ltopd.bench.evidence import instructed, text_only
    from ltopd.bench.store import load_saved
    from ltopd.catalog import method as method_entry
    from ltopd.grid import eval_setting, reduction_defaults
    from ltopd.job_identity import claim, identity
    from ltopd.models.downsample import downsampled, pixels_key
    from ltopd.models.loading import load_backbone

    defaults = reduction_defaults(spec)  # the floor; a trained student's selector (in its spec only)
    floor, batch_size, train_selector = defaults.floor, spec["evaluation"]["batch_size"], defaults.selector
    backbone = load_backbone(model)
    written: dict[int, dict[str, Any]] = {}
    state = Path(state_dir) if state_dir is not None else None
    if state is not None:
        inputs = {"model": model, **{f"records {t.benchmark}": t.records for t in targets}}
        if claim(state, identity({"spec": spec, "backbone": backbone_name, "seed": seed}, inputs, (__name__,))):
            for i, t in enumerate(targets):
                restored = _restore(state, t)
                if restored is not None:
                    written[i] = restored
            if written:
                print(f"resumed: {len(written)} of {len(targets)} settings were finished before the job was "
                      f"stopped (kept in {state}); evaluating the other {len(targets) - len(written)}", flush=True)
    by_benchmark: dict[tuple[str, str], list[int]] = {}
    for i, t in enumerate(targets):
        if i not in written:
            by_benchmark.setdefault((t.benchmark, t.records), []).append(i)
    for (benchmark, records_dir), in_set in by_benchmark.items():
        records = load_saved(records_dir)
        if benchmark in spec.get("evidence", ()):  # a twin taught to answer it evidence-first is asked so
            records = [instructed(r, benchmark) for r in records]
        setups = {i: eval_setting(targets[i].method, targets[i].budget, train_selector) for i in in_set}
        passes: dict[tuple[str, float], list[int]] = {}
        for i in in_set:
            passes.setdefault(vision_pass(targets[i].method, setups[i][0]), []).append(i)
        resized: dict[tuple, list] = {}  # downsampling passes by the pixels they see (pixels_key)
        for (kind, ratio), idx in passes.items():
            if kind == "resize":  # the downsampling control: the model sees every token of the smaller images
                small = downsampled(backbone, ratio, floor)
                key = pixels_key(small, records)
                if key not in resized:
                    resized[key] = evaluate_settings(small, records, benchmark, [(1.0, None)], floor, batch_size,
                                                     seed=seed, progress=progress)
                results = resized[key] * len(idx)
            else:  # the blind row: the same questions with their images removed
                seen = [text_only(r) for r in records] if kind == "blind" else records
                results = evaluate_settings(backbone, seen, benchmark, [setups[i] for i in idx], floor, batch_size,
                                            seed=seed, progress=progress)
            for i, (rows, metrics) in zip(idx, results, strict=True):
                t, (ratio_i, selector) = targets[i], setups[i]
                key = {"backbone": backbone_name, "method": t.method, "budget": t.budget, "benchmark": benchmark,
                       "seed": seed}
                meta = {**key, "model": model, "ratio": ratio_i, "selector": selector if ratio_i < 1 else None,
                        "images": method_entry(t.method).images, "downsampled": kind == "resize",
                        **({"weights_sha256": spec["external"]["sha256"]} if spec.get("external") else {})}
                written[i] = write_setting(Path(t.out_dir), rows, {**meta, **metrics}, settings, rule, key, spec,
                                           {"model": model, "records": records_dir})
                if state is not None:
                    _copy(Path(t.out_dir), _finished(state, t))
                # "[k/N settings]" first: the line the logger plugin shows while a long group runs
                print(f"[{len(written)}/{len(targets)} settings] {benchmark} | {backbone_name} {t.method} at "
                      f"{t.budget:g} (seed {seed}): "
                      f"score {metrics['score']:.2f}, {metrics['n']} questions, {metrics['n_unparsed']} unparsed",
                      flush=True)
            if state is not None and len(written) < len(targets):
                preempt.stop(f"evaluation state saved in {state}: {len(written)} of {len(targets)} settings "
                             "finished, the rerun evaluates only the others")
    if state is not None:
        shutil.rmtree(state, ignore_errors=True)  # every setting is written: the state has served
    return [written[i] for i in range(len(targets))]


def external_model(spec: dict[str, Any], method: str) -> dict[str, Any]:
    """use_model's arguments for a student trained elsewhere (the spec's ``external`` entry): its
    folder's content hash as the logged model's digest, its entry as the model's params; {} for
    the pipeline's own models."""
    from ltopd.catalog import method as method_entry
    from ltopd.tracking import flatten

    external = spec.get("external")
    if not external:
        return {}
    return {"digest": external["sha256"], "described": (method_entry(method).label, "external", flatten(external))}


def write_setting(out: Path, rows: list[dict[str, Any]], metrics: dict[str, Any], settings: Settings,
                  rule: str, key: dict[str, Any], spec: dict[str, Any], inputs: dict[str, str]) -> dict[str, Any]:
    """predictions.jsonl, then its MLflow run, then metrics.json last (the file Snakemake and the
    tables wait for), each written atomically."""
    from ltopd import integrity
    from ltopd.atomic import atomic_file, write_json
    from ltopd.lineage import records_name, use_dataset, use_model
    from ltopd.pipeline.spec import numbers
    from ltopd.tracking import job_run

    with atomic_file(out / "predictions.jsonl") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    integrity.seal_file(out / "predictions.jsonl")  # the tables check both files before they score them
    with job_run(settings, rule, {k: str(v) for k, v in key.items()}, spec, inputs=inputs) as run:
        # measured on these records (the run's dataset input); the score is also the evaluated model's,
        # for its page, without the records: a model's datasets read as what it was trained on
        use_dataset(run, records_name(inputs["records"]), inputs["records"], "evaluation", {"rows": len(rows)})
        run.log_metrics({k: float(v) for k, v in numbers(metrics).items() if k != "score"})
        run.log_metrics({"score": float(metrics["score"])},
                        model_id=use_model(run, inputs["model"], **external_model(spec, key["method"])))
        run.log_artifact(out / "predictions.jsonl")
    write_json(out / "metrics.json", metrics)
    integrity.seal_file(out / "metrics.json")
    return metrics


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ltopd.pipeline.spec import add_source

    for name, help in (("evaluate", "predict and score one (backbone, method, budget, benchmark, seed)"),
                       ("evaluate-group", "predict and score every (method, budget, benchmark) setting of one "
                                          "model (a backbone's training-free rows, or one student) at one seed")):
        s = sub.add_parser(name, help=help)
        add_source(s, "evaluate")
        s.add_argument("--backbone", required=True, help="backbone name (recorded with the results)")
        s.add_argument("--model", required=True, help="model folder (twin, checkpoint or trained student)")
        s.add_argument("--method", required=name == "evaluate",
                       help="grid method: full, blind, a selector, downsample or a trained method"
                       + ("" if name == "evaluate" else " (of every --settings item that names none)"))
        s.add_argument("--seed", type=int, required=True, help="evaluation seed")
        s.add_argument("--threads", type=int, default=1, help="torch CPU threads")
        if name == "evaluate":
            s.add_argument("--benchmark", required=True)
            s.add_argument("--records", required=True, help="folder written by build-bench")
            s.add_argument("--budget", type=float, required=True, help="visual-token budget (1 for full)")
            s.add_argument("--out-dir", required=True, help="gets predictions.jsonl and metrics.json")
        else:
            s.add_argument("--settings", required=True, help='JSON list of {"method", "budget", "benchmark", '
                           '"records", "out_dir"}: the group\'s settings (rule evaluate_*)')
            s.add_argument("--state", help="folder for the finished settings of a stopped group (resumable: a rerun "
                                           "evaluates only the settings it had not finished)")
        s.set_defaults(func=main)


def main(args: Any) -> int:
    """`ltopd evaluate-group` / `ltopd evaluate`."""
    import torch

    from ltopd.pipeline.spec import job_inputs

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    spec, settings = job_inputs(args, ("evaluation", "reduction"), optional=("training", "backbones"))
    # Snakemake's --spec carries `evidence` itself; by hand (--config) the backbone entry says it
    # (the profile's other entries stay out of the job's spec and its MLflow params)
    entry = spec.pop("backbones").get(args.backbone, {})
    spec.setdefault("evidence", entry.get("evidence", []))
    if getattr(args, "settings", None):
        targets = parse_targets(args.settings, args.method)
    else:
        targets = [EvalTarget(args.method, args.budget, args.benchmark, args.records, args.out_dir)]
    run_group(spec, settings, args.backbone, args.seed, args.model, targets, rule=args.rule,
              state_dir=getattr(args, "state", None))
    methods = ", ".join(dict.fromkeys(t.method for t in targets))
    print(f"{args.backbone} {methods} seed {args.seed}: {len(targets)} settings in "
          f"{time.perf_counter() - start:.1f} s")
    return 0
