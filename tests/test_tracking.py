"""MLflow on SQLite: parallel writers lose nothing, runs carry tags/params/metrics/parent."""
from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import time

from ltopd import tracking


def _settings(tmp) -> tracking.Settings:
    return tracking.Settings(f"sqlite:///{tmp}/mlruns.db", "exp", str(tmp / "art"), str(tmp / "parent.json"), "test")


def _writer(args) -> str:
    tmp, i = args
    s = _settings(tmp)
    with tracking.job_run(s, "rule_x", {"seed": str(i)}, {"opt": {"lr": 1e-3 * i}, "name": f"w{i}"}) as run:
        for step in range(60):  # 60 metrics: two batched writes plus the final flush
            run.log_metrics({"loss": 1.0 / (step + 1), "i": i}, step=step)
    return "ok"


def test_eight_concurrent_writers_lose_no_run(tmp_path):
    s = _settings(tmp_path)
    parent = tracking.start_pipeline(s, "config/test.yaml")  # database + experiment exist before fan-out
    with mp.get_context("spawn").Pool(8) as pool:
        assert pool.map(_writer, [(tmp_path, i) for i in range(8)]) == ["ok"] * 8
    tracking.end_pipeline(s, ok=True)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(s.tracking_uri)
    exp = client.get_experiment_by_name("exp")
    runs = client.search_runs([exp.experiment_id], "tags.rule = 'rule_x'")
    assert len(runs) == 8
    assert sorted(r.data.tags["wildcard.seed"] for r in runs) == [str(i) for i in range(8)]
    for r in runs:
        i = int(r.data.tags["wildcard.seed"])
        assert r.info.status == "FINISHED"
        assert r.data.tags[tracking.PARENT_TAG] == parent
        assert r.data.params["opt.lr"] == str(1e-3 * i) and r.data.params["name"] == f"w{i}"
        assert len(client.get_metric_history(r.info.run_id, "loss")) == 60
        assert "mlflow.source.git.commit" in r.data.tags and "git.dirty" in r.data.tags
    assert client.get_run(parent).info.status == "FINISHED"


def test_failed_job_is_marked_failed(tmp_path):
    s = _settings(tmp_path)
    try:
        with tracking.job_run(s, "boom", {}, {}):
            raise RuntimeError("x")
    except RuntimeError:
        pass
    from mlflow.tracking import MlflowClient

    client = MlflowClient(s.tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("exp").experiment_id])
    assert run.info.status == "FAILED"


def test_settings_round_trip_through_environment(tmp_path, monkeypatch):
    for k in list(os.environ):
        if k.startswith(tracking.ENV_PREFIX):
            monkeypatch.delenv(k)
    s = _settings(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///elsewhere.db")
    s.export()
    assert tracking.Settings.from_env() == s
    cfg = {"profile": "p", "out_root": "o",
           "mlflow": {"tracking_uri": "sqlite:///a.db", "experiment": "e", "artifact_root": "r"}}
    assert tracking.Settings.from_config(cfg).tracking_uri == s.tracking_uri  # the environment wins


def test_flatten_and_digest(tmp_path):
    assert tracking.flatten({"a": {"b": 1, "c": [1, 2]}, "d": "x"}) == {"a.b": "1", "a.c": "[1, 2]", "d": "x"}
    (tmp_path / "f").write_bytes(b"abc")
    assert tracking.path_digest(tmp_path / "f") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "manifest.json").write_text('{"content_sha256": "h"}')
    assert tracking.path_digest(tmp_path / "d") == "h"
    (tmp_path / "m").mkdir()  # a model folder: names and sizes, hidden files (Snakemake's stamp) left out
    (tmp_path / "m" / "w.bin").write_bytes(b"abc")
    before = tracking.path_digest(tmp_path / "m")
    (tmp_path / "m" / ".snakemake_timestamp").write_text("")
    assert tracking.path_digest(tmp_path / "m") == before == hashlib.sha256(b"w.bin:3").hexdigest()


def test_run_names_put_what_differs_first():
    from ltopd.tracking import run_name

    assert run_name("evaluate", {"backbone": "qwen35-tiny", "method": "ltopd", "budget": "0.05",
                                 "benchmark": "gqa", "seed": "0"}) == "ltopd@5% qwen35-tiny gqa s0 (evaluate)"
    assert run_name("evaluate", {"backbone": "b", "method": "full", "budget": "1", "benchmark": "pope",
                                 "seed": "2"}) == "full b pope s2 (evaluate)"
    assert run_name("train", {"backbone": "b", "method": "sft", "seed": "1"}) == "sft b s1 (train)"
    assert run_name("evaluate", {"method": "ltopd", "budget": "1", "benchmark": "mme"}) == "ltopd@100% mme (evaluate)"
    assert run_name("build-bench", {"benchmark": "mme", "seed": "1000"}) == "mme s1000 (build-bench)"
    assert run_name("table2", {}) == "table2"
    # the parent run: when it started, then what it is
    assert tracking.pipeline_name(time.mktime((2026, 12, 6, 11, 5, 1, 0, 0, -1))) == "12-06 11:05:01 (pipeline)"


def test_job_identity_is_logged_as_params(tmp_path):
    import mlflow

    from ltopd.tracking import Settings, job_run

    s = Settings(tracking_uri=f"sqlite:///{tmp_path}/m.db", experiment="e", artifact_root=str(tmp_path / "a"),
                 profile="p", parent_file=str(tmp_path / "parent.json"))
    with job_run(s, "evaluate", {"method": "ltopd", "budget": "0.05", "benchmark": "gqa"}, {"evaluation": {"n": 3}}):
        pass
    run = mlflow.MlflowClient(s.tracking_uri).search_runs(
        [mlflow.MlflowClient(s.tracking_uri).get_experiment_by_name("e").experiment_id])[0]
    assert run.info.run_name == "ltopd@5% gqa (evaluate)"
    assert run.data.params["method"] == "ltopd" and run.data.params["budget"] == "0.05"
    assert run.data.params["evaluation.n"] == "3"


def test_moved_project_keeps_its_artifacts_and_description(tmp_path):
    import shutil

    from mlflow.tracking import MlflowClient

    from ltopd.tracking import Settings, describe, ensure_experiment, relocate

    def settings(root):
        return Settings(tracking_uri=f"sqlite:///{root}/m.db", experiment="e", artifact_root=str(root / "art"),
                        parent_file=str(root / "parent.json"), profile="p")

    old = tmp_path / "old"
    old.mkdir()
    s = settings(old)
    exp_id = ensure_experiment(s)
    client = MlflowClient(s.tracking_uri)
    tags = client.get_experiment(exp_id).tags
    assert tags["mlflow.note.content"] == describe(s)
    assert tags["mlflow.experimentKind"] == "custom_model_development"  # the UI opens on the runs table
    run = client.create_run(exp_id)
    (old / "table.csv").write_text("a,b\n1,2\n")
    client.log_artifact(run.info.run_id, str(old / "table.csv"))
    shutil.move(old, tmp_path / "new")
    new = settings(tmp_path / "new")
    assert relocate(new) == {"runs": 1, "models": 0, "mlmodel_files": 0}
    assert relocate(new) == {"runs": 0, "models": 0, "mlmodel_files": 0}  # already here
    moved = MlflowClient(new.tracking_uri)
    assert moved.get_run(run.info.run_id).info.artifact_uri.startswith((tmp_path / "new" / "art").as_uri())
    got = moved.download_artifacts(run.info.run_id, "table.csv", str(tmp_path))
    assert open(got).read() == "a,b\n1,2\n"


# A Snakemake stand-in: creates the parent run and one job's run as the pipeline does, then is
# killed with both still RUNNING (no onerror, no job exit).
_KILLED_PIPELINE = """
import sys, time
from ltopd import tracking
s = tracking.Settings(*sys.argv[1:6])
tracking.start_pipeline(s, "config/test.yaml")
with tracking.job_run(s, "train", {"seed": "0"}, {}):
    print("running", flush=True)
    time.sleep(600)
"""


def test_runs_left_running_by_a_killed_snakemake_are_marked_killed_at_the_next_start(tmp_path, capsys):
    import json
    import signal
    import socket
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    s = _settings(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_PIPELINE, s.tracking_uri, s.experiment, s.artifact_root,
                             s.parent_file, s.profile], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "running\n"
    killed = json.loads(open(s.parent_file).read())["run_id"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    client = MlflowClient(s.tracking_uri)
    exp_id = client.get_experiment_by_name("exp").experiment_id
    (job,) = client.search_runs([exp_id], "tags.rule = 'train'")
    assert client.get_run(killed).info.status == job.info.status == "RUNNING"  # what the crash leaves
    assert client.get_run(killed).data.tags["snakemake.pid"] == str(proc.pid)
    # a parent run of another host cannot be checked from here: left alone
    elsewhere = client.create_run(exp_id, tags={"kind": "pipeline", "snakemake.pid": "1", "snakemake.created": "0.0",
                                                "snakemake.host": f"not-{socket.gethostname()}"}).info.run_id
    alive = tracking.start_pipeline(s, "config/test.yaml")  # this process: alive
    capsys.readouterr()
    new = tracking.start_pipeline(s, "config/test.yaml")

    assert client.get_run(killed).info.status == "KILLED"
    assert client.get_run(job.info.run_id).info.status == "KILLED"
    assert client.get_run(alive).info.status == client.get_run(elsewhere).info.status == "RUNNING"
    assert client.get_run(new).info.status == "RUNNING"
    assert client.get_run(new).data.tags["snakemake.pid"] == str(os.getpid())
    assert json.loads(open(s.parent_file).read())["run_id"] == new
    assert "ltopd:" not in capsys.readouterr().err  # the killed run was closed once, by the first start
    tracking.end_pipeline(s, ok=True)


def test_the_first_start_after_a_crash_says_what_it_closed(tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    s = _settings(tmp_path)
    exp_id = tracking.ensure_experiment(s)
    client = MlflowClient(s.tracking_uri)
    gone = client.create_run(exp_id, run_name="pipeline-x", tags={
        "kind": "pipeline", "snakemake.pid": str(os.getpid()), "snakemake.created": "1.0",  # a reused pid
        "snakemake.host": __import__("socket").gethostname()}).info.run_id
    tracking.start_pipeline(s, "config/test.yaml")
    assert client.get_run(gone).info.status == "KILLED"
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("ltopd:")]
    assert line == (f"ltopd: MLflow run pipeline-x was left RUNNING by snakemake (pid {os.getpid()}), which is "
                    "gone: marked KILLED")


def test_artifacts_are_readable_by_the_group_with_umask_022(tmp_path):
    """An `mlflow server` under another user reads what the jobs logged."""
    import stat

    from ltopd.atomic import atomic_file

    s = _settings(tmp_path)
    old = os.umask(0o022)
    try:
        with atomic_file(tmp_path / "table2.csv") as fh:
            fh.write("a,b\n")
        with tracking.job_run(s, "table2", {}, {}) as run:
            run.log_artifact(tmp_path / "table2.csv")
    finally:
        os.umask(old)
    (artifact,) = (tmp_path / "art").rglob("table2.csv")
    assert stat.filemode(artifact.stat().st_mode) == "-rw-r--r--"
