# LT-OPD pipeline entry point: config + includes. Rules live in workflow/rules/*.smk.
# Profiles: config/default.yaml (used when no --configfile is given), config/smoke.yaml, config/paper.yaml.
import sys

from snakemake.utils import min_version

from ltopd import config as ltopd_config
from ltopd.layers import load_layers
from ltopd.pipeline.scheduler_timers import cancel_scheduler_timers

min_version("9.0")

# Layered profiles (ltopd.layers): `--configfile config/<profile>.yaml` picks a profile (default:
# config/default.yaml); a file without a `profile` key is an override file deep-merged onto the
# profile before it (`--configfile config/default.yaml override.yaml`); `--config key=value`
# merges last. `--config` values nested in lists or mappings arrive from Snakemake as strings;
# they are read back with YAML's types, as the same values in a profile file would be.
_overrides = ltopd_config.yaml_typed(dict(workflow.config_settings.config))

# One error path for every entry point (snakemake, dvc repro, ltopd validate): the file or the
# `--config` key, the dotted key, the value and the allowed values, before any job starts.
try:
    _layered, _origins = load_layers(workflow.configfiles, _overrides)
except ltopd_config.ConfigError as e:
    sys.exit(f"error: {e}")
config.clear()
config.update(_layered)
PROFILE = _origins.source  # "config/default.yaml + override.yaml + --config": the MLflow parent run's tag


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/backbone.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/efficiency.smk"


# Cheap gathering rules run on the submit host under a cluster executor.
localrules:
    all,
    all_evaluations,
    table2,
    ablation_table,
    table5,
    study_table,
    study_figure,
    all_tables,

# One MLflow parent run per invocation, created before any job runs (SQLite hates racing creators).
onstart:
    warn_stale_releases()
    publish_costs()
    tracking.start_pipeline(MLFLOW, PROFILE)


onsuccess:
    tracking.end_pipeline(MLFLOW, ok=True)
    cancel_scheduler_timers()  # else the process waits out the rate limit's timespan (up to 5 min)


onerror:
    tracking.end_pipeline(MLFLOW, ok=False)
    cancel_scheduler_timers()


rule all:
    default_target: True
    input:
        all_targets(),
