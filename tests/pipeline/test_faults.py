"""Faults a cluster run meets (issue 54): each ends surviving with nothing lost, or stopping with
one line that names the file and what to do; never with a different table.

Through the CLI as a rule runs it, on an untrained twin and small record sets built once for the
module (seconds each). Training's and pretraining's preemption and cut-short states are tested
beside their loops (tests/train/test_trainer.py, tests/twins/test_pretrain.py), the LT-14K quota
in tests/data/test_lt14k.py; benchmarks/faults.py runs every fault and prints one table.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from conftest import job_env
from ltopd.cli import main

TIMING = {"wall_s", "questions_per_s", "settings_per_pass"}
SETTINGS = [("full", 1.0), ("random", 0.2)]
BENCHMARKS = ("pope", "vstar")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two benchmarks' records and an (untrained) twin saved as a model folder."""
    from ltopd.bench.store import build_records, save_records
    from ltopd.models.loading import save_backbone
    from ltopd.twins.architectures import twin_backbone
    from ltopd.twins.tokenizer import build_tokenizer

    tmp = tmp_path_factory.mktemp("faults")
    texts = []
    for bench in BENCHMARKS:
        records = build_records(bench, {"n": 4}, 0, {"image_size": 128})
        save_records(records, tmp / "records" / bench)
        texts += [r["question"] + " " + " ".join(r["options"]) for r in records]
    save_backbone(twin_backbone("qwen35-tiny", build_tokenizer(texts * 3, 400), seed=0), tmp / "model")
    return tmp


@pytest.fixture
def env(tmp_path, monkeypatch):
    return job_env(tmp_path, monkeypatch)


def _group(made: Path, out: Path, model: Path | None = None, state: Path | None = None) -> list[str]:
    spec = json.dumps({"profile": "t", "reduction": {"floor": 1}, "evaluation": {"batch_size": 4}})
    targets = [{"method": m, "budget": b, "benchmark": bench, "records": str(made / "records" / bench),
                "out_dir": str(out / bench / m / f"{b:g}")} for bench in BENCHMARKS for m, b in SETTINGS]
    return ["evaluate-group", "--spec", spec, "--backbone", "b", "--model", str(model or made / "model"),
            "--seed", "0", "--settings", json.dumps(targets), *(["--state", str(state)] if state else [])]


def _outputs(out: Path) -> dict[str, object]:
    """Every setting's predictions (bytes) and metrics (timing left out): what the tables read."""
    got: dict[str, object] = {}
    for f in sorted(out.rglob("predictions.jsonl")):
        got[str(f.relative_to(out))] = f.read_bytes()
        metrics = json.loads((f.parent / "metrics.json").read_text())
        got[str(f.parent.relative_to(out))] = {k: v for k, v in metrics.items() if k not in TIMING}
    return got


@pytest.fixture(scope="module")
def reference(made, tmp_path_factory):
    """The uninterrupted group's outputs."""
    from ltopd.tracking import ENV_PREFIX, Settings

    tmp = tmp_path_factory.mktemp("reference")
    settings = Settings(f"sqlite:///{tmp}/m.db", "e", str(tmp / "art"), str(tmp / "parent.json"), "t")
    saved = dict(os.environ)
    os.environ.update({f"{ENV_PREFIX}{k.upper()}": v for k, v in asdict(settings).items()})
    os.environ["MLFLOW_TRACKING_URI"] = settings.tracking_uri
    try:
        assert main(_group(made, tmp / "out")) == 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out = _outputs(tmp / "out")
    assert len(out) == 2 * len(BENCHMARKS) * len(SETTINGS)
    return out


_record = None  # record_property of the running test: benchmarks/faults.py prints what it records


@pytest.fixture(autouse=True)
def _recorder(record_property):
    global _record
    _record = record_property
    yield
    _record = None


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("ltopd: ")]
    assert len(lines) == 1, err[-3000:]
    _record("line", lines[0])
    return lines[0]


# -- 1. preemption ------------------------------------------------------------------------------

def test_a_preempted_evaluation_group_reruns_only_the_settings_it_had_not_finished(made, reference, env, tmp_path,
                                                                                    monkeypatch, capsys):
    """SIGTERM during the group's first vision pass: that pass's settings are written and kept in
    the state folder, the job exits 75 (Snakemake removes a failed job's outputs); the rerun copies
    them back, evaluates only the other benchmark, and the outputs equal an uninterrupted run's."""
    import ltopd.bench.evaluate as evaluate_module
    from ltopd import preempt

    original = evaluate_module.evaluate_settings
    passes: list[str] = []
    signalled: list[float] = []

    def evaluate_settings(bb, records, bench, settings, *a, **k):
        passes.append(bench)
        if len(passes) == 1:
            signalled.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGTERM)  # as SLURM preempts: the handler sets a flag
        return original(bb, records, bench, settings, *a, **k)

    monkeypatch.setattr(evaluate_module, "evaluate_settings", evaluate_settings)
    out, state = tmp_path / "out", tmp_path / "state"
    assert main(_group(made, out, state=state)) == preempt.EXIT_CODE
    # the pass in progress finished and was saved well within a grace period (SLURM's KillWait: 30 s
    # by default; sites set GraceTime per partition): seconds here, under a minute on a loaded machine
    assert time.monotonic() - signalled[0] < 60
    line = _one_line(capsys.readouterr().err)
    assert f"evaluation state saved in {state}: 2 of 4 settings finished" in line
    shutil.rmtree(out)  # Snakemake removes the outputs of a failed job
    passes.clear()
    assert main(_group(made, out, state=state)) == 0
    assert passes == ["vstar"]  # the pope settings were finished: not evaluated again
    assert "resumed: 2 of 4 settings" in capsys.readouterr().out
    assert _outputs(out) == reference
    assert not state.exists()  # removed once every setting is written
    _record("rerun", "identical")


# -- 3. truncated or corrupted intermediates ----------------------------------------------------

def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_a_cut_short_record_set_is_refused_with_one_line(made, env, tmp_path, capsys):
    copy = tmp_path / "made"
    shutil.copytree(made, copy)
    (arrow,) = (copy / "records" / "pope").glob("*.arrow")
    _cut(arrow)
    assert main(_group(copy, tmp_path / "out")) == 1
    line = _one_line(capsys.readouterr().err)
    assert str(arrow) in line and "truncated or corrupted" in line and "rerun the same command" in line
    assert not list((tmp_path / "out").rglob("metrics.json"))  # nothing scored


def test_cut_short_predictions_and_metrics_are_refused_before_scoring(made, env, tmp_path):
    from ltopd.integrity import Corrupt
    from ltopd.report.grid_tables import load_predictions, load_results

    assert main(_group(made, tmp_path / "out")) == 0
    setting = tmp_path / "out" / "pope" / "full" / "1"
    assert len(load_predictions([setting / "predictions.jsonl"])) == 1  # whole: read
    _cut(setting / "predictions.jsonl")
    with pytest.raises(Corrupt, match=r"predictions.jsonl: truncated or corrupted .*rerun the same command"):
        load_predictions([setting / "predictions.jsonl"])
    other = tmp_path / "out" / "vstar" / "full" / "1" / "metrics.json"
    other.write_text(other.read_text().replace('"score": ', '"score": 1'))  # an edited score, same length +1
    with pytest.raises(Corrupt, match=r"vstar/full/1/metrics.json: truncated or corrupted") as e:
        load_results([other])
    _record("line", f"ltopd: {e.value}")


def test_a_cut_short_student_is_refused_with_one_line(made, env, tmp_path, capsys):
    from ltopd.integrity import seal_dir

    student = tmp_path / "student"
    shutil.copytree(made / "model", student)
    seal_dir(student)  # as `ltopd train` seals the student it writes
    _cut(student / "model.safetensors")
    assert main(_group(made, tmp_path / "out", model=student)) == 1
    line = _one_line(capsys.readouterr().err)
    assert f"{student / 'model.safetensors'}: truncated or corrupted" in line


# -- 2. a full disk -----------------------------------------------------------------------------

class _FullDisk:
    """Files opened by ltopd.atomic whose name contains `part` take a few bytes, then fail as a
    full disk does."""

    def __init__(self, part: str) -> None:
        self.part, self.fdopen = part, os.fdopen

    def __call__(self, fd, mode="r", *a, **k):
        fh = self.fdopen(fd, mode, *a, **k)
        if self.part not in os.readlink(f"/proc/self/fd/{fd}"):
            return fh
        write = fh.write

        def full(data):
            write(data[:3])
            fh.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        fh.write = full
        fh.writelines = lambda lines: [full(x) for x in lines]
        return fh


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the open file's name from /proc")
def test_a_full_disk_writing_a_prediction_file_leaves_no_file_and_the_rerun_is_identical(
        made, reference, env, tmp_path, monkeypatch, capsys):
    import ltopd.atomic

    out = tmp_path / "out"
    monkeypatch.setattr(ltopd.atomic.os, "fdopen", _FullDisk(".predictions.jsonl.tmp-"))
    assert main(_group(made, out)) == 1
    line = _one_line(capsys.readouterr().err)
    first = out / "pope" / "full" / "1" / "predictions.jsonl"
    assert line == (f"ltopd: no space left on device writing {first} (nothing was left there); free space on "
                    f"{first.parent} and rerun the same command")
    assert not [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".predictions.jsonl.sha")]
    monkeypatch.undo()
    for key, value in _env_of(env).items():
        monkeypatch.setenv(key, value)
    assert main(_group(made, out)) == 0  # space freed: the same command
    assert _outputs(out) == reference
    _record("rerun", "identical")


def _env_of(settings) -> dict[str, str]:
    from ltopd.tracking import ENV_PREFIX

    return {**{f"{ENV_PREFIX}{k.upper()}": v for k, v in asdict(settings).items()},
            "MLFLOW_TRACKING_URI": settings.tracking_uri}


def test_a_full_disk_saving_a_checkpoint_leaves_no_state(tmp_path, monkeypatch):
    """torch.save fails part-way (its message: "file write failed"): DiskFull names the
    checkpoint; no step folder, no temporary folder is left for the rerun to resume from."""
    from types import SimpleNamespace

    import torch

    from ltopd.atomic import DiskFull
    from ltopd.train.trainer import Trainer

    def save(obj, path):
        Path(path).write_bytes(b"PK\x03\x04 partial")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 11: file write failed")

    monkeypatch.setattr(torch, "save", save)
    trainer = SimpleNamespace(state=lambda step: {"step": step})
    with pytest.raises(DiskFull, match=r"no space left on device writing .*/ckpt/step-000003 \(nothing was left") as e:
        Trainer._write_checkpoint(trainer, tmp_path / "ckpt", 3)
    assert list((tmp_path / "ckpt").iterdir()) == []
    _record("line", f"ltopd: {e.value}")  # as ltopd.cli prints it


def test_a_full_disk_copying_an_mlflow_artifact_names_it_and_keeps_no_half_copy(made, reference, env, tmp_path,
                                                                               monkeypatch, capsys):
    from mlflow.tracking import MlflowClient

    original = MlflowClient.log_artifact
    half: list[Path] = []

    def log_artifact(self, run_id, local_path, artifact_path=None):
        uri = self.get_run(run_id).info.artifact_uri
        dest = Path(uri.removeprefix("file://")) / Path(local_path).name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(Path(local_path).read_bytes()[:5])
        half.append(dest)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(MlflowClient, "log_artifact", log_artifact)
    out = tmp_path / "out"
    assert main(_group(made, out)) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"ltopd: no space left on device writing {half[0]}") and not half[0].exists()
    assert not list(out.rglob("metrics.json"))  # the setting is not done: Snakemake reruns the job
    monkeypatch.setattr(MlflowClient, "log_artifact", original)
    assert main(_group(made, out)) == 0
    assert _outputs(out) == reference
    _record("rerun", "identical")


# -- 6. an MLflow server that cannot be reached -------------------------------------------------

def test_an_unreachable_mlflow_server_stops_the_job_in_seconds_with_one_line(made, env, tmp_path, monkeypatch,
                                                                            capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("LTOPD_MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    start = time.monotonic()
    assert main(_group(made, tmp_path / "out")) == 1
    assert time.monotonic() - start < 20
    line = _one_line(capsys.readouterr().err)
    assert f"MLflow server {uri} cannot be reached" in line and "unset MLFLOW_TRACKING_URI" in line


# -- 4. two working directories sharing one MLflow store ----------------------------------------

def _jobs(args) -> int:
    """One 'working directory': its own parent run, then `n` job runs into the shared store."""
    import tempfile

    from ltopd import tracking

    db, n, tag = args
    with tempfile.TemporaryDirectory() as wd:
        s = tracking.Settings(f"sqlite:///{db}", "shared", str(Path(db).parent / "art"), f"{wd}/parent.json", "t")
        tracking.start_pipeline(s, "config/smoke.yaml")
        for i in range(n):
            with tracking.job_run(s, "evaluate", {"seed": str(i), "wd": tag}, {}) as run:
                run.log_metrics({"score": float(i), "n": 4.0})
        tracking.end_pipeline(s, ok=True)
    return n


def test_two_working_directories_share_one_sqlite_store_without_losing_a_run(tmp_path):
    import multiprocessing as mp

    from mlflow.tracking import MlflowClient

    from ltopd import tracking

    db = tmp_path / "shared.db"
    tracking.ensure_experiment(tracking.Settings(f"sqlite:///{db}", "shared", str(tmp_path / "art"),
                                                 str(tmp_path / "p.json"), "t"))
    with mp.get_context("spawn").Pool(2) as pool:
        assert pool.map(_jobs, [(str(db), 6, "a"), (str(db), 6, "b")]) == [6, 6]
    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("shared")
    runs = client.search_runs([exp.experiment_id], "tags.rule = 'evaluate'")
    assert len(runs) == 12 and all(r.info.status == "FINISHED" for r in runs)
    assert sum(len(r.data.metrics) for r in runs) == 24
    assert len(client.search_runs([exp.experiment_id], "tags.kind = 'pipeline'")) == 2
    _record("line", "(nothing: 12 job runs, 24 metrics and 2 pipeline runs in the shared store, all FINISHED)")
