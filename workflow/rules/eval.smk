# Evaluation: each benchmark's records built once per seed, then one job per
# (backbone, method, budget, benchmark, seed) of the grid: predictions + official metrics.


rule bench_records:
    input:
        source=bench_source,
        code=code("bench", "data") + ["src/ltopd/cli.py"],
    output:
        directory(PATHS["bench"]),
    params:
        spec=bench_spec,
    wildcard_constraints:
        seed=r"\d+",
    log:
        f"{PATHS['logs']}/bench_records/{{benchmark}}-seed{{seed}}.log",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd build-bench --spec {params.spec:q} --benchmark {wildcards.benchmark} --seed {wildcards.seed} "
        "--out {output} --rule bench_records > {log} 2>&1"


rule evaluate:
    input:
        model=model_dir,
        records=PATHS["bench"],
        code=code("bench", "models", "selectors") + ["src/ltopd/cli.py"],
    output:
        metrics=PATHS["eval_metrics"],
        predictions=PATHS["eval_predictions"],
    params:
        spec=eval_spec,
        out_dir=lambda wc, output: str(Path(output.metrics).parent),
    wildcard_constraints:
        seed=r"\d+",
        budget=r"[0-9.]+",
        method="|".join(grid.METHODS),
    threads: 1
    log:
        f"{PATHS['logs']}/evaluate/{{backbone}}/{{method}}-{{budget}}-{{benchmark}}-seed{{seed}}.log",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd evaluate --spec {params.spec:q} --backbone {wildcards.backbone} --model {input.model} "
        "--records {input.records} --method {wildcards.method} --budget {wildcards.budget} "
        "--benchmark {wildcards.benchmark} --seed {wildcards.seed} --out-dir {params.out_dir} "
        "--threads {threads} --rule evaluate > {log} 2>&1"


rule all_evaluations:
    input:
        grid.eval_outputs(config),
