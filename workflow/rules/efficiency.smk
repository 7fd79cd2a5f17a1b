# Efficiency (Table 5, Appendix E): the measured protocol on each backbone of `efficiency.backbones`
# (default: the grid's), then results/table5.csv/.md with the paper's rows and the analytic
# Qwen3.5-4B rows (config/models/qwen3_5_4b.json) beside ours.
from ltopd.pipeline.efficiency_jobs import MODULE_SECTIONS as EFFICIENCY_MODULE_SECTIONS
from ltopd.pipeline.efficiency_jobs import settings as efficiency_settings

EFFICIENCY = efficiency_settings(config)
EFFICIENCY_BACKBONES = grid.efficiency_backbones(config)
REDUCTION = grid.reduction_defaults(config)  # the students' selector (LT-OPD's rows) and the target budget
# The sections of the student modules a measured row attaches (ltopd.models.addons): their settings are its cost's.
MODULE_SECTIONS = {k: config[k] for k in EFFICIENCY_MODULE_SECTIONS if k in config}


rule efficiency:
    input:
        model=base_model,
        records=PATHS["bench"].format(benchmark=EFFICIENCY["benchmark"], seed=config["seeds"][0]),
        code=job_code("efficiency_jobs"),
    output:
        PATHS["efficiency"],
    params:
        model=model_arg(base_model_path),
        weights=base_release_weights,
        spec=spec("reduction", efficiency={k: v for k, v in EFFICIENCY.items() if k != "backbones"},
                  training={"selector": REDUCTION.selector}, **MODULE_SECTIONS),
        budget=REDUCTION.budget,
        seed=config["seeds"][0],
        torch_threads=EFFICIENCY["torch_threads"],
    wildcard_constraints:
        backbone="|".join(EFFICIENCY_BACKBONES),
    # Latency is timed: the job claims every core so no other job runs beside it; torch itself
    # uses efficiency.torch_threads of them.
    threads: lambda wildcards: workflow.cores  # a callable: read at scheduling, so --unlock needs no --cores
    log:
        f"{PATHS['logs']}/efficiency/{{backbone}}.log",
    benchmark:
        f"{PATHS['logs']}/efficiency/{{backbone}}.benchmark.tsv"
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd table5 measure --spec {params.spec:q} --backbone {wildcards.backbone} --model {params.model} "
        "--records {input.records} --budget {params.budget} --seed {params.seed} --out {output} "
        "--threads {params.torch_threads} --rule efficiency > {log} 2>&1"


rule table5:
    input:
        measurements=expand(PATHS["efficiency"], backbone=EFFICIENCY_BACKBONES),
        analytic=EFFICIENCY["analytic_config"],
        code=job_code("efficiency_jobs"),
    output:
        **grid.table_outputs(config, "table5"),
    params:
        spec=spec(efficiency={k: v for k, v in EFFICIENCY.items() if k != "backbones"},
                  training={"selector": REDUCTION.selector}),
    log:
        f"{PATHS['logs']}/table5.log",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd table5 build --spec {params.spec:q} --measurements {input.measurements} "
        "--analytic-config {input.analytic} --out {output.csv} --markdown {output.md} --rule table5 > {log} 2>&1"


# The measured prefill time and KV cache of every Table 2 row (method x budget) on Table 2's
# backbone, then Figure 1 right's average retain ratios on them with the Pareto front marked (built with
# an `efficiency` section: grid.tables).
if "figure_pareto" in grid.tables(config):
    PARETO_BACKBONE = grid.pareto_backbone(config)

    rule prefill_costs:
        input:
            model=base_model,
            records=PATHS["bench"].format(benchmark=EFFICIENCY["benchmark"], seed=config["seeds"][0]),
            code=job_code("efficiency_jobs"),
        output:
            PATHS["prefill_costs"],
        params:
            model=model_arg(base_model_path),
            weights=base_release_weights,
            spec=spec("grid", "seeds", "reduction",
                      efficiency={k: v for k, v in EFFICIENCY.items() if k not in ("backbones", "methods")},
                      training={"selector": REDUCTION.selector}, **MODULE_SECTIONS),
            seed=config["seeds"][0],
            torch_threads=EFFICIENCY["torch_threads"],
        wildcard_constraints:
            backbone=PARETO_BACKBONE,
        # Timed like rule efficiency: the job claims every core so no other job runs beside it.
        threads: lambda wildcards: workflow.cores  # a callable: read at scheduling, so --unlock needs no --cores
        log:
            f"{PATHS['logs']}/efficiency/prefill_{{backbone}}.log",
        benchmark:
            f"{PATHS['logs']}/efficiency/prefill_{{backbone}}.benchmark.tsv"
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "ltopd prefill-costs --spec {params.spec:q} --backbone {wildcards.backbone} --model {params.model} "
            "--records {input.records} --seed {params.seed} --out {output} --threads {params.torch_threads} "
            "--rule prefill_costs > {log} 2>&1"

    localrules:
        figure_pareto,

    rule figure_pareto:
        input:
            retain=grid.table_outputs(config, "figure1_right")["csv"],  # the same retain axis
            measurements=PATHS["prefill_costs"].format(backbone=PARETO_BACKBONE),
            code=job_code("study_jobs"),
        output:
            **grid.table_outputs(config, "figure_pareto"),
        params:
            spec=spec("grid", "seeds", "efficiency"),
        log:
            f"{PATHS['logs']}/figure_pareto.log",
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "ltopd figure-pareto --spec {params.spec:q} --retain {input.retain} --measurements {input.measurements} "
            "--out {output.csv} --figure {output.figure} --rule figure_pareto > {log} 2>&1"
