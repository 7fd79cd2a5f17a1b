"""Every job handler of ltopd.pipeline on tiny inputs, through the CLI as a rule runs it (the
other handlers have theirs beside their library: table -> tests/report, evaluate-group ->
test_grouped_evaluation.py, release-twin -> tests/twins/test_release.py, study/figure1-right
-> tests/report/test_studies.py, table5 -> tests/efficiency, score/validate -> test_cli.py):
LT-14K, the tokenizer, a twin, a benchmark's records, a student, dvc.yaml and the MLflow relocation
chain into each other, each writing what its rule declares and one MLflow run."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import mlflow
import pytest
import yaml

from ltopd.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A smoke profile shrunk to seconds, with its MLflow store and outputs in a temporary folder."""
    tmp = tmp_path_factory.mktemp("jobs")
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg = copy.deepcopy(cfg)
    cfg["out_root"] = str(tmp / "run")
    cfg["mlflow"] = {"tracking_uri": f"sqlite:///{tmp}/mlruns.db", "experiment": "jobs",
                     "artifact_root": str(tmp / "art")}
    cfg["lt14k"].update(scale=0.001, num_batches=7, batch_size=2)
    cfg["pretrain"]["heldout"].update(n=4, batch_size=4)
    cfg["evaluation"]["benchmarks"] = {"pope": {"n": 6}, "vstar": {"n": 4}}
    cfg["grid"].update(backbones=["qwen35-tiny"], benchmarks=["pope", "vstar"])
    cfg.pop("studies", None)
    cfg.pop("efficiency", None)
    profile = tmp / "profile.yaml"
    profile.write_text(yaml.safe_dump(cfg))
    return tmp, str(profile), cfg


def _runs(cfg: dict, rule: str) -> list:
    client = mlflow.MlflowClient(cfg["mlflow"]["tracking_uri"])
    exp = client.get_experiment_by_name(cfg["mlflow"]["experiment"])
    return client.search_runs([exp.experiment_id], f"tags.rule = '{rule}'")


def test_the_data_twin_and_training_jobs_chain(run) -> None:
    tmp, profile, cfg = run
    lt, tok, twin, bench, student = (tmp / d for d in ("lt14k", "tokenizer", "twin", "pope/seed0", "student"))
    assert main(["build-lt14k", "--config", profile, "--out", str(lt), "--metrics", str(tmp / "lt.json")]) == 0
    manifest = json.loads((lt / "manifest.json").read_text())
    assert manifest["num_questions"] == 14 and json.loads((tmp / "lt.json").read_text())["num_questions"] == 14

    assert main(["build-tokenizer", "--config", profile, "--out", str(tok)]) == 0
    assert (tok / "tokenizer.json").is_file()

    assert main(["pretrain-twin", "--config", profile, "--backbone", "qwen35-tiny", "--tokenizer", str(tok),
                 "--out", str(twin), "--metrics", str(tmp / "twin.json")]) == 0
    assert (twin / "model.safetensors").is_file()
    assert json.loads((tmp / "twin.json").read_text())["steps"] == 4  # the smoke profile's 2 + 2 updates

    assert main(["build-bench", "--config", profile, "--benchmark", "pope", "--seed", "0", "--out", str(bench)]) == 0
    assert (bench / "dataset_info.json").is_file()

    assert main(["train", "--config", profile, "--backbone", "qwen35-tiny", "--model", str(twin), "--data", str(lt),
                 "--method", "ltopd", "--budget", "0.05", "--seed", "0", "--checkpoints", str(tmp / "ckpt"),
                 "--out", str(student), "--metrics", str(tmp / "train.json")]) == 0
    assert (student / "model.safetensors").is_file()
    assert json.loads((tmp / "train.json").read_text())["updates"] == 2

    for rule in ("build-lt14k", "build-tokenizer", "pretrain-twin", "build-bench", "train"):
        assert len(_runs(cfg, rule)) == 1, rule


def test_fit_records_are_the_records_without_their_images(run) -> None:
    """`build-bench --text-only` (rule fit_records: the question-only baseline's fit records) saves
    the records build-bench draws at that seed, every field but the images equal, and no image."""
    import datasets

    tmp, profile, _ = run
    for flag, out in (([], "with"), (["--text-only"], "without")):
        assert main(["build-bench", "--config", profile, "--benchmark", "vstar", "--seed", "1000",
                     "--out", str(tmp / "fit" / out), *flag, "--rule", "fit_records"]) == 0
    full, text = (datasets.load_from_disk(str(tmp / "fit" / d)) for d in ("with", "without"))
    assert text.column_names == full.column_names and len(text) == len(full) == 4
    fields = [c for c in full.column_names if c != "images"]
    assert text.select_columns(fields).to_list() == full.select_columns(fields).to_list()
    assert all(row == [] for row in text["images"]) and all(full["images"])


def test_the_chain_s_datasets_and_models_link_its_runs(run) -> None:
    """LT-14K and the records are dataset inputs (digest: the content hash), the twin and the
    student logged models of the runs that made them, the student's metrics on LT-14K, and the
    evaluation's score a metric of the student (the records named by the evaluation run)."""
    from ltopd.job_identity import content_hash

    tmp, profile, cfg = run
    lt, twin, bench, student = (tmp / d for d in ("lt14k", "twin", "pope/seed0", "student"))
    assert main(["evaluate", "--config", profile, "--backbone", "qwen35-tiny", "--model", str(student), "--method",
                 "ltopd", "--seed", "0", "--benchmark", "pope", "--records", str(bench), "--budget", "0.05",
                 "--out-dir", str(tmp / "eval")]) == 0
    client = mlflow.MlflowClient(cfg["mlflow"]["tracking_uri"])
    train, made_twin, evaluation = (client.get_run(_runs(cfg, rule)[0].info.run_id)
                                    for rule in ("train", "pretrain-twin", "evaluate"))

    (data,) = train.inputs.dataset_inputs
    manifest = json.loads((lt / "manifest.json").read_text())
    assert (data.dataset.name, data.dataset.digest) == ("lt14k", manifest["content_sha256"][:36])
    assert json.loads(data.dataset.source) == {"uri": str(lt)}  # outside the working directory: absolute
    assert json.loads(data.dataset.profile) == {"rows": 14, "sha256": manifest["content_sha256"]}
    assert {t.key: t.value for t in data.tags} == {"mlflow.data.context": "training"}

    (twin_out,) = made_twin.outputs.model_outputs
    twin_model = client.get_logged_model(twin_out.model_id)
    assert twin_model.source_run_id == made_twin.info.run_id and twin_model.name == "qwen35-tiny (twin)"
    assert twin_model.tags["folder"] == str(twin) and twin_model.tags["mlflow.model.isExternal"] == "true"
    assert [m.model_id for m in train.inputs.model_inputs] == [twin_model.model_id]  # the student's start
    (student_out,) = train.outputs.model_outputs
    model = client.get_logged_model(student_out.model_id)
    assert (model.name, model.source_run_id, model.model_type) == ("ltopd qwen35-tiny s0 (student)",
                                                                   train.info.run_id, "student")
    assert model.params["method"] == "ltopd" and model.params["budget"] == "0.05"
    assert model.params["training.lr.lm"] == train.data.params["training.lr.lm"] == "0.0001"  # its settings
    assert not any(p.name.endswith(".safetensors") for p in (tmp / "art").rglob("*"))  # weights stay put

    assert [m.model_id for m in evaluation.inputs.model_inputs] == [model.model_id]
    (records,) = evaluation.inputs.dataset_inputs
    assert (records.dataset.name, records.dataset.digest) == ("pope seed0", content_hash(bench)[:36])
    score = json.loads((tmp / "eval" / "metrics.json").read_text())["score"]
    linked = {(m.key, m.run_id): m for m in client.get_logged_model(model.model_id).metrics}
    assert linked[("score", evaluation.info.run_id)].value == score
    # the model's datasets are what it was trained on (issue 55: "vstar seed0" read as training data);
    # the score's records are the evaluation run's
    assert {m.dataset_name for m in linked.values()} == {"lt14k", None}
    assert linked[("score", evaluation.info.run_id)].dataset_name is None
    assert linked[("loss", train.info.run_id)].dataset_name == "lt14k"  # its final update, on LT-14K
    assert [m.value for m in client.get_metric_history(evaluation.info.run_id, "score")] == [score]  # once
    # no single-bar `last_*` copies of the training curves; the summary and the student's config as artifacts
    assert not [k for k in train.data.metrics if k.startswith("last_")]
    assert {"train.json", "config.json"} <= {a.path for a in client.list_artifacts(train.info.run_id)}


def test_dvc_yaml_and_mlflow_relocate(run, capsys) -> None:
    tmp, profile, cfg = run
    out = tmp / "dvc.yaml"
    assert main(["dvc-yaml", "--config", profile, "--out", str(out)]) == 0
    assert {"lt14k", "twins", "table2"} <= set(yaml.safe_load(out.read_text())["stages"])
    assert main(["mlflow-relocate", "--config", profile]) == 0
    assert "logged models now read artifacts from" in capsys.readouterr().out
