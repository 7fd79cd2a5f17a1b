# Shared helpers: profile validation with readable errors, paths from the grid, MLflow setup.
import functools
import json
import re
import shlex
import sys
from pathlib import Path

from ltopd import config as ltopd_config
from ltopd import catalog, grid, tracking
from ltopd import watchdog


PATHS = grid.paths(config)


def check_releases():
    """Before any job (every parse, dry runs too): stop when a released twin's weights do not
    match its manifest (one line naming the file); say which releases are missing (the run would
    rebuild them: hours)."""
    from ltopd.models.manifest import ReleaseError, read_manifest, verify_weights

    for name in grid.released(config):
        folder = PATHS["release"].format(backbone=name)
        try:
            read_manifest(folder)
        except ReleaseError as e:
            print(f"WARNING: {e} (a run that needs it builds it first: hours of pretraining)", file=sys.stderr)
            continue
        try:
            verify_weights(folder)
        except ReleaseError as e:
            sys.exit(f"error: {e}")


def warn_stale_releases():
    """Once per run (onstart: not for dry runs, nor in jobs): one line naming the releases built by
    other code, libraries or recipe than the current ones, and why; each one's details in a file."""
    from ltopd.atomic import atomic_file
    from ltopd.models.manifest import MANIFEST
    from ltopd.twins.release import stale_reasons, stale_summary

    reasons = {name: stale_reasons(PATHS["release"].format(backbone=name), config, name)
               for name in grid.released(config)
               if Path(PATHS["release"].format(backbone=name), MANIFEST).is_file()}
    details = Path(PATHS["logs"]) / "release-staleness.txt"
    line = stale_summary(reasons, str(details))
    if line:
        details.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(details) as fh:
            fh.writelines(f"{name}: {detail}\n" for name, found in reasons.items() for _, detail in found)
        print(line, file=sys.stderr)


def publish_costs():
    """The jobs this run will run with their expected units (ltopd.pipeline.job_costs), for the
    `--logger ltopd` ETA (onstart: the DAG is known, no job has started)."""
    from ltopd.pipeline import job_costs

    try:
        jobs = [(job.rule.name, dict(job.wildcards_dict)) for job in workflow.dag.needrun_jobs()]
        job_costs.publish(config["profile"], job_costs.plan(config, jobs), workflow.resource_settings.cores)
    except Exception as e:  # advisory: a failed estimate must not stop the run
        print(f"ltopd: no cost estimate for the ETA ({type(e).__name__}: {e})", file=sys.stderr)


check_releases()


def check_external_students():
    """Before any job: stop on an external student whose folder does not match its backbone's
    family (one line: wrong architecture, missing weights, a vocabulary or processor mismatch)."""
    from ltopd.pipeline.external import external_student_problems

    if problems := external_student_problems(config):
        shown = Path(PROFILE).resolve()
        shown = shown.relative_to(Path.cwd().resolve()) if shown.is_relative_to(Path.cwd().resolve()) else shown
        sys.exit("\n".join(f"error: {shown}: {p}" for p in problems))  # one line per folder


check_external_students()
OUT = config["out_root"]
MLFLOW = tracking.Settings.from_config(config)
MLFLOW.export()  # jobs read MLflow settings from the environment, not from params
watchdog.export()  # jobs stop once this Snakemake process is gone (a kill -9 leaves no stray job)


def all_targets():
    return grid.targets(config)


def spec(*sections, **overrides):
    """The config sections a job depends on, as JSON for `ltopd --spec` (params -> reruns)."""
    body = {"profile": config["profile"], **{k: config[k] for k in sections}, **overrides}
    return json.dumps(body, sort_keys=True)


def twin_spec(wildcards):
    """A twin's job depends on its own backbone entry only, so tuning one twin reruns one job."""
    one = {wildcards.backbone: config["backbones"][wildcards.backbone]}
    return spec("pretrain", "reduction", "world", backbones=one)


def release_spec(wildcards):
    """A release build depends on its own backbone entry, the recipe and the gates' benchmarks."""
    one = {wildcards.backbone: config["backbones"][wildcards.backbone]}
    return spec("pretrain", "reduction", "world", "evaluation", backbones=one)


def release_tokenizer(wildcards):
    """A release that continues another reads its parent's vocabulary (the parent's folder);
    otherwise the tokenizer the build makes first."""
    return config["backbones"][wildcards.backbone].get("continues") or f"{OUT}/train_state/release/tokenizer"


def eval_group_spec(backbone, student):
    """An evaluation depends on the floor and batch size; a trained student's also on the selector
    it was trained with (changing training.selector reruns exactly those evaluations); a twin's on
    the benchmarks it answers evidence-first (asked with their instruction)."""
    extra = {}
    if student is not None:
        extra["training"] = {"selector": grid.reduction_defaults(config).selector}
    if config["backbones"][backbone].get("evidence"):
        extra["evidence"] = config["backbones"][backbone]["evidence"]
    external = grid.external_entry(config, student)
    if external is not None:  # trained elsewhere: its own selector and floor, its folder's content
        extra.update(training={"selector": external["selector"]}, reduction={"floor": external["floor"]},
                     external={**external, "sha256": external_sha256(external["path"])})
        return spec(evaluation={"batch_size": config["evaluation"]["batch_size"]}, **extra)
    return spec("reduction", evaluation={"batch_size": config["evaluation"]["batch_size"]}, **extra)


@functools.cache
def external_sha256(folder):
    """An external student's content hash (a param of its evaluation: one changed byte reruns it),
    file hashes kept beside the posing verdicts so that a parse reads only changed files."""
    from ltopd.models.external import folder_sha256

    return folder_sha256(folder, ltopd_config.posing_cache_file().with_name("file-sha256.json"))


def eval_path(key, job):
    return PATHS[key].format(backbone=job.backbone, method=job.method, budget=job.budget_tag,
                             benchmark=job.benchmark, seed=job.seed)


def eval_group_settings(jobs):
    """The group's settings for `ltopd evaluate-group --settings` (records and output folders)."""
    return json.dumps([{"method": j.method, "budget": j.budget, "benchmark": j.benchmark,
                        "records": PATHS["bench"].format(benchmark=j.benchmark, seed=j.seed),
                        "out_dir": str(Path(eval_path("eval_metrics", j)).parent)} for j in jobs])


def profile_setting(value):
    return getattr(value, "raw", value)  # Snakemake hands profile values over as Resource objects


# A profile's `evaluate` entries (set-threads, set-resources) apply to every evaluate_* rule.
EVAL_THREADS = profile_setting(workflow.resource_settings.overwrite_threads.get("evaluate", 1))
EVAL_RESOURCES = {k: profile_setting(v)
                  for k, v in dict(workflow.resource_settings.overwrite_resources.get("evaluate", {})).items()}


def eval_model(backbone, student, seed):
    """The weights an evaluation group loads: a trained method's student, else (None) the backbone."""
    external = grid.external_entry(config, student)
    if external is not None:
        return external["path"]
    if student is not None:
        return PATHS["student"].format(backbone=backbone, method=student, seed=seed)
    return grid.model_path(config, backbone)


def eval_model_input(backbone, student, seed):
    """eval_model as an input edge (none for a built release: backbone_weights)."""
    if student is not None:
        return eval_model(backbone, student, seed)
    return backbone_weights(backbone)


def eval_release_weights(backbone, student):
    """release_weights for an evaluation of the backbone itself; a student's evaluation reruns
    when its training does (the student folder is its input)."""
    return "" if student is not None else release_weights(backbone)


@functools.cache
def _job_code(job):
    return tuple(grid.job_code(job, workflow.basedir))


def job_code(job):
    """A rule's code inputs: every source file its job module (ltopd.pipeline.<job>) can run,
    from the import graph (ltopd.codegraph: Snakemake's code trigger sees only the shell
    command); not the CLI's dispatch, so editing one job reruns only its own rule's jobs.
    Computed once per job module and parse (29 rules ask for 7 modules)."""
    return list(_job_code(job))


def bench_spec(wildcards):
    """A benchmark's build depends on its own entry only (changing POPE's n rebuilds POPE)."""
    ev = config["evaluation"]
    return spec("world", evaluation={"benchmarks": {wildcards.benchmark: ev["benchmarks"][wildcards.benchmark]}})


def bench_source(wildcards):
    path = config["evaluation"]["benchmarks"][wildcards.benchmark].get("path")
    return [path] if path else []


@functools.cache
def release_weights(backbone):
    """A released twin's weights (sha256 per file, from its manifest) as a job param, so that a
    newly committed release reruns exactly the jobs that start from it; "" for other backbones
    and for a release not built yet. Read once per parse (every job of the backbone asks)."""
    from ltopd.models.manifest import MANIFEST, read_manifest

    folder = grid.model_path(config, backbone)
    if not config["backbones"][backbone].get("release") or not Path(folder, MANIFEST).is_file():
        return ""
    return json.dumps(read_manifest(folder)["weights_sha256"], sort_keys=True)


def backbone_weights(backbone):
    """The input edge to a backbone's weights: a local checkpoint, the twin this run pretrains, or
    a released twin not built yet (`ancient`: its checkout time says nothing). A built release is
    no input at all: its rule runs only when asked (`release_twins`), and as anyone's input
    Snakemake would rerun it (hours) whenever a profile section it reads changes. Jobs take its
    weights' hashes as a param instead (release_weights)."""
    path = grid.model_path(config, backbone)
    if not config["backbones"][backbone].get("release"):
        return path
    return [] if release_weights(backbone) else ancient(path)


def base_model(wildcards):
    return backbone_weights(wildcards.backbone)


def model_arg(path):
    """A job's --model: its input edge where it has one, else the built release's folder (a
    param computed from the input, as Snakemake's lint asks of paths)."""
    return lambda wildcards, input: input.model if input.model else path(wildcards)


def base_model_path(wildcards):
    return grid.model_path(config, wildcards.backbone)


def base_release_weights(wildcards):
    return release_weights(wildcards.backbone)


# The question-only baseline's fit records (Table 2 and the ablation tables): the files, and the
# `--fit-records` argument naming each one's benchmark and seed.
FIT_RECORDS = grid.table2_fit_records(config)
FIT_RECORDS_ARG = " ".join(shlex.quote(f"{k}={v}") for k, v in FIT_RECORDS.items())
# The benchmarks given as synthetic twins, as a wildcard pattern (matching nothing when there are none).
SYNTHETIC_BENCHMARKS = "|".join(re.escape(b) for b in grid.synthetic_benchmarks(config)) or r"(?!)"


def ablation_inputs(wildcards):
    return grid.ablation_inputs(config, wildcards.table)


def ablation_predictions(wildcards):
    return grid.ablation_inputs(config, wildcards.table, key="eval_predictions")


def study_inputs(wildcards):
    return grid.study_inputs(config, wildcards.table)


def train_spec(wildcards):
    """A training job's spec: `training` and `reduction`, plus its family's or its module's own
    section (rl, epic, llava_mini, learnable_merge), so tuning GRPO's clip reruns the RL jobs only
    and a changed learnable_merge setting retrains that student only."""
    from ltopd.train.methods import method_spec

    section = method_spec(wildcards.method).section
    return spec("training", "reduction", **({section: config.get(section) or {}} if section else {}))


def train_launcher(wildcards):
    """`ltopd`, or `accelerate launch` across the job's GPUs when training.distributed asks.
    A method whose student carries a module (LLaVA-Mini, the learnable merge) runs data-parallel
    without sharding: its module works on the post-merger features outside the wrapped forward,
    where FSDP's parameters are not gathered."""
    from ltopd.train.methods import method_spec

    dist = config.get("training", {}).get("distributed") or {"strategy": "none", "num_processes": 1}
    if dist["strategy"] == "none" or dist["num_processes"] == 1:
        return "ltopd"
    if dist.get("launcher") == "torchrun":  # CPU processes (gloo); data parallel, no sharding
        return f"torchrun --nproc_per_node {dist['num_processes']} -m ltopd.cli"
    fsdp = " --use_fsdp" if dist["strategy"] == "fsdp" and not method_spec(wildcards.method).adds_module else ""
    return f"accelerate launch --num_processes {dist['num_processes']}{fsdp} -m ltopd.cli"
