"""The real pipeline end to end on the `smoke` profile: Snakemake, DVC and MLflow together.

Runs in a throwaway copy of the working tree (what a clean clone has), so it never touches the
developer's data/, results/ or MLflow database.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import clone_worktree, exits_within, run_ok, tool_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def snake_run(tmp_path_factory):
    repo = clone_worktree(tmp_path_factory.mktemp("snake"))
    # every job records the imports it executes (ltopd.import_trace): the check on its rule's code inputs
    proc = run_ok(["snakemake", "--cores", "2", "--configfile", "config/smoke.yaml"], repo,
                LTOPD_TRACE_IMPORTS=str(repo / "import-traces"))
    return repo, proc


def test_every_job_ran_only_code_among_its_rules_inputs(snake_run):
    """Each job's executed imports, followed from its job module, stay inside the code inputs its
    rule declares (computed by ltopd.codegraph): editing any module a job ran reruns it."""
    from ltopd import grid
    from ltopd.import_trace import reached

    repo, _ = snake_run
    traces = [json.loads(p.read_text()) for p in (repo / "import-traces").glob("*.json")]
    jobs = {t["module"].rpartition(".")[2] for t in traces}
    assert {"data_jobs", "twin_jobs", "train_job", "evaluate", "table_jobs"} <= jobs
    for t in traces:
        job = t["module"].rpartition(".")[2]
        declared = {f.removeprefix("src/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                    for f in grid.job_code(job, repo)}
        used = reached(t["module"], t["edges"])
        assert used <= declared, f"{t['command']} ran {sorted(used - declared)}, not among its rule's code inputs"


def test_snakemake_builds_lt14k_and_logs_to_mlflow(snake_run):
    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    manifest = json.loads((out / "data" / "lt14k" / "manifest.json").read_text())
    assert manifest["num_questions"] == 140 and manifest["per_source"]["onethinker"] == 72
    assert json.loads((out / "metrics" / "lt14k.json").read_text())["content_sha256"] == manifest["content_sha256"]
    assert "LT-14K: 140 questions in 35 batches of 4" in (out / "logs" / "lt14k.log").read_text()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    (run,) = client.search_runs([exp.experiment_id], "tags.rule = 'lt14k'")
    assert run.info.status == "FINISHED"
    assert run.data.tags["content_sha256"] == manifest["content_sha256"]
    assert run.data.params["lt14k.batch_size"] == "4" and run.data.params["world.image_size"] == "128"
    assert run.data.metrics["num_questions"] == 140
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert run.data.tags["mlflow.source.git.commit"] == head
    parent = client.get_run(run.data.tags["mlflow.parentRunId"])
    assert parent.data.tags["kind"] == "pipeline" and parent.info.status == "FINISHED"
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id)]
    assert "manifest.json" in artifacts


@pytest.mark.parametrize("backbone", ["qwen35-tiny", "glm46v-tiny", "llava-ov-tiny"])
def test_twins_are_pretrained_saved_and_probed(snake_run, backbone):
    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    metrics = json.loads((out / "metrics" / "pretrain" / f"{backbone}.json").read_text())
    assert metrics["steps"] == 4 and metrics["samples"] == 16
    for key in ("question_only", "full/all", "cdpruner-0.05/all"):
        assert 0.0 <= metrics[key] <= 1.0
    from ltopd.models import load_backbone

    loaded = load_backbone(out / "models" / backbone)  # loads exactly like a real checkpoint
    assert sum(p.numel() for p in loaded.model.parameters()) == metrics["parameters"]
    log = (out / "logs" / "pretrain_twin" / f"{backbone}.log").read_text()
    assert "held-out accuracy (8 items): question-only baseline" in log

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    (run,) = client.search_runs([exp.experiment_id],
                                f"tags.rule = 'pretrain_twin' and tags.`wildcard.backbone` = '{backbone}'")
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [1, 2, 3, 4]
    assert run.data.metrics["full/all"] == metrics["full/all"]


def test_table2_from_the_evaluations_and_independently_rescorable(snake_run):
    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    import csv

    rows = list(csv.DictReader((out / "results" / "table2.csv").open()))
    ours = [(r["method"], r["budget"]) for r in rows if r["source"] == "ours"]
    # the ablation variants (Table 7's teachers) are left to their table
    assert ours == [("full", "1"), ("blind", "1"), ("cdpruner", "0.05"), ("downsample", "0.05"), ("llava_mini", "0.05"),
                    ("ltopd", "0.05"), ("learnable_merge", "0.05")]
    assert any(r["source"] == "paper" and r["method"] == "learnable_merge" and r["avg_retain"] == "84.50" for r in rows)
    assert any(r["source"] == "paper" and r["method"] == "ltopd" and r["avg_retain"] == "82.30" for r in rows)
    full = next(r for r in rows if r["method"] == "full" and r["source"] == "ours")
    assert full["avg_retain"] in ("100.00", "")  # empty only if every full score is 0
    md = (out / "results" / "table2.md").read_text()
    assert "| paper | LT-OPD | 5% |" in md and "| gate | Gate: full - QO and full - blind >= 3 SE |" in md
    assert (out / "results" / "figures" / "table2_retain_vs_budget.png").stat().st_size > 1000

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    runs = client.search_runs([exp.experiment_id], "tags.rule = 'evaluate'")
    import yaml

    from ltopd.grid import eval_groups, eval_jobs

    cfg = yaml.safe_load((repo / "config" / "smoke.yaml").read_text())
    assert len(runs) == sum(1 for _ in eval_jobs(cfg)) == 40 and all(r.info.status == "FINISHED" for r in runs)
    # 40 settings in 14 evaluation jobs: one per student, one per (backbone, seed) for the
    # training-free rows (20 jobs when each method had its own)
    jobs = list((out / "logs" / "evaluate").rglob("*.benchmark.tsv"))
    assert len(jobs) == len(eval_groups(cfg)) == 14
    for bench in ("vstar", "pope"):
        job = out / "results" / "eval" / "qwen35-tiny" / "cdpruner" / "0.05" / bench / "seed0"
        metrics = json.loads((job / "metrics.json").read_text())
        assert metrics["n"] == {"vstar": 8, "pope": 12}[bench] and metrics["ratio"] == 0.05
        proc = run_ok(["ltopd", "score", "--benchmark", bench, "--predictions", str(job / "predictions.jsonl")], repo)
        assert json.loads(proc.stdout)["score"] == metrics["score"]
        (run,) = [r for r in runs if r.data.tags["wildcard.benchmark"] == bench
                  and r.data.tags["wildcard.method"] == "cdpruner"
                  and r.data.tags["wildcard.backbone"] == "qwen35-tiny"]
        assert run.data.metrics["score"] == metrics["score"]
    (table2,) = client.search_runs([exp.experiment_id], "tags.rule = 'table2'")
    assert {"table2.csv", "table2.md", "table2.json"} <= {a.path for a in client.list_artifacts(table2.info.run_id)}
    fitted = client.get_run(table2.info.run_id).inputs.dataset_inputs  # the question-only baseline's records
    assert {d.dataset.name for d in fitted} == {f"{b} fit1000" for b in cfg["grid"]["benchmarks"]}


def test_dvc_shows_the_headline_and_its_plots_need_no_network(snake_run):
    """`dvc metrics show` on the smoke pipeline's files (named: only the default profile's, under the
    root, are declared, so a default run's `dvc metrics show` loads no absent file) prints Table 2's
    headline numbers in lines a terminal shows, and the other files whole; `dvc plots show` writes
    a page that loads no script (the figures are image plots) and shows each figure."""
    import yaml
    from dvc.repo.metrics.show import _extract_metrics

    repo, _ = snake_run
    stages = yaml.safe_load((repo / "pipelines/smoke/dvc.yaml").read_text())["stages"]
    assert not any(s.get("metrics") or s.get("plots") for s in stages.values())
    files = [f for s in stages.values() for o in s.get("outs", []) for f in [next(iter(o))]]
    shown_files = [f for f in files if f.endswith(".json")]
    assert "runs/smoke/results/table2.json" in shown_files and "runs/smoke/metrics/lt14k.json" in shown_files
    proc = run_ok(["dvc", "metrics", "show", "--json", *shown_files], repo)
    assert "failed to load" not in proc.stdout + proc.stderr
    shown = json.loads(proc.stdout)[""]["data"]
    for path in shown_files:
        data = json.loads((repo / path).read_text())
        assert shown[path] == {"data": _extract_metrics(data, path)}, path
        if not path.endswith("table2.json"):
            assert _extract_metrics(data, path) == data, path  # shown whole, as the file holds it

    def leaves(tree):
        return [x for v in tree.values() for x in leaves(v)] if isinstance(tree, dict) else [tree]

    table2 = json.loads((repo / "runs/smoke/results/table2.json").read_text())
    headline = shown["runs/smoke/results/table2.json"]["data"]
    assert set(headline) == {"headline"} and all(type(x) in (int, float) for x in leaves(headline))
    assert 0 < len(table2["headline"]["summary"]) <= 12
    (ltopd,) = [r for r in table2["rows"] if r["row"] == "ltopd@5%"]
    assert set(ltopd["score"]) == {"vstar", "pope"}
    text = run_ok(["dvc", "metrics", "show", "runs/smoke/results/table2.json"], repo).stdout
    assert max(map(len, text.splitlines())) <= 200, text
    md = (repo / "runs/smoke/results/table2.md").read_text()
    assert md.split("\n")[2] == "**Headline**" and "- Gates: " in md.split("|")[0]

    figures = [f for f in files if f.endswith(".png")]
    assert figures
    proc = run_ok(["dvc", "plots", "show", *figures], repo)
    assert "failed to load" not in proc.stdout + proc.stderr
    html = (repo / "dvc_plots" / "index.html").read_text()
    assert "<script" not in html and "http" not in html  # nothing to fetch
    for f in figures:
        assert f"<p>{f}</p>" in html, f
    images = list((repo / "dvc_plots" / "static").glob("*.png"))
    assert len(images) == len(figures) and all(i.stat().st_size > 1000 for i in images)


def test_ltopd_trains_and_its_student_is_evaluated(snake_run):
    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    summary = json.loads((out / "metrics" / "train" / "qwen35-tiny" / "ltopd" / "seed0.json").read_text())
    assert summary["updates"] == 2 and summary["budget"] == 0.05
    assert (out / "models" / "students" / "qwen35-tiny" / "ltopd" / "seed0" / "config.json").is_file()
    # the resumable state served only a killed job's rerun: the finished job removed it
    assert not (out / "train_state" / "qwen35-tiny" / "ltopd" / "seed0").exists()
    metrics = json.loads((out / "results/eval/qwen35-tiny/ltopd/0.05/vstar/seed0/metrics.json").read_text())
    assert metrics["model"].endswith("students/qwen35-tiny/ltopd/seed0")

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    (run,) = client.search_runs([exp.experiment_id], "tags.rule = 'train' and tags.`wildcard.method` = 'ltopd' "
                                "and tags.`wildcard.backbone` = 'qwen35-tiny'")
    history = client.get_metric_history(run.info.run_id, "keep_ratio")
    # the curriculum squeezed into 2 updates: (2a + 1) b = 25% first, then the 5% target
    # (the last update's metrics are logged again, at their step, on the student's logged model)
    assert sorted({(m.step, round(m.value, 4)) for m in history}) == [(1, 0.25), (2, 0.05)]
    for key in ("loss", "grad_norm", "lr_lm", "lr_vision", "tail_mass_student", "tail_mass_teacher",
                "support_size", "mean_response_len", "rollout_tokens_per_s", "scoring_tokens_per_s"):
        assert key in run.data.metrics, key

    # MLflow's lineage: LT-14K in, the student out as a logged model that its evaluations score
    train = client.get_run(run.info.run_id)
    (data,) = train.inputs.dataset_inputs
    lt14k = json.loads((out / "data" / "lt14k" / "manifest.json").read_text())["content_sha256"]
    assert (data.dataset.name, data.dataset.digest) == ("lt14k", lt14k[:36])
    assert json.loads(data.dataset.source) == {"uri": "runs/smoke/data/lt14k"}  # relative to the project
    (made,) = train.outputs.model_outputs
    student = client.get_logged_model(made.model_id)
    assert student.source_run_id == run.info.run_id
    assert student.tags["folder"] == "runs/smoke/models/students/qwen35-tiny/ltopd/seed0"
    (twin,) = client.get_run(run.info.run_id).inputs.model_inputs  # it started from the twin
    assert client.get_logged_model(twin.model_id).name == "qwen35-tiny (twin)"
    evals = client.search_runs([exp.experiment_id], "tags.rule = 'evaluate' and tags.`wildcard.method` = 'ltopd' "
                               "and tags.`wildcard.backbone` = 'qwen35-tiny'")
    assert evals and {e.info.run_id: e.data.metrics["score"] for e in evals} == {
        m.run_id: m.value for m in student.metrics if m.key == "score"}


def test_the_learnable_merge_trains_is_saved_with_its_module_evaluated_and_costed(snake_run):
    """LT-OPD + merge: trained by LT-OPD's distillation with its module at the merger's lr, the
    module saved beside the student's weights and named in its manifest, loaded by evaluation;
    its Table 5 and Pareto rows measured with the module (CDPruner's tokens and cache)."""
    import csv

    from safetensors.torch import load_file

    from ltopd.job_identity import sha256_file

    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    summary = json.loads((out / "metrics" / "train" / "qwen35-tiny" / "learnable_merge" / "seed0.json").read_text())
    assert summary["updates"] == 2 and summary["last_lr_learnable_merge"] == summary["last_lr_merger"] > 0
    student = out / "models" / "students" / "qwen35-tiny" / "learnable_merge" / "seed0"
    manifest = json.loads((student / "learnable_merge.json").read_text())
    assert manifest["weights"] == "learnable_merge.safetensors"
    assert manifest["weights_sha256"] == sha256_file(student / manifest["weights"])
    assert manifest["config"]["hidden"] == 16  # the profile's learnable_merge section
    assert load_file(str(student / manifest["weights"]))["fc_out.weight"].abs().sum() > 0  # it trained
    metrics = json.loads((out / "results/eval/qwen35-tiny/learnable_merge/0.05/vstar/seed0/metrics.json").read_text())
    assert metrics["model"].endswith("students/qwen35-tiny/learnable_merge/seed0") and metrics["n"] == 8

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    (run,) = client.search_runs([exp.experiment_id],
                                "tags.rule = 'train' and tags.`wildcard.method` = 'learnable_merge'")
    assert run.data.params["learnable_merge.hidden"] == "16"  # the module's section reaches the job
    keep = sorted(client.get_metric_history(run.info.run_id, "keep_ratio"), key=lambda m: m.step)
    assert sorted({(m.step, round(m.value, 4)) for m in keep}) == [(1, 0.25), (2, 0.05)]  # LT-OPD's curriculum

    table5 = {(r["source"], r["method"]): r for r in csv.DictReader((out / "results" / "table5.csv").open())}
    merge, ltopd = table5[("ours", "learnable_merge")], table5[("ours", "ltopd")]
    assert merge["note"].endswith("selector cdpruner + learnable_merge module")
    assert (merge["kept_tokens"], merge["kv_cache_mb"]) == (ltopd["kept_tokens"], ltopd["kv_cache_mb"])
    costs = json.loads((out / "results" / "efficiency" / "prefill" / "qwen35-tiny.json").read_text())
    rows = {(r["method"], r["budget"]): r for r in costs["rows"]}
    assert rows[("learnable_merge", 0.05)]["computation"] == "cdpruner keeps 0.05 + learnable_merge module"
    assert rows[("learnable_merge", 0.05)]["kv_bytes"] == rows[("cdpruner", 0.05)]["kv_bytes"]
    pareto = {r["method"] for r in csv.DictReader((out / "results" / "figure_pareto.csv").open())}
    assert {"learnable_merge", "cdpruner"} <= pareto


def test_a_changed_merge_setting_reruns_its_student_only(snake_run, tmp_path):
    """Another learnable_merge setting changes the params of its training job (and the module's
    measured costs), nothing else: no other student retrains. Run by hand, it is another job: its
    killed state is not resumed."""
    import yaml

    repo, _ = snake_run
    profile = yaml.safe_load((repo / "config" / "smoke.yaml").read_text())
    profile["learnable_merge"]["bound"] = 0.5
    changed = repo / "merge-bound.yaml"
    changed.write_text(yaml.safe_dump(profile))
    try:
        proc = run_ok(["snakemake", "--cores", "1", "--configfile", str(changed.name), "-n"], repo)
    finally:
        changed.unlink()
    # each planned job's outputs and the reason it runs (Snakemake's dry-run listing; its
    # --list-changes lists every output with recorded params, changed or not)
    planned, output = {}, ""
    for line in (proc.stdout + proc.stderr).splitlines():
        key, _, value = line.strip().partition(": ")
        if key == "output":
            output = value
        elif key.lower() == "reason" and output:
            planned[output], output = value, ""
    changed_params = {o for o, why in planned.items() if why.startswith("Params have changed")}
    assert changed_params == {
        "runs/smoke/models/students/qwen35-tiny/learnable_merge/seed0, "
        "runs/smoke/metrics/train/qwen35-tiny/learnable_merge/seed0.json",
        "runs/smoke/results/efficiency/qwen35-tiny.json",
        "runs/smoke/results/efficiency/prefill/qwen35-tiny.json"}, proc.stdout
    students = {o.split(",")[0] for o in planned if "/models/students/" in o}
    assert students == {"runs/smoke/models/students/qwen35-tiny/learnable_merge/seed0"}  # no other student retrains

    out = repo / "runs" / "smoke"
    cmd = ["ltopd", "train", "--rule", "merge_test", "--backbone", "qwen35-tiny",
           "--model", str(out / "models" / "qwen35-tiny"), "--data", str(out / "data" / "lt14k"),
           "--method", "learnable_merge", "--budget", "0.05", "--seed", "0", "--checkpoints", str(tmp_path / "ckpt"),
           "--out", str(tmp_path / "student"), "--metrics", str(tmp_path / "train.json")]
    run_ok(cmd + ["--config", "config/smoke.yaml", "--stop-after", "1"], repo)
    other = tmp_path / "bound.yaml"
    other.write_text(yaml.safe_dump(profile))
    proc = run_ok(cmd + ["--config", str(other)], repo)
    assert "2 updates to budget 0.05, 2 run now" in proc.stdout
    assert "not resuming" in proc.stderr and "settings method_params.bound" in proc.stderr


def _train_cmd(out: Path, tmp_path: Path, method: str) -> list[str]:
    """`ltopd train` of the smoke profile's seed-0 student of ``method`` at 5%, by hand, into
    ``tmp_path`` (checkpoints, student, metrics): what the resume tests stop and rerun."""
    return ["ltopd", "train", "--config", "config/smoke.yaml", "--rule", "resume_test", "--backbone", "qwen35-tiny",
            "--model", str(out / "models" / "qwen35-tiny"), "--data", str(out / "data" / "lt14k"),
            "--method", method, "--budget", "0.05", "--seed", "0", "--checkpoints", str(tmp_path / "ckpt"),
            "--out", str(tmp_path / "student"), "--metrics", str(tmp_path / "train.json")]


def test_a_killed_merge_training_resumes_to_the_pipelines_weights(snake_run, tmp_path):
    """The module's weights and the backbone's of a resumed `ltopd train` equal the pipeline's."""
    import torch
    from safetensors.torch import load_file

    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    cmd = _train_cmd(out, tmp_path, "learnable_merge")
    run_ok(cmd + ["--stop-after", "1"], repo)
    assert "2 updates to budget 0.05, 1 run now" in run_ok(cmd, repo).stdout
    pipeline = out / "models/students/qwen35-tiny/learnable_merge/seed0"
    files = sorted(p.name for p in pipeline.glob("*.safetensors"))
    assert "learnable_merge.safetensors" in files and files == sorted(p.name for p in (tmp_path / "student").glob(
        "*.safetensors"))
    for name in files:
        a, b = load_file(str(tmp_path / "student" / name)), load_file(str(pipeline / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


def test_table7_compares_the_teachers_beside_the_papers(snake_run):
    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    import csv

    rows = list(csv.DictReader((out / "results" / "table7.csv").open()))
    assert [(r["source"], r["method"]) for r in rows] == [
        ("ours", "full"), ("baseline", "question_only"), ("gate", "gate"), ("ours", "ltopd"),
        ("ours", "ltopd_teacher_ema"), ("ours", "ltopd_trust_region"),
        ("paper", "ltopd"), ("paper", "ltopd_trust_region"), ("paper", "ltopd_teacher_ema")]
    table2 = {(r["source"], r["method"]): r for r in csv.DictReader((out / "results" / "table2.csv").open())}
    for key in [("ours", "full"), ("baseline", "question_only"), ("gate", "gate"), ("ours", "ltopd")]:
        # Table 2's numbers and gates: the same evaluations, the same gated benchmarks
        mine = next(r for r in rows if (r["source"], r["method"]) == key)
        assert (mine["vstar"], mine["avg_retain"]) == (table2[key]["vstar"], table2[key]["avg_retain"]), key
    assert "| paper | LT-OPD, EMA teacher | 5% |" in (out / "results" / "table7.md").read_text()


def test_studies_train_every_family_and_build_their_tables(snake_run):
    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    import csv

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    for method, key in (("grpo", "reward_mean"), ("gspo", "reward_mean"), ("dapo", "groups_kept"),
                        ("epic", "teacher_keep_ratio"), ("llava_mini", "lr_llava_mini")):
        summary = json.loads((out / "metrics" / "train" / "qwen35-tiny" / method / "seed0.json").read_text())
        assert summary["updates"] == 2, method
        (run,) = client.search_runs([exp.experiment_id], f"tags.rule = 'train' and tags.`wildcard.method` = '{method}'")
        assert key in run.data.metrics and run.data.params["training.rollouts"] == "2", method
    (run,) = client.search_runs([exp.experiment_id], "tags.rule = 'train' and tags.`wildcard.method` = 'dapo'")
    assert run.data.params["rl.overlong_cache"] == "2"  # the family's own section reaches the job
    # the LLaVA-Mini student carries its module into evaluation
    student = out / "models" / "students" / "qwen35-tiny" / "llava_mini" / "seed0"
    assert (student / "llava_mini.safetensors").is_file()
    metrics = json.loads((out / "results/eval/qwen35-tiny/llava_mini/0.05/vstar/seed0/metrics.json").read_text())
    assert metrics["model"].endswith("students/qwen35-tiny/llava_mini/seed0") and metrics["n"] == 8
    table4 = list(csv.DictReader((out / "results" / "table4.csv").open()))
    ours = {(r["backbone"], r["method"]) for r in table4 if r["source"] == "ours"}
    assert ours == {(b, m) for b in ("glm46v-tiny", "llava-ov-tiny") for m in ("full", "cdpruner", "ltopd")}
    assert {r["backbone"] for r in table4 if r["source"] == "paper"} == {"GLM-4.6V-9B", "LLaVA-OV-1.5-4B"}
    table6 = [r for r in csv.DictReader((out / "results" / "table6.csv").open()) if r["source"] == "ours"]
    assert [r["method"] for r in table6] == ["full", "cdpruner", "grpo", "gspo", "dapo", "ltopd"]
    table14 = [r for r in csv.DictReader((out / "results" / "table14.csv").open()) if r["source"] == "ours"]
    assert {r["method"] for r in table14} == {"full", "cdpruner", "epic", "ltopd"}
    assert all(r["muirbench"] for r in table14)
    recovery = list(csv.DictReader((out / "results" / "figure4.csv").open()))
    assert {(r["method"], r["benchmark"]) for r in recovery} == {
        (m, b) for m in ("grpo", "gspo", "dapo", "ltopd") for b in ("vstar", "pope")}
    for name in ("figure4.png", "table2_retain_vs_budget.png"):
        assert (out / "results" / "figures" / name).stat().st_size > 1000


def test_second_run_has_nothing_to_do(snake_run):
    repo, _ = snake_run
    proc = run_ok(["snakemake", "--cores", "2", "--configfile", "config/smoke.yaml", "-n"], repo)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_lint_is_clean(snake_run):
    repo, _ = snake_run
    proc = run_ok(["snakemake", "--lint", "--configfile", "config/smoke.yaml"], repo)
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr


def test_dvc_repro_builds_the_same_artifact(snake_run, tmp_path):
    repo, _ = snake_run
    expected = json.loads((repo / "runs/smoke/data/lt14k/manifest.json").read_text())["content_sha256"]
    fresh = clone_worktree(tmp_path / "dvc")
    # only the stage under test: the whole smoke DAG again would cost ~16 CPU-minutes
    run_ok(["dvc", "repro", "pipelines/smoke/dvc.yaml:lt14k"], fresh)
    built = json.loads((fresh / "runs/smoke/data/lt14k/manifest.json").read_text())["content_sha256"]
    assert built == expected
    lock = (fresh / "pipelines/smoke/dvc.lock").read_text()
    assert "runs/smoke/data/lt14k" in lock
    # nothing changed -> DVC considers the stage up to date and does not run Snakemake again
    proc = run_ok(["dvc", "repro", "pipelines/smoke/dvc.yaml:lt14k"], fresh)
    assert "didn't change, skipping" in proc.stdout or "up to date" in proc.stdout
    # forced: DVC keeps the persisted outputs, so Snakemake finds them current and rebuilds nothing
    proc = run_ok(["dvc", "repro", "-f", "-s", "pipelines/smoke/dvc.yaml:lt14k"], fresh)
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert (fresh / "runs/smoke/metrics/lt14k.json").is_file()

    metrics = run_ok(["dvc", "metrics", "show", "--json", "runs/smoke/metrics/lt14k.json"], fresh).stdout
    assert '"num_questions": 140' in metrics.replace("\n", "")
    # the default remote carries the artifact to another clone (here pointed at a temp folder)
    run_ok(["dvc", "remote", "modify", "--local", "local", "url", str(tmp_path / "remote")], fresh)
    run_ok(["dvc", "push", "pipelines/smoke/dvc.yaml:lt14k"], fresh)
    other = clone_worktree(tmp_path / "other")
    (other / "pipelines/smoke/dvc.lock").write_text(lock)
    run_ok(["dvc", "remote", "modify", "--local", "local", "url", str(tmp_path / "remote")], other)
    run_ok(["dvc", "pull", "pipelines/smoke/dvc.yaml:lt14k"], other)
    pulled = json.loads((other / "runs/smoke/data/lt14k/manifest.json").read_text())["content_sha256"]
    assert pulled == expected


def test_a_killed_training_job_resumes_to_the_pipelines_weights(snake_run, tmp_path):
    """`ltopd train` stopped after 1 of 2 updates (checkpoint kept, no student), then rerun:
    it resumes at update 2 and ends with exactly the weights the pipeline's uninterrupted job saved."""
    import torch
    from safetensors.torch import load_file

    repo, _ = snake_run
    out = repo / "runs" / "smoke"
    cmd = _train_cmd(out, tmp_path, "ltopd")
    run_ok(cmd + ["--stop-after", "1"], repo)
    assert not (tmp_path / "student").exists()
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["identity.json", "step-000001"]
    proc = run_ok(cmd, repo)
    assert "2 updates to budget 0.05, 1 run now" in proc.stdout
    resumed = load_file(str(next((tmp_path / "student").glob("*.safetensors"))))
    pipeline = load_file(str(next((out / "models/students/qwen35-tiny/ltopd/seed0").glob("*.safetensors"))))
    assert resumed.keys() == pipeline.keys()
    assert all(torch.equal(resumed[k], pipeline[k]) for k in resumed)
    summary = json.loads((tmp_path / "train.json").read_text())
    assert summary["updates"] == 2 and "last_loss" in summary  # the resumed run reports its losses
    assert not (tmp_path / "ckpt").exists()  # the student is written: its state is removed

    # A changed setting is another job: its state is not resumed, the student is a new one.
    run_ok(cmd + ["--stop-after", "1"], repo)  # a killed job's state again
    import yaml

    profile = yaml.safe_load((repo / "config" / "smoke.yaml").read_text())
    profile["training"]["lr"] = {k: v * 50 for k, v in profile["training"]["lr"].items()}
    changed = tmp_path / "lr.yaml"
    changed.write_text(yaml.safe_dump(profile))
    proc = run_ok([*cmd[:2], "--config", str(changed), *cmd[4:], "--keep-checkpoints"], repo)
    assert "2 updates to budget 0.05, 2 run now" in proc.stdout
    assert "not resuming" in proc.stderr and "settings training.lr" in proc.stderr
    assert any((tmp_path / "ckpt").glob("step-*/state.pt"))  # --keep-checkpoints: the state stays
    other = load_file(str(next((tmp_path / "student").glob("*.safetensors"))))
    assert any(not torch.equal(other[k], pipeline[k]) for k in other)


def test_grouped_evaluation_equals_one_job_per_setting(snake_run, tmp_path, monkeypatch):
    """The pipeline's evaluate_* group of a backbone's training-free rows (full, blind, CDPruner,
    the downsampling control) writes, byte for byte, the predictions that `ltopd evaluate` writes
    for one setting at a time (the group shares one vision pass across its rows). The per-setting
    commands run in this process (the CLI's own entry point; a process each costs ~7 CPU-s of imports)."""
    import torch

    from ltopd import catalog, config, grid
    from ltopd.cli import main

    repo, _ = snake_run
    monkeypatch.chdir(repo)
    for k in [k for k in os.environ if k.startswith(("LTOPD_MLFLOW_", "MLFLOW_"))]:
        monkeypatch.delenv(k)
    threads = torch.get_num_threads()
    cfg = config.load(repo / "config" / "smoke.yaml")
    groups = grid.eval_groups(cfg)
    key = max((k for k in groups if k[1] is None), key=lambda k: len(groups[k]))
    jobs = groups[key]
    assert {catalog.METHODS[j.method].kind for j in jobs} == {"reference", "selector", "resize"}
    p = grid.paths(cfg)
    for j in jobs:
        fields = dict(backbone=j.backbone, method=j.method, budget=j.budget_tag, benchmark=j.benchmark, seed=j.seed)
        out = tmp_path / f"{j.method}-{j.budget_tag}-{j.benchmark}"
        try:
            assert main(["evaluate", "--config", "config/smoke.yaml", "--backbone", j.backbone,
                         "--model", grid.model_path(cfg, j.backbone), "--records", p["bench"].format(**fields),
                         "--method", j.method, "--budget", j.budget_tag, "--benchmark", j.benchmark,
                         "--seed", str(j.seed), "--out-dir", str(out)]) == 0
        finally:
            torch.set_num_threads(threads)  # the job sets its --threads
        assert (out / "predictions.jsonl").read_bytes() == (repo / p["eval_predictions"].format(**fields)).read_bytes()


def _ltopd_command(proc) -> list[str]:
    """The `ltopd ...` arguments of a job's process, [] for any other process (or one now gone)."""
    import psutil

    try:
        argv = proc.cmdline()
    except psutil.Error:
        return []
    return argv[2:] if len(argv) > 1 and Path(argv[1]).name == "ltopd" else []


def test_a_killed_snakemake_leaves_no_job_and_its_rerun_builds_the_same_tables(snake_run, tmp_path):
    """`kill -9` of Snakemake while it trains (issue 37): its jobs stop within seconds, the plain
    rerun meets the lock (and not the incomplete files: the workflow profile's rerun-incomplete),
    and the README's recovery (the same command with --unlock, then the same command) builds Table
    2 byte for byte as the uninterrupted run did, with no MLflow run left RUNNING. Starts from a
    copy of the smoke run without the trained students and what follows them (the cheap part of
    the DAG that has a training job to kill); the uninterrupted run's tables are the reference."""
    import signal
    import time

    import psutil
    from mlflow.tracking import MlflowClient

    reference, _ = snake_run
    repo = tmp_path / "killed"
    shutil.copytree(reference, repo, symlinks=True, ignore=shutil.ignore_patterns("import-traces"))
    out = repo / "runs" / "smoke"
    trained = ("ltopd", "llava_mini")  # Table 2's trained rows
    for m in trained:
        for folder in ("models/students", "train_state", "results/eval", "metrics/train", "logs/train"):
            shutil.rmtree(out / folder / "qwen35-tiny" / m, ignore_errors=True)
    for f in out.glob("results/table2.*"):
        f.unlink()
    cmd = ["snakemake", "--cores", "2", "runs/smoke/results/table2.csv", "--configfile", "config/smoke.yaml"]
    env = tool_env("LTOPD_SNAKEMAKE")
    with (tmp_path / "killed.log").open("w") as log:
        snakemake = subprocess.Popen(cmd, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, procs = time.monotonic() + 600, []
        while snakemake.poll() is None and time.monotonic() < deadline:
            procs = psutil.Process(snakemake.pid).children(recursive=True)
            if any(_ltopd_command(p)[:1] == ["train"] and time.time() - p.create_time() > 3 for p in procs):
                break  # a training job 3 s in: past its imports, into its updates
            time.sleep(0.2)
        assert snakemake.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        jobs = [p for p in procs if _ltopd_command(p)]
        os.kill(snakemake.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        snakemake.wait()
        stray = [p for p in procs if not exits_within(p, timeout=10 - (time.monotonic() - killed_at))]
        stopped_after = time.monotonic() - killed_at
    finally:
        snakemake.kill()
        snakemake.wait()
    assert not stray, f"still running {stopped_after:.1f} s after the kill: {[p.cmdline() for p in stray]}"
    print(f"{len(jobs)} jobs stopped {stopped_after:.1f} s after kill -9 of snakemake")
    for m in trained:  # a stopped training wrote no student behind the dead Snakemake's back
        log = out / "logs" / "train" / "qwen35-tiny" / f"{m}-seed0.log"
        if log.is_file() and "is gone; stopping" in log.read_text():
            assert not (out / "models" / "students" / "qwen35-tiny" / m / "seed0").exists()

    # What the user meets on rerunning the same command: the lock, not the incomplete files.
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "LockException" in text and "IncompleteFilesException" not in text, text[-3000:]
    assert "Using workflow specific profile profiles/default" in text
    # The README's recovery, "After a crash"
    run_ok(cmd + ["--unlock"], repo)
    proc = run_ok(cmd, repo)
    assert "marked KILLED" in proc.stderr
    for name in ("table2.csv", "table2.md", "table2.json"):
        assert (out / "results" / name).read_bytes() == (reference / "runs/smoke/results" / name).read_bytes(), name

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    assert any(r.data.tags.get("kind") == "pipeline" and r.info.status == "KILLED" for r in runs)


def _planned(proc) -> list[str]:
    """The rules of the jobs a `snakemake -n` would run."""
    import re

    return sorted(re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.M))


def test_an_external_student_is_a_table2_row_equal_to_the_pipelines_own_evaluation(snake_run, tmp_path):
    """Issue 56: a student folder written here (the pipeline's LT-OPD student, saved again) named
    under external_students with the selector, budget and floor it was trained with becomes Table
    2's row `external-tiny`, equal in every cell to the pipeline's own LT-OPD row (the same
    weights, evaluated the same way); its evaluation logs the folder as an external logged model
    with its content hash. One changed byte of its weights reruns its evaluation and the table
    only; a folder of another family is refused with one line before any job."""
    import csv

    import yaml
    from mlflow.tracking import MlflowClient

    from ltopd.models.external import folder_sha256
    from ltopd.models.loading import load_backbone, save_backbone

    reference, _ = snake_run
    repo = tmp_path / "external"
    shutil.copytree(reference, repo, symlinks=True, ignore=shutil.ignore_patterns("import-traces"))
    out = repo / "runs" / "smoke"
    student = save_backbone(load_backbone(out / "models/students/qwen35-tiny/ltopd/seed0"), repo / "external/tiny")
    profile = yaml.safe_load((repo / "config/smoke.yaml").read_text())
    smoke = profile["training"]["selector"], min(profile["grid"]["budgets"]), profile["reduction"]["floor"]
    profile["external_students"] = {"tiny": {"path": "external/tiny", "backbone": "qwen35-tiny", "selector": smoke[0],
                                             "budget": smoke[1], "floor": smoke[2]}}
    (repo / "config/smoke-external.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    cmd = ["snakemake", "--cores", "2", "runs/smoke/results/table2.csv", "--configfile", "config/smoke-external.yaml"]
    assert _planned(run_ok([*cmd, "-n"], repo)) == ["evaluate_qwen35_tiny_external_tiny_s0", "table2"]
    run_ok(cmd, repo)

    rows = {r["method"]: r for r in csv.DictReader((out / "results/table2.csv").open()) if r["source"] == "ours"}
    assert list(rows)[-1] == "external-tiny"
    assert {k: v for k, v in rows["external-tiny"].items() if k != "method"} == \
        {k: v for k, v in rows["ltopd"].items() if k != "method"}
    assert rows["ltopd"]["vstar"] and rows["ltopd"]["loyalty"]  # the cells compared are filled
    assert "| ours | tiny (external) | 5% |" in (out / "results/table2.md").read_text()
    for bench in ("vstar", "pope"):
        mine = out / f"results/eval/qwen35-tiny/external-tiny/0.05/{bench}/seed0"
        ours = out / f"results/eval/qwen35-tiny/ltopd/0.05/{bench}/seed0"
        assert (mine / "predictions.jsonl").read_bytes() == (ours / "predictions.jsonl").read_bytes()
        metrics = json.loads((mine / "metrics.json").read_text())
        assert metrics["weights_sha256"] == folder_sha256(student) and metrics["selector"] == smoke[0]

    client = MlflowClient(f"sqlite:///{out / 'mlruns.db'}")
    exp = client.get_experiment_by_name("ltopd-smoke")
    evals = client.search_runs([exp.experiment_id], "tags.rule = 'evaluate' and tags.`wildcard.method` = "
                               "'external-tiny'")
    assert len(evals) == 2 and all(r.data.params["external.sha256"] == folder_sha256(student) for r in evals)
    (used,) = {i.model_id for r in evals for i in client.get_run(r.info.run_id).inputs.model_inputs}
    model = client.get_logged_model(used)
    assert (model.name, model.tags["kind"], model.tags["folder"]) == ("tiny (external)", "external", "external/tiny")
    assert model.tags["folder_digest"] == folder_sha256(student)
    assert {m.run_id for m in model.metrics if m.key == "score"} == {r.info.run_id for r in evals}

    # one changed byte of its weights: its evaluation and the table rerun, nothing else
    weights = student / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert _planned(run_ok([*cmd, "-n"], repo)) == ["evaluate_qwen35_tiny_external_tiny_s0", "table2"]

    # a folder of another family: one line, before any job
    profile["external_students"]["tiny"]["path"] = "releases/glm46v-tiny"
    (repo / "config/smoke-external.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    proc = subprocess.run([*cmd, "-n"], cwd=repo, env=tool_env(), capture_output=True, text=True)
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and errors == [
        "error: config/smoke-external.yaml: external_students.tiny: releases/glm46v-tiny: wrong architecture: "
        "model_type 'glm46v', architectures ['Glm46VForConditionalGeneration']; its backbone's family 'qwen35' "
        "needs model_type 'qwen3_5' and Qwen3_5ForConditionalGeneration"], proc.stdout + proc.stderr
