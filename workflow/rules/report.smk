# Tables and figures from the evaluation metrics, each with the paper's reported numbers beside ours.

# The students' selector (training.selector): the untrained student's row that Table 2 pairs the
# methods with and the studies and Figure 4 compare against.
TRAINING_SELECTOR = {"selector": grid.reduction_defaults(config).selector}


# Table 2 also reads each evaluation's per-item predictions (the paired bootstrap behind its gates
# and intervals) and, per synthetic benchmark and seed, the records of the fit seed its
# out-of-sample question-only baseline is fitted on (rule fit_records builds them; real
# benchmarks are cross-fitted instead).
rule table2:
    input:
        # the grid's rows, then the external students' (a row each, evaluated as a trained student)
        results=grid.table2_inputs(config) + grid.external_inputs(config),
        predictions=grid.table2_inputs(config, key="eval_predictions")
        + grid.external_inputs(config, key="eval_predictions"),
        fit=list(FIT_RECORDS.values()),
        code=job_code("table_jobs"),
    output:
        **grid.table_outputs(config, "table2"),  # the catalog's outputs: csv, md, json, figure
    params:
        spec=spec("grid", "seeds", training=TRAINING_SELECTOR,
                  external_students=sorted(grid.external_students(config))),
        fit=FIT_RECORDS_ARG,
    log:
        f"{PATHS['logs']}/table2.log",
    benchmark:
        f"{PATHS['logs']}/table2.benchmark.tsv",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd table --table table2 --spec {params.spec:q} --results {input.results} "
        "--predictions {input.predictions} --fit-records {params.fit} --out {output.csv} "
        "--markdown {output.md} --json {output.json} --figure {output.figure} --rule table2 > {log} 2>&1"


# One rule per kind of table, its outputs the catalog's (each of its tables declares the same).
ABLATIONS = catalog.tables_of_kind("ablation")
STUDY_TABLES = [t for t in catalog.tables_of_kind("study") if not catalog.TABLES[t].is_figure]
STUDY_FIGURES = [t for t in catalog.tables_of_kind("study") if catalog.TABLES[t].is_figure]


rule ablation_table:
    input:
        results=ablation_inputs,
        predictions=ablation_predictions,
        fit=list(FIT_RECORDS.values()),
        code=job_code("table_jobs"),
    output:
        **grid.rule_outputs(config, ABLATIONS),
    params:
        spec=spec("grid", "seeds", training=TRAINING_SELECTOR),
        fit=FIT_RECORDS_ARG,
    wildcard_constraints:
        table="|".join(ABLATIONS),
    log:
        f"{PATHS['logs']}/{{table}}.log",
    benchmark:
        f"{PATHS['logs']}/{{table}}.benchmark.tsv",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd table --table {wildcards.table} --spec {params.spec:q} --results {input.results} "
        "--predictions {input.predictions} --fit-records {params.fit} --out {output.csv} "
        "--markdown {output.md} --rule ablation_table > {log} 2>&1"


rule study_table:
    input:
        results=study_inputs,
        code=job_code("study_jobs"),
    output:
        **grid.rule_outputs(config, STUDY_TABLES),
    params:
        spec=spec("grid", "seeds", studies=config.get("studies") or {}, training=TRAINING_SELECTOR),
    wildcard_constraints:
        table="|".join(STUDY_TABLES),
    log:
        f"{PATHS['logs']}/{{table}}.log",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd study --study {wildcards.table} --spec {params.spec:q} --results {input.results} "
        "--out {output.csv} --markdown {output.md} --rule study_table > {log} 2>&1"


rule study_figure:
    input:
        results=study_inputs,
        code=job_code("study_jobs"),
    output:
        **grid.rule_outputs(config, STUDY_FIGURES),
    params:
        spec=spec("grid", "seeds", studies=config.get("studies") or {}, training=TRAINING_SELECTOR),
    wildcard_constraints:
        table="|".join(STUDY_FIGURES),
    log:
        f"{PATHS['logs']}/{{table}}.log",
    benchmark:
        f"{PATHS['logs']}/{{table}}.benchmark.tsv",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd study --study {wildcards.table} --spec {params.spec:q} --results {input.results} "
        "--out {output.csv} --figure {output.figure} --rule study_figure > {log} 2>&1"


if config.get("efficiency"):

    localrules:
        figure1_right,

    rule figure1_right:
        input:
            results=grid.table2_inputs(config),
            arch=config["efficiency"]["analytic_config"],
            code=job_code("study_jobs"),
        output:
            **grid.table_outputs(config, "figure1_right"),
        params:
            spec=spec("grid", "seeds", "efficiency"),
        log:
            f"{PATHS['logs']}/figure1_right.log",
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "ltopd figure1-right --spec {params.spec:q} --results {input.results} --analytic-config {input.arch} "
            "--out {output.csv} --figure {output.figure} --rule figure1_right > {log} 2>&1"


rule all_tables:
    input:
        grid.all_tables(config),
