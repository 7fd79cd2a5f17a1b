# Backbones: the tiny twins' tokenizer, then each twin pretrained on the procedural world and
# probed (full tokens vs 5%) on a held-out split. Real checkpoints (`checkpoint:`) skip this.


# Profiles without twins (paper: real checkpoints only) have no pretrain section: no rules here.
if grid.twins(config):

    rule tokenizer:
        input:
            code=job_code("data_jobs"),
        output:
            directory(PATHS["tokenizer"]),
        params:
            spec=spec("pretrain", "world"),
        log:
            f"{PATHS['logs']}/tokenizer.log",
        benchmark:
            f"{PATHS['logs']}/tokenizer.benchmark.tsv",
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "ltopd build-tokenizer --spec {params.spec:q} --out {output} --rule tokenizer > {log} 2>&1"


    rule pretrain_twin:
        input:
            tokenizer=PATHS["tokenizer"],
            code=job_code("twin_jobs"),
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


# Released twins: `snakemake --cores all release_twins --forcerun release_twin` rebuilds every
# backbone's `release` folder from the profile's pretrain section (resuming from
# train_state/release/<backbone> when a build was interrupted). Nothing else depends on a built
# release (common.smk: backbone_weights; jobs take its weights' hashes as a param), so no other
# target ever rebuilds one, even when a profile section this rule reads has changed.
if grid.released(config):

    rule release_twin:
        # No inputs on purpose: a committed release is rebuilt only when asked (--forcerun) or
        # missing, never because a clean clone lacks the tokenizer the build would make first.
        output:
            model=directory(PATHS["release"]),
        params:
            spec=release_spec,
            tokenizer_spec=spec("pretrain", "world"),
            tokenizer=release_tokenizer,
            state=f"{OUT}/train_state/release/{{backbone}}",
        wildcard_constraints:
            backbone="|".join(grid.released(config)),
        threads: 1
        log:
            f"{PATHS['logs']}/release_twin/{{backbone}}.log",
        benchmark:
            f"{PATHS['logs']}/release_twin/{{backbone}}.benchmark.tsv",
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "(test -d {params.tokenizer} || ltopd build-tokenizer --spec {params.tokenizer_spec:q} "
            "--out {params.tokenizer} --rule release_twin) > {log} 2>&1 && "
            "ltopd release-twin --spec {params.spec:q} --backbone {wildcards.backbone} --tokenizer {params.tokenizer} "
            "--state {params.state} --threads {threads} --out {output.model} --rule release_twin >> {log} 2>&1"


    rule release_twins:
        input:
            [PATHS["release"].format(backbone=b) for b in grid.released(config)],
