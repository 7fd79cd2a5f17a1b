# Dataset construction: LT-14K by seeded quota sampling from its four sources.


rule lt14k:
    input:
        code=job_code("data_jobs"),
    output:
        dataset=directory(PATHS["lt14k"]),
        metrics=PATHS["lt14k_metrics"],
    params:
        spec=spec("lt14k", "world"),
    log:
        f"{PATHS['logs']}/lt14k.log",
    conda:
        "../../envs/ltopd.yaml"
    benchmark:
        f"{PATHS['logs']}/lt14k.benchmark.tsv"
    shell:
        "ltopd build-lt14k --spec {params.spec:q} --out {output.dataset} --metrics {output.metrics} "
        "--rule lt14k > {log} 2>&1"
