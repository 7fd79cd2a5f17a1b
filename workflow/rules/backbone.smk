# Backbones: the tiny twins' tokenizer, then each twin pretrained on the procedural world and
# probed (full tokens vs 5%) on a held-out split. Real checkpoints (`checkpoint:`) skip this.


# Profiles without twins (paper: real checkpoints only) have no pretrain section: no rules here.
if grid.twins(config):

    rule tokenizer:
        input:
            code=code("models", "data/world") + ["src/ltopd/cli.py"],
        output:
            directory(PATHS["tokenizer"]),
        params:
            spec=spec("pretrain", "world"),
        log:
            f"{PATHS['logs']}/tokenizer.log",
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "ltopd build-tokenizer --spec {params.spec:q} --out {output} --rule tokenizer > {log} 2>&1"


    rule pretrain_twin:
        input:
            tokenizer=PATHS["tokenizer"],
            code=code("models", "data/world", "selectors") + ["src/ltopd/cli.py"],
        output:
            model=directory(PATHS["twin"]),
            metrics=PATHS["twin_metrics"],
        params:
            spec=twin_spec,
        wildcard_constraints:
            backbone="|".join(grid.twins(config)) or "no-twins",
        threads: 1
        log:
            f"{PATHS['logs']}/pretrain_twin/{{backbone}}.log",
        benchmark:
            f"{PATHS['logs']}/pretrain_twin/{{backbone}}.benchmark.tsv"
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "ltopd pretrain-twin --spec {params.spec:q} --backbone {wildcards.backbone} "
            "--tokenizer {input.tokenizer} --threads {threads} --out {output.model} --metrics {output.metrics} "
            "--rule pretrain_twin > {log} 2>&1"
