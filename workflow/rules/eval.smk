# Evaluation: each benchmark's records built once per seed, then one job per model and seed of the grid:
# predictions + official metrics per (budget, benchmark) setting.


rule bench_records:
    input:
        source=bench_source,
        code=job_code("data_jobs"),
    output:
        directory(PATHS["bench"]),
    params:
        spec=bench_spec,
    wildcard_constraints:
        seed=r"\d+",
    # Seconds each, and every evaluation waits for them: built before the trainings take the cores.
    priority: 1000
    log:
        f"{PATHS['logs']}/bench_records/{{benchmark}}-seed{{seed}}.log",
    benchmark:
        f"{PATHS['logs']}/bench_records/{{benchmark}}-seed{{seed}}.benchmark.tsv",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd build-bench --spec {params.spec:q} --benchmark {wildcards.benchmark} --seed {wildcards.seed} "
        "--out {output} --rule bench_records > {log} 2>&1"


# The question-only baseline's fit records (Table 2, the ablation tables): a synthetic twin's
# records at the fit seed, drawn as bench_records draws them, saved without their images (the
# baseline reads questions, options and answers only; encoding the images was half of a job).
rule fit_records:
    input:
        code=job_code("data_jobs"),
    output:
        directory(PATHS["bench_fit"]),
    params:
        spec=bench_spec,
    wildcard_constraints:
        seed=r"\d+",
        benchmark=SYNTHETIC_BENCHMARKS,  # a real benchmark (path:) has one record set: its baseline is cross-fitted
    priority: 1000
    log:
        f"{PATHS['logs']}/fit_records/{{benchmark}}-fit{{seed}}.log",
    benchmark:
        f"{PATHS['logs']}/fit_records/{{benchmark}}-fit{{seed}}.benchmark.tsv",
    conda:
        "../../envs/ltopd.yaml"
    shell:
        "ltopd build-bench --spec {params.spec:q} --benchmark {wildcards.benchmark} --seed {wildcards.seed} "
        "--out {output} --text-only --rule fit_records > {log} 2>&1"


# One evaluation job per model and seed: a trained student, or a backbone for all of its
# training-free rows (full, blind, the selectors at every budget, the downsampling control). It
# loads the model and the records once and runs each image through the vision tower once for all
# of its settings that see the same pixels (the downsampling control's resized images get their
# own pass, one per size: budgets resized alike share it). Each setting still gets its own
# predictions.jsonl + metrics.json (and MLflow run), so the tables read them as before. A profile's
# `evaluate` threads and resources (set-threads, set-resources) apply to every evaluate_* rule.
for (_bb, _student, _seed), _jobs in grid.eval_groups(config).items():

    rule:
        name:
            grid.group_name(_bb, _student, _seed)
        input:
            model=eval_model_input(_bb, _student, _seed),
            records=sorted({PATHS["bench"].format(benchmark=j.benchmark, seed=_seed) for j in _jobs}),
            code=job_code("evaluate"),
        output:
            metrics=[eval_path("eval_metrics", j) for j in _jobs],
            predictions=[eval_path("eval_predictions", j) for j in _jobs],
        params:
            spec=eval_group_spec(_bb, _student),
            model=model_arg(lambda wildcards, path=eval_model(_bb, _student, _seed): path),
            weights=eval_release_weights(_bb, _student),
            settings=eval_group_settings(_jobs),
            state=PATHS["eval_state"].format(group=grid.group_name(_bb, _student, _seed)),
            backbone=_bb,
            seed=_seed,
        threads: EVAL_THREADS
        # Longest first: a backbone's training-free group (every selector at every budget) is the
        # run's longest job; started last, the run waits for it alone.
        priority: len(_jobs)
        resources:
            **EVAL_RESOURCES,
        log:
            f"{PATHS['logs']}/evaluate/{_bb}/{_student or 'training_free'}-seed{_seed}.log",
        benchmark:
            f"{PATHS['logs']}/evaluate/{_bb}/{_student or 'training_free'}-seed{_seed}.benchmark.tsv",
        conda:
            "../../envs/ltopd.yaml"
        shell:
            "ltopd evaluate-group --spec {params.spec:q} --backbone {params.backbone} --model {params.model} "
            "--seed {params.seed} --settings {params.settings:q} --state {params.state:q} --threads {threads} "
            "--rule evaluate > {log} 2>&1"


rule all_evaluations:
    input:
        grid.eval_outputs(config),
