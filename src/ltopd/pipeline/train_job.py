"""`ltopd train`: one method's student from a backbone on LT-14K (resumes from its checkpoints).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from ltopd.pipeline.spec import add_source
from ltopd.pipeline.spec import job_inputs as _job_inputs  # every job's first step


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("train", help="train one method's student from a backbone on LT-14K (resumes from its "
                                     "checkpoints)")
    add_source(s, "train")
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
    s.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the checkpoints folder once the student is written (by default it is removed: "
                        "it only serves a killed job's rerun)")
    s.set_defaults(func=train)


class NoRun:
    """The MLflow handle of a non-main rank: it logs nothing (rank 0 logs the run)."""

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        pass


def train(args: argparse.Namespace) -> int:
    import torch

    from ltopd import integrity
    from ltopd.atomic import write_json
    from ltopd.lineage import log_model, use_dataset, use_model
    from ltopd.models.loading import save_backbone
    from ltopd.pipeline.spec import numbers
    from ltopd.progress import bar as progress_bar
    from ltopd.tracking import job_run
    from ltopd.train import job
    from ltopd.train.methods import MODULES, SECTIONS, method_spec

    torch.set_num_threads(args.threads)
    section = method_spec(args.method).section  # rl / epic / learnable_merge: the family's or module's own
    spec, settings = _job_inputs(args, ("training", "reduction"), optional=(*SECTIONS.values(), *MODULES))
    key = {"backbone": args.backbone, "method": args.method, "seed": str(args.seed)}
    manifest = json.loads((Path(args.data) / "manifest.json").read_text())
    batches = manifest["num_batches"]
    steps = job.total_updates(spec["training"], batches)
    main = int(os.environ.get("RANK", "0")) == 0  # under `accelerate launch`, rank 0 logs and writes
    tracked = job_run(settings, args.rule, key, spec, inputs={"model": args.model, "lt14k": args.data}) if main \
        else contextlib.nullcontext(NoRun())
    with tracked as run, progress_bar(steps, f"train {args.method}", "update", enabled=main) as bar:
        lt14k = None
        if main:  # what the student learns from: LT-14K and the model it starts from
            lt14k = use_dataset(run, "lt14k", args.data, "training", {"rows": manifest["num_questions"]})
            use_model(run, args.model)
        def on_step(log: Any) -> None:
            run.log_metrics(log.metrics, step=log.step)
            bar.set_postfix(loss=f"{log.metrics['loss']:.4f}", r=f"{log.metrics['keep_ratio']:.3f}", refresh=False)
            bar.update()

        student, logs, ran, total = job.run(args.model, args.data, args.method, spec["training"], args.budget,
                                            spec["reduction"]["floor"], args.seed, args.checkpoints, on_step=on_step,
                                            stop_after=args.stop_after,
                                            method_params=spec[section] if section else None)
        for log in logs[: len(logs) - ran]:  # resumed updates: this run's curve is the whole curve
            run.log_metrics(log.metrics, step=log.step)
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
        integrity.seal_dir(args.out)  # the evaluations check the student's bytes before they load it
        # the student as a logged model of this run: its identity and settings; on its page, what it
        # was trained on (LT-14K: its final update's metrics, at that update's step, so the run's
        # curves gain no point and no single-bar `last_*` copy) and the run's length
        model_id = log_model(run, f"{args.method} {args.backbone} s{args.seed} (student)", args.out, "student",
                             {**key, "budget": args.budget, "start_model": args.model, **spec})
        if logs:
            run.log_metrics(logs[-1].metrics, step=logs[-1].step, model_id=model_id, dataset=lt14k)
        run.log_metrics(numbers({"updates": total, "wall_s": summary["wall_s"]}), step=total, model_id=model_id,
                        dataset=lt14k)
        write_json(args.metrics, summary)
        for artifact in (args.metrics, Path(args.out) / "config.json"):  # the summary and the student's config
            run.log_artifact(artifact)
    if not args.keep_checkpoints:  # the student is written: the resumable state has served its purpose
        shutil.rmtree(args.checkpoints, ignore_errors=True)
    print(f"{args.method} on {args.backbone} (seed {args.seed}): {total} updates to budget {args.budget:g}, "
          f"{ran} run now; last loss {summary.get('last_loss', float('nan')):.4f} -> {args.out}")
    return 0
