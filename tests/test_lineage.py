"""MLflow datasets and logged models on a real SQLite store: what a job read and made links to its
run; a model made elsewhere is registered once; a moved project is relocated by one command."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from conftest import local_profile
from ltopd import lineage, tracking


def _settings(root: Path) -> tracking.Settings:
    return tracking.Settings("sqlite:///m.db", "e", "art", str(root / "parent.json"), "p")


def _release(folder: Path, weights: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "manifest.json").write_text(json.dumps({
        "twin": "tiny", "recipe": {"pretrain": {"steps": 3}}, "rebuild": "snakemake release_twins",
        "weights_sha256": {"model.safetensors": hashlib.sha256(weights).hexdigest()}}))


def test_a_model_made_elsewhere_is_registered_once_per_weights(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = _settings(tmp_path)
    _release(tmp_path / "releases" / "tiny", b"w1")
    ids = []
    for _ in range(2):
        with tracking.job_run(s, "evaluate", {"method": "full"}, {}) as run:
            ids.append(lineage.use_model(run, "releases/tiny"))
    assert ids[0] == ids[1]  # found, not registered again
    client = MlflowClient(s.tracking_uri)
    model = client.get_logged_model(ids[0])
    assert (model.name, model.model_type, model.source_run_id) == ("tiny (release)", "release", None)
    assert model.params == {"recipe.pretrain.steps": "3", "rebuild": "snakemake release_twins"}
    assert model.tags["folder"] == "releases/tiny"  # relative to the project: survives a move

    _release(tmp_path / "releases" / "tiny", b"w2")  # rebuilt: other weights, another model
    with tracking.job_run(s, "evaluate", {"method": "full"}, {}) as run:
        assert lineage.use_model(run, "releases/tiny") not in ids


def test_a_model_made_by_a_run_is_found_by_the_runs_that_read_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = _settings(tmp_path)
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "model.safetensors").write_bytes(b"abc")
    with tracking.job_run(s, "train", {"method": "sft"}, {}) as run:
        made = lineage.log_model(run, "sft b s0 (student)", "student", "student", {"training": {"lr": 0.1}})
        run.log_metrics({"last_loss": 0.25}, model_id=made)
        maker = run.run_id
    (tmp_path / "student" / ".snakemake_timestamp").write_text("")  # Snakemake stamps a folder output after its job
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "data.arrow").write_bytes(b"rows")
    with tracking.job_run(s, "evaluate", {"method": "sft"}, {}) as run:
        ref = lineage.use_dataset(run, "pope seed0", "records", "evaluation", {"rows": 1})
        assert lineage.use_model(run, "student") == made
        run.log_metrics({"score": 60.0}, model_id=made, dataset=ref)
        reader = run.run_id
    client = MlflowClient(s.tracking_uri)
    model = client.get_logged_model(made)
    assert model.source_run_id == maker and model.params == {"training.lr": "0.1"}
    assert {(m.key, m.value, m.run_id, m.dataset_name) for m in model.metrics} == {
        ("last_loss", 0.25, maker, None), ("score", 60.0, reader, "pope seed0")}
    # the records' digest: sha256 over "name\0sha256(content)\n" per file (job_identity.content_hash)
    whole = hashlib.sha256(f"data.arrow\0{hashlib.sha256(b'rows').hexdigest()}\n".encode()).hexdigest()
    (entry,) = client.get_run(reader).inputs.dataset_inputs
    assert (entry.dataset.digest, json.loads(entry.dataset.source)) == (whole[:36], {"uri": "records"})
    assert json.loads(entry.dataset.profile) == {"rows": 1, "sha256": whole}
    assert entry.dataset.source_type == "local"



def test_a_job_looks_its_model_up_once_per_store(tmp_path, monkeypatch):
    """An evaluation job reads one model in every setting's run: one search per process and store
    (it loads every metric logged on the model); each run still lists the model as its input."""
    searches = []
    real = MlflowClient.search_logged_models
    monkeypatch.setattr(MlflowClient, "search_logged_models",
                        lambda self, *a, **k: searches.append(self.tracking_uri) or real(self, *a, **k))
    monkeypatch.setattr(lineage, "_FOUND", {})
    ids, runs = [], []
    stores = {p: tracking.Settings(f"sqlite:///{tmp_path / p / 'm.db'}", "e", "art", str(tmp_path / p / "parent.json"),
                                   "p") for p in ("a", "b")}
    for project in ("a", "b"):  # two projects, the same release weights
        (tmp_path / project).mkdir()
        monkeypatch.chdir(tmp_path / project)
        _release(tmp_path / project / "releases" / "tiny", b"w1")
        for _ in range(3):
            with tracking.job_run(stores[project], "evaluate", {"method": "full"}, {}) as run:
                ids.append(lineage.use_model(run, "releases/tiny"))
                runs.append((project, run.run_id))
    assert len(searches) == 2 and len(set(ids[:3])) == 1 and len(set(ids[3:])) == 1
    assert ids[0] != ids[3]  # b's store has its own logged model, not a's id
    for project, run_id in runs:
        monkeypatch.chdir(tmp_path / project)
        (entry,) = MlflowClient(stores[project].tracking_uri).get_run(run_id).inputs.model_inputs
        assert entry.model_id == ids[0 if project == "a" else 3]
    lineage._FOUND.clear()  # a new process: found by its search, not registered again
    with tracking.job_run(stores["b"], "evaluate", {"method": "full"}, {}) as run:
        assert lineage.use_model(run, "releases/tiny") == ids[3]
    assert len(searches) == 3

# What a user does in the moved project, each in a process of its own (as after a move: MLflow
# caches the store's connection and artifact locations within a process).
_RELOCATE = "from ltopd.cli import main; raise SystemExit(main(['mlflow-relocate', '--config', 'profile.yaml']))"
_READ_BACK = """
import json, sys
from pathlib import Path
from mlflow.artifacts import download_artifacts
from mlflow.tracking import MlflowClient
from ltopd import lineage, tracking
run_id, model_id = sys.argv[1:3]
client = MlflowClient("sqlite:///mlruns.db")
table = Path(client.download_artifacts(run_id, "table.csv", "."))
location = client.get_logged_model(model_id).artifact_location
mlmodel = Path(download_artifacts(artifact_uri=location + "/MLmodel", dst_path="."))
with tracking.job_run(tracking.Settings("sqlite:///mlruns.db", "t", "art", "p.json", "p"), "evaluate", {}, {}) as run:
    found = lineage.use_model(run, "student")
import yaml
spec = yaml.safe_load(mlmodel.read_text())
external = spec["metadata"]["mlflow.model.isExternal"]
print(json.dumps({"table": table.read_text(), "location": location, "external": external,
                  "artifact_path": spec["artifact_path"], "found": found}))
"""


def _python(code: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_mlflow_relocate_after_the_project_moved(tmp_path, monkeypatch):
    """The documented command: `ltopd mlflow-relocate --config PROFILE` in the moved folder."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    path, cfg = local_profile(old)
    cfg["out_root"] = "run"
    cfg["mlflow"] = {"tracking_uri": "sqlite:///mlruns.db", "experiment": "t", "artifact_root": "art"}
    path.write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(old)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the profile's store, not another test's
    s = tracking.Settings.from_config(cfg)
    (old / "table.csv").write_text("a,b\n1,2\n")
    (old / "student").mkdir()
    (old / "student" / "model.safetensors").write_bytes(b"abc")
    with tracking.job_run(s, "table2", {}, {}) as run:
        run.log_artifact(old / "table.csv")
        made = lineage.log_model(run, "m (student)", "student", "student", {})
        run_id = run.run_id
    shutil.move(old, new)
    stale = _python(_READ_BACK, new, run_id, made)
    assert "Failed to download artifacts from path 'table.csv'" in stale.stderr  # the store names the old folder

    done = _python(_RELOCATE, new)
    assert done.returncode == 0, done.stderr
    assert "1 runs and 1 logged models now read artifacts from art; 1 MLmodel files" in done.stdout
    back = _python(_READ_BACK, new, run_id, made)
    assert back.returncode == 0, back.stderr
    got = json.loads(back.stdout.splitlines()[-1])
    assert got["table"] == "a,b\n1,2\n" and got["external"]
    assert got["location"].startswith((new / "art").as_uri())
    # the MLmodel file names the model's new place, not the old folder (it did before the command)
    assert got["artifact_path"] == got["location"] and str(old) not in got["artifact_path"]
    assert got["found"] == made  # the model's folder is named relative to the project
    assert "0 runs and 0 logged models now read artifacts from art; 0 MLmodel files" in _python(_RELOCATE, new).stdout


def test_relocate_mends_an_mlmodel_file_left_behind(tmp_path, monkeypatch):
    """A store relocated by an earlier version (locations moved, MLmodel not): running the command
    again rewrites the file's artifact_path and nothing else, once."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    monkeypatch.chdir(tmp_path)
    # an absolute store: MLflow keeps one engine per URI in a process, and "sqlite:///mlruns.db" is another test's
    s = tracking.Settings(f"sqlite:///{tmp_path / 'mlruns.db'}", "t", str(tmp_path / "art"), "p.json", "p")
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "model.safetensors").write_bytes(b"abc")
    with tracking.job_run(s, "train", {}, {}) as run:
        made = lineage.log_model(run, "m (student)", "student", "student", {})
    location = MlflowClient(s.tracking_uri).get_logged_model(made).artifact_location
    mlmodel = Path(url2pathname(urlparse(location).path)) / "MLmodel"
    good = mlmodel.read_text()
    assert f"artifact_path: {location}\n" in good  # as MLflow wrote it
    mlmodel.write_text(good.replace(location, "file:///elsewhere/art/models/x/artifacts"))
    assert tracking.relocate(s) == {"runs": 0, "models": 0, "mlmodel_files": 1}
    assert mlmodel.read_text() == good
    assert tracking.relocate(s)["mlmodel_files"] == 0


def test_store_key_names_the_file_a_sqlite_uri_opens(tmp_path, monkeypatch):
    """A relative SQLite path is the working directory's file (two projects, two keys); a URI of
    another kind, or an in-memory SQLite store, is its own key."""
    keys = []
    for project in ("a", "b"):
        (tmp_path / project).mkdir()
        monkeypatch.chdir(tmp_path / project)
        (tmp_path / project / "m.db").touch()
        keys.append(lineage.store_key("sqlite:///m.db"))
        assert keys[-1].startswith(f"{(tmp_path / project / 'm.db').resolve()}@")
        assert lineage.store_key(f"sqlite:///{tmp_path / project / 'm.db'}") == keys[-1]
    assert keys[0] != keys[1]
    assert lineage.store_key("sqlite:///missing.db") == str((tmp_path / "b" / "missing.db").resolve())
    for uri in ("sqlite://", "http://tracking:5000", "file:./mlruns"):
        assert lineage.store_key(uri) == uri
