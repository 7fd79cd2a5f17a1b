"""What a job read and what it made, as MLflow's own entities: the datasets it read are dataset
inputs of its run (`mlflow.data`), the models it made are MLflow 3 logged models whose source run
is its run, and the models it read are model inputs of its run (evaluation metrics name the model
they measure, so the model's page lists them).

A logged model here is an *external* one (`mlflow.create_external_model`): its weights stay in the
pipeline's folder (a student, a twin, a release; tags `folder` and `folder_digest`), never copied
into the MLflow store. A job that reads a model finds its logged model by that folder and digest,
the newest first; a model made outside this store (a release committed with the code, a folder
given by hand) is registered the first time a job reads it, without a source run.
"""
from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# MLflow caps a dataset digest at 36 characters; the full sha256 is in the dataset's profile.
DIGEST_CHARS = 36
# The tags that say where a logged model's weights are and which weights they are.
FOLDER_TAG, DIGEST_TAG, KIND_TAG = "folder", "folder_digest", "kind"


@dataclass(frozen=True)
class DatasetRef:
    """A dataset as MLflow names it: metrics computed on it carry both (name, digest)."""
    name: str
    digest: str


def project_path(path: str | Path) -> str:
    """``path`` relative to the working directory (the project root under Snakemake) when inside it,
    so a moved or copied project still names the same files; absolute otherwise."""
    p = Path(path).resolve()
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def dataset_sha256(path: str | Path) -> str:
    """The content hash the pipeline computes for a dataset folder: LT-14K's manifest
    `content_sha256` (what build-lt14k reports); else every file's content (job_identity), as a
    resumable state records its inputs. Hashed once per folder and process (an evaluation job
    names one records folder in each of its settings' runs); a folder written anew is another."""
    p = Path(path).resolve()
    st = p.stat()
    return _sha256(str(p), st.st_ino, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, inode: int, mtime_ns: int) -> str:
    from ltopd.job_identity import content_hash

    manifest = Path(path) / "manifest.json"
    if manifest.is_file():
        digest = json.loads(manifest.read_text()).get("content_sha256")
        if digest:
            return digest
    return content_hash(path)


def dataset_input(name: str, path: str | Path, context: str,
                  profile: dict[str, Any] | None = None) -> tuple[Any, DatasetRef]:
    """(MLflow DatasetInput, DatasetRef) for the dataset folder ``path``: a metadata-only dataset
    (`mlflow.data.meta_dataset.MetaDataset`) whose source is the local folder, digest the start of
    its sha256, profile its size and the full sha256; tagged with the run's use of it (``context``:
    training, evaluation, ...)."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    sha = dataset_sha256(path)
    with warnings.catch_warnings():  # MLflow registers its local source for both '' and 'file' URIs
        warnings.filterwarnings("ignore", message=".*can be interpreted in multiple ways")
        source = resolve_dataset_source(project_path(path))
    meta = MetaDataset(source, name=name, digest=sha[:DIGEST_CHARS])
    entity = Dataset(**meta.to_dict(), profile=json.dumps({**(profile or {}), "sha256": sha}))
    return DatasetInput(entity, [InputTag(MLFLOW_DATASET_CONTEXT, context)]), DatasetRef(name, entity.digest)


def model_digest(path: str | Path) -> str:
    """Which weights a model folder holds, as the runs' `input.model.sha256` tag has it
    (tracking.path_digest: a release's manifest, which carries its weights' hashes; else the
    files' names and sizes: cheap for GB checkpoints)."""
    from ltopd.tracking import path_digest

    return path_digest(path)


def register_model(run: Any, name: str, path: str | Path, kind: str, params: dict[str, str],
                   source: bool = True, digest: str | None = None) -> str:
    """A READY external logged model of the folder ``path`` in ``run``'s experiment, made by
    ``run`` if ``source`` (else made outside this store), its weights named by ``digest`` (default
    :func:`model_digest`); returns its id. The steps of
    `mlflow.create_external_model` (tag it external, write the MLmodel file that says so, finalize),
    taken through this store's client: the fluent call writes to the process-wide tracking URI."""
    import tempfile

    from mlflow.entities import LoggedModelStatus
    from mlflow.models.utils import get_external_mlflow_model_spec
    from mlflow.utils.mlflow_tags import MLFLOW_MODEL_IS_EXTERNAL

    tags = {FOLDER_TAG: project_path(path), DIGEST_TAG: digest or model_digest(path), KIND_TAG: kind,
            MLFLOW_MODEL_IS_EXTERNAL: "true"}
    model = run.write(lambda: run.client.create_logged_model(
        run.experiment_id, name=name, source_run_id=run.run_id if source else None, tags=tags, model_type=kind,
        params={k: v[:6000] for k, v in params.items()}))
    with tempfile.TemporaryDirectory() as tmp:
        get_external_mlflow_model_spec(model).save(str(Path(tmp) / "MLmodel"))
        run.client.log_model_artifacts(model.model_id, tmp)
    run.write(lambda: run.client.finalize_logged_model(model.model_id, LoggedModelStatus.READY))
    return model.model_id


def store_key(uri: str) -> str:
    """The tracking store ``uri`` names, as a key: a SQLite file by its absolute path and inode (a
    relative path is the working directory's; a store deleted and made again is another), any other
    URI as written."""
    from sqlalchemy.engine import make_url

    url = make_url(uri) if uri.startswith("sqlite:") else None
    if url is None or not url.database:
        return uri
    db = Path(url.database).resolve()
    return f"{db}@{db.stat().st_ino}" if db.exists() else str(db)


# A job reads one model for all its settings' runs. Its logged model is looked up once per process
# and store: the search loads every metric logged on the model, thousands for a release that every
# training-free setting measures, so a search per setting grew with the run (on the default run's
# final store a setting's run took 0.35 CPU-s with it, 0.08 without). A model registered by another
# job meanwhile, for the same folder and weights, is not looked for again: either names them.
_FOUND: dict[tuple[str, str, str, str], str] = {}


def find_model(run: Any, path: str | Path, digest: str | None = None) -> str | None:
    """The newest logged model of the folder ``path`` holding the weights it holds now (``digest``,
    default :func:`model_digest`), or None."""
    folder, digest = project_path(path), digest or model_digest(path)
    found = run.write(lambda: run.client.search_logged_models(
        [run.experiment_id], filter_string=f"tags.{FOLDER_TAG} = '{folder}'",
        order_by=[{"field_name": "creation_time", "ascending": False}]))
    return next((m.model_id for m in found if m.tags.get(DIGEST_TAG) == digest), None)


def found_model(path: str | Path) -> tuple[str, str, dict[str, str]]:
    """(name, kind, params) of a model folder this store has no logged model of: a release's
    recipe from its manifest, else only where it is."""
    from ltopd.tracking import flatten

    p = Path(path)
    manifest = p / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        if "recipe" in m and "weights_sha256" in m:
            params = {**flatten({"recipe": m["recipe"]}), "rebuild": str(m.get("rebuild", ""))}
            return f"{m.get('twin', p.name)} (release)", "release", params
    return f"{' '.join(Path(project_path(p)).parts[-3:])} (model)".replace(".", "_"), "model", \
        {"folder": project_path(p)}


def records_name(path: str | Path) -> str:
    """A benchmark's records as a dataset name, from their folder `<benchmark>/seed<seed>` or
    `<benchmark>/fit<seed>`: "pope seed0" (evaluation), "pope fit1000" (the question-only
    baseline's fit)."""
    p = Path(path)
    return f"{p.parent.name} {p.name}"


# -- what a job calls ------------------------------------------------------------------------------

def use_dataset(run: Any, name: str, path: str | Path, context: str,
                profile: dict[str, Any] | None = None) -> DatasetRef:
    """Log the dataset folder ``path`` as a dataset input of ``run``; returns its (name, digest)
    for the metrics computed on it."""
    entry, ref = dataset_input(name, path, context, profile)
    run.write(lambda: run.client.log_inputs(run.run_id, datasets=[entry]))
    return ref


def use_model(run: Any, path: str | Path, digest: str | None = None,
              described: tuple[str, str, dict[str, str]] | None = None) -> str:
    """Log the model folder ``path`` as a model input of ``run`` (registered first if this store
    has no logged model of it); returns the model's id, for the metrics measured on it. A folder
    made outside the pipeline (an external student) gives its content hash as ``digest`` (file
    names and sizes would not tell one changed byte) and its (name, kind, params) as ``described``."""
    from mlflow.entities import LoggedModelInput

    digest = digest or model_digest(path)
    key = (store_key(run.client.tracking_uri), run.experiment_id, project_path(path), digest)
    model_id = _FOUND.get(key) or find_model(run, path, digest)
    if model_id is None:
        name, kind, params = described or found_model(path)
        model_id = register_model(run, name, path, kind, params, source=False, digest=digest)
    _FOUND[key] = model_id
    run.write(lambda: run.client.log_inputs(run.run_id, models=[LoggedModelInput(model_id)]))
    return model_id


def log_model(run: Any, name: str, path: str | Path, kind: str, params: dict[str, Any]) -> str:
    """Log the model folder ``path`` that ``run`` made as a logged model (its source run ``run``,
    ``params`` flattened onto it) and an output of ``run``; returns its id, for the metrics that
    describe it."""
    from mlflow.entities import LoggedModelOutput

    from ltopd.tracking import flatten

    model_id = register_model(run, name, path, kind, flatten(params))
    run.write(lambda: run.client.log_outputs(run.run_id, [LoggedModelOutput(model_id, step=0)]))
    return model_id
