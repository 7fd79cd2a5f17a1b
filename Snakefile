# LT-OPD pipeline entry point: config + includes. Rules live in workflow/rules/*.smk.
# Profiles: config/default.yaml (used when no --configfile is given), config/smoke.yaml, config/paper.yaml.
from snakemake.utils import min_version, validate

min_version("9.0")

if not config:  # `--configfile config/<profile>.yaml` replaces the default instead of merging into it
    configfile: "config/default.yaml"

validate(config, "workflow/schemas/config.schema.yaml")


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
    figure4,
    all_tables,

# One MLflow parent run per invocation, created before any job runs (SQLite hates racing creators).
onstart:
    tracking.start_pipeline(MLFLOW, str((workflow.configfiles or ["config/default.yaml"])[-1]))


onsuccess:
    tracking.end_pipeline(MLFLOW, ok=True)


onerror:
    tracking.end_pipeline(MLFLOW, ok=False)


rule all:
    default_target: True
    input:
        all_targets(),
