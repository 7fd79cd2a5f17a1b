# Training: one job per (backbone, trained method, seed). The student starts from the backbone,
# trains toward the grid's smallest budget on LT-14K and is saved like any checkpoint; a killed
# job resumes from its checkpoints folder (kept outside the output, which Snakemake removes;
# the job removes it once the student is written).


rule train:
    input:
        model=base_model,
        data=PATHS["lt14k"],
        code=job_code("train_job"),
    output:
        model=directory(PATHS["student"]),
        metrics=PATHS["train_metrics"],
    params:
        model=model_arg(base_model_path),
        weights=base_release_weights,
        spec=train_spec,
        budget=grid.reduction_defaults(config).budget,
        checkpoints=lambda wc: PATHS["checkpoints"].format(**wc),
        launch=train_launcher,
    wildcard_constraints:
        seed=r"\d+",
        method="|".join(catalog.methods_of_kind("trained")),
    threads: 1
    log:
        f"{PATHS['logs']}/train/{{backbone}}/{{method}}-seed{{seed}}.log",
    benchmark:
        f"{PATHS['logs']}/train/{{backbone}}/{{method}}-seed{{seed}}.benchmark.tsv"
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "{params.launch} train --spec {params.spec:q} --backbone {wildcards.backbone} --model {params.model} "
        "--data {input.data} --method {wildcards.method} --budget {params.budget} --seed {wildcards.seed} "
        "--checkpoints {params.checkpoints} --out {output.model} --metrics {output.metrics} "
        "--threads {threads} --rule train > {log} 2>&1"
