"""`ltopd pretrain-twin | release-twin | release-report`: the tiny twins, pretrained in the run
(smoke) or released with the code (default), and the releases' table.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ltopd.pipeline.spec import add_source
from ltopd.pipeline.spec import job_inputs as _job_inputs  # every job's first step


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("pretrain-twin", help="pretrain a tiny twin on the procedural world and probe it on a "
                                             "held-out split")
    add_source(s, "pretrain-twin")
    s.add_argument("--out", required=True)
    s.add_argument("--metrics", required=True, help="small JSON summary (DVC metrics)")
    s.add_argument("--wildcards", default="{}")
    _twin_arguments(s)
    s.set_defaults(func=pretrain_twin)
    s = sub.add_parser("release-twin", help="pretrain a twin (resumable), gate it on every benchmark twin, write "
                                            "its release folder")
    add_source(s, "release-twin")
    s.add_argument("--out", required=True, help="the release folder")
    s.add_argument("--state", required=True, help="folder of the resumable pretraining state")
    s.add_argument("--warm-start", metavar="RELEASE", help="a release whose recipe this one continues (its stages, "
                   "then one with `fresh_optimizer`): start from its weights instead of rerunning its stages "
                   "(the weights a build from scratch gives; ltopd.twins.build.warm_start)")
    _twin_arguments(s)
    s.set_defaults(func=release_twin)
    s = sub.add_parser("release-report", help="the released twins' cost and gates as markdown (docs/releases.md, "
                                              "README block)")
    s.add_argument("--config", required=True, help="profile YAML (its release_dir and released backbones)")
    s.add_argument("--out", default="docs/releases.md")
    s.add_argument("--readme", help="also replace the README's releases block")
    s.set_defaults(func=release_report)


def _twin_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--backbone", required=True, help="a backbone of the profile that has a `twin`")
    s.add_argument("--tokenizer", required=True, help="folder written by build-tokenizer")
    s.add_argument("--threads", type=int, default=1, help="torch CPU threads")


def pretrain_twin(args: argparse.Namespace) -> int:
    import torch

    from ltopd.atomic import write_json
    from ltopd.lineage import log_model
    from ltopd.models.loading import load_tokenizer, save_backbone
    from ltopd.progress import bar as progress_bar
    from ltopd.tracking import flatten, job_run
    from ltopd.twins import job as twin_job

    # Snakemake's `threads`: parallel 1-thread jobs beat one 2-thread job on small CPUs
    torch.set_num_threads(args.threads)
    spec, settings = _job_inputs(args, ("backbones", "pretrain", "reduction", "world"))
    from ltopd.twins.release import twin_spec

    spec = twin_spec(spec, args.backbone)  # the twin's own stages, if its entry has them
    twin = spec["backbones"][args.backbone]["twin"]
    tokenizer = load_tokenizer(args.tokenizer)
    total = sum(s["steps"] for s in spec["pretrain"]["stages"])
    with job_run(settings, args.rule, {"backbone": args.backbone}, spec,
                 inputs={"tokenizer": args.tokenizer}) as run, progress_bar(total, f"pretrain {twin}", "step") as bar:
        def on_step(log: Any) -> None:
            run.log_metrics({"loss": log.loss, **{f"lr_{k}": v for k, v in log.lrs.items()}}, step=log.step)
            bar.set_postfix(stage=log.stage, loss=f"{log.loss:.3f}", refresh=False)
            bar.update()

        backbone, metrics = twin_job.run(twin, tokenizer, spec["pretrain"], spec["world"], spec["reduction"]["floor"],
                                         spec["backbones"][args.backbone].get("lr_scale", 1.0), on_step=on_step)
        save_backbone(backbone, args.out)
        flat = {k: float(v) for k, v in flatten(metrics).items()}
        model_id = log_model(run, f"{args.backbone} (twin)", args.out, "twin", {"backbone": args.backbone, **spec})
        run.log_metrics(flat, model_id=model_id)  # its held-out probe: the twin's own metrics
        write_json(args.metrics, metrics)
    ratio = spec["pretrain"]["heldout"]["ratio"]
    print(f"{args.backbone} ({twin}, {metrics['parameters']:,} parameters): {metrics['steps']} updates in "
          f"{metrics['wall_s']:.0f} s, loss {metrics['loss_first']:.3f} -> {metrics['loss_last']:.3f}")
    print(f"  held-out accuracy ({spec['pretrain']['heldout']['n']} items): question-only baseline "
          f"{metrics['question_only']:.3f}, full tokens {metrics['full/all']:.3f}, "
          + ", ".join(f"{s} at {ratio:g} {metrics[f'{s}-{ratio:g}/all']:.3f}"
                      for s in spec["pretrain"]["heldout"]["selectors"]))
    return 0


def release_twin(args: argparse.Namespace) -> int:
    import torch

    from ltopd.lineage import log_model
    from ltopd.models.loading import load_tokenizer
    from ltopd.pipeline.spec import numbers
    from ltopd.progress import bar as progress_bar
    from ltopd.report import releases
    from ltopd.tracking import job_run
    from ltopd.twins.build import CHECKPOINT_EVERY, build

    torch.set_num_threads(args.threads)
    spec, settings = _job_inputs(args, ("backbones", "pretrain", "reduction", "world", "evaluation"))
    entry = spec["backbones"].get(args.backbone) or {}
    if not entry.get("twin"):
        raise SystemExit(f"backbones.{args.backbone}: no `twin` to release; twins: "
                         f"{sorted(b for b, e in spec['backbones'].items() if e.get('twin'))}")
    from ltopd.twins.release import twin_spec

    spec = twin_spec(spec, args.backbone)  # the twin's own stages, if its entry has them
    tokenizer = load_tokenizer(args.tokenizer)
    total = sum(s["steps"] for s in spec["pretrain"]["stages"])
    _claim_state(args, spec)
    _warm_start_or_resume(args, spec)
    with (job_run(settings, args.rule, {"backbone": args.backbone}, spec,
                  inputs={"tokenizer": args.tokenizer}) as run,
          progress_bar(total, f"release {entry['twin']}", "step") as bar):
        def on_step(log: Any) -> None:
            if bar.n == 0 and log.step > 1:  # resumed: the bar starts where the saved state stopped
                bar.update(log.step - 1)
            run.log_metrics({"loss": log.loss, **{f"lr_{k}": v for k, v in log.lrs.items()}}, step=log.step)
            bar.set_postfix(stage=log.stage, loss=f"{log.loss:.3f}", refresh=False)
            bar.update()

        every = spec["pretrain"].get("checkpoint_every", CHECKPOINT_EVERY)
        manifest = build(spec, args.backbone, tokenizer, args.state, args.out, on_step=on_step, checkpoint_every=every)
        # the release as a logged model of this run: its recipe, and its gates as its metrics
        model_id = log_model(run, f"{entry['twin']} (release)", args.out, "release",
                             {"backbone": args.backbone, "recipe": manifest["recipe"]})
        # (numbers, not flatten: flatten gives strings, so no gate reached MLflow before)
        run.log_metrics(numbers(manifest["gates"]["benchmarks"]), model_id=model_id)
    cost, gates = manifest["pretraining"], manifest["gates"]
    print(f"{args.backbone} ({entry['twin']}): {cost['steps']} updates, {cost['wall_s'] / 60:.1f} min of pretraining "
          f"-> {args.out}")
    print("\n".join(releases.gate_table(gates)))
    print(f"gates passed: {len(gates['passed'])} of {len(gates['benchmarks'])}")
    return 0


def _claim_state(args: argparse.Namespace, spec: dict[str, Any]) -> None:
    """--state resumes only the build of this recipe, tokenizer, warm-start parent and code
    (ltopd.job_identity): another build's state is set aside, with one line saying why."""
    from ltopd.job_identity import claim, identity
    from ltopd.twins.release import RELEASE_MODULES, recipe

    parent = _continues(spec, args.backbone)
    inputs = {"tokenizer": Path(args.tokenizer) / "tokenizer.json",
              **({"warm_start": args.warm_start} if args.warm_start else {}),
              **({"continues": Path(parent) / "model.safetensors"} if parent else {})}
    claim(args.state, identity(recipe(spec, args.backbone), inputs, code=RELEASE_MODULES))


def _continues(spec: dict[str, Any], backbone: str) -> str | None:
    """The release the backbone entry's recipe continues (its `continues`), if any."""
    return spec["backbones"][backbone].get("continues")


def _warm_start_or_resume(args: argparse.Namespace, spec: dict[str, Any]) -> None:
    """With --warm-start (or an entry that `continues` a release), seed --state from the release
    unless it holds this build's state (then resume it). `_claim_state` has already set aside any
    state of another build, so a state and its warm-start record here are this build's."""
    from ltopd.twins.build import WARM_START, continue_release, warm_start
    from ltopd.twins.pretrain import STATE_FILE

    state, record = Path(args.state) / STATE_FILE, Path(args.state) / WARM_START
    parent = _continues(spec, args.backbone)
    if parent and args.warm_start:
        raise SystemExit(f"backbones.{args.backbone}.continues names {parent}; drop --warm-start {args.warm_start}")
    if parent:
        args.warm_start, seed = parent, continue_release
    elif args.warm_start:
        seed = warm_start
    else:
        return
    if state.is_file() and record.is_file():
        print(f"resuming the warm-started build in {args.state}")
        return
    from ltopd.job_identity import sha256_file

    mine_tok, theirs_tok = (Path(d) / "tokenizer.json" for d in (args.tokenizer, args.warm_start))
    if sha256_file(mine_tok) != sha256_file(theirs_tok):  # same vocabulary size is not the same vocabulary
        raise SystemExit(f"--tokenizer {args.tokenizer} is not the tokenizer of {args.warm_start}: its weights "
                         "index another vocabulary (pass the release folder itself as --tokenizer)")
    record.unlink(missing_ok=True)
    info = seed(spec, args.backbone, args.warm_start, args.state)
    print(f"warm start from {args.warm_start}: its {info['steps']} updates; code changed since: "
          f"{info['code_changed_since_parent'] or 'none'}")


def release_report(args: argparse.Namespace) -> int:
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
