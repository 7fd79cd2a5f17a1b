# Tables and figures from the evaluation metrics, each with the paper's reported numbers beside ours.


rule table2:
    input:
        results=grid.table2_inputs(config),
        code=code("report") + ["src/ltopd/cli.py"],
    output:
        csv=PATHS["table2"],
        md=PATHS["table2_md"],
        figure=PATHS["table2_fig"],
    params:
        spec=spec("grid", "seeds"),
    log:
        f"{PATHS['logs']}/table2.log",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd table --table table2 --spec {params.spec:q} --results {input.results} --out {output.csv} "
        "--markdown {output.md} --figure {output.figure} --rule table2 > {log} 2>&1"


rule ablation_table:
    input:
        results=ablation_inputs,
        code=code("report") + ["src/ltopd/cli.py"],
    output:
        csv=PATHS["table"],
        md=PATHS["table_md"],
    params:
        spec=spec("grid", "seeds"),
    wildcard_constraints:
        table="|".join(grid.ABLATION_TABLES),
    log:
        f"{PATHS['logs']}/{{table}}.log",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd table --table {wildcards.table} --spec {params.spec:q} --results {input.results} "
        "--out {output.csv} --markdown {output.md} --rule ablation_table > {log} 2>&1"
