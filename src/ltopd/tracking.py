"""MLflow bookkeeping: one parent run per pipeline invocation, one child run per rule execution.

SQLite is the default backend. Parallel jobs write to one file, so the database, the experiment
and the parent run are created once (Snakemake `onstart`) before jobs fan out, every job writes
in a few batched calls, and each call is retried while SQLite reports a lock.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
PARENT_TAG = "mlflow.parentRunId"


@dataclass(frozen=True)
class Settings:
    """Where runs go. Jobs get these from the environment (set by the Snakefile), not from job
    params, so pointing MLflow elsewhere never reruns a job."""
    tracking_uri: str
    experiment: str
    artifact_root: str
    parent_file: str
    profile: str

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Settings:
        from ltopd.grid import paths

        m = cfg["mlflow"]
        return cls(os.environ.get("MLFLOW_TRACKING_URI") or m["tracking_uri"], m["experiment"],
                   m["artifact_root"], paths(cfg)["mlflow_parent"], cfg["profile"])

    def export(self) -> None:
        """Hand the settings to child processes (the Snakefile calls this before jobs run)."""
        os.environ.update({f"{ENV_PREFIX}{k.upper()}": v for k, v in asdict(self).items()})
        os.environ["MLFLOW_TRACKING_URI"] = self.tracking_uri
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no outbound calls from jobs

    @classmethod
    def from_env(cls) -> Settings:
        missing = [f"{ENV_PREFIX}{f.name.upper()}" for f in fields(cls)
                   if f"{ENV_PREFIX}{f.name.upper()}" not in os.environ]
        if missing:
            raise RuntimeError(f"MLflow settings missing from the environment: {missing}; run jobs through "
                               "snakemake, or pass --config so ltopd can read them from the profile")
        return cls(**{f.name: os.environ[f"{ENV_PREFIX}{f.name.upper()}"] for f in fields(cls)})


ENV_PREFIX = "LTOPD_MLFLOW_"


def _retry(fn: Callable[[], T], attempts: int = 30) -> T:
    """Retry `fn` while the SQLite backend is locked or racing a concurrent creator."""
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:  # MlflowException wraps sqlalchemy.OperationalError
            msg = str(e).lower()
            if i == attempts - 1 or not ("locked" in msg or "busy" in msg or "unique constraint" in msg):
                raise
            time.sleep(min(2.0, 0.05 * 2**i) * (0.5 + random.random()))
    raise AssertionError("unreachable")


class TrackingUnreachable(RuntimeError):
    """The MLflow server of MLFLOW_TRACKING_URI cannot be reached: the job stops before any work
    with one line, instead of MLflow's minutes of retries (its HTTP client backs off 7 times)."""

    one_line = True


PROBE_TIMEOUT_S = 3.0
_reached: set[str] = set()


def check_reachable(uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """For an http(s) store, open one TCP connection to its host within `timeout_s` (once per
    process); raise TrackingUnreachable otherwise. File and SQLite stores need no network."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(uri)
    if url.scheme not in ("http", "https") or uri in _reached:
        return
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "localhost", port), timeout=timeout_s):
            pass
    except OSError as e:
        raise TrackingUnreachable(
            f"MLflow server {uri} cannot be reached ({e.strerror or type(e).__name__}); nothing was run. Start it "
            "(`mlflow server --host ... --port ...`), or unset MLFLOW_TRACKING_URI to log to the profile's "
            "SQLite store, then rerun the same command") from e
    _reached.add(uri)


def _client(s: Settings):
    from mlflow.tracking import MlflowClient

    check_reachable(s.tracking_uri)
    return _retry(lambda: MlflowClient(tracking_uri=s.tracking_uri))


def ensure_experiment(s: Settings) -> str:
    """Create the backend database and the profile's experiment if missing; return its id."""
    client = _client(s)
    name = s.experiment

    def get_or_create() -> str:
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        root = Path(s.artifact_root).resolve()
        # experimentKind: MLflow's own label for a model-development (not GenAI) experiment
        return client.create_experiment(name, artifact_location=root.as_uri(),
                                        tags={"mlflow.note.content": describe(s), "profile": s.profile,
                                              "mlflow.experimentKind": "custom_model_development"})

    return _retry(get_or_create)


def describe(s: Settings) -> str:
    """The experiment's description (the UI shows it above the runs)."""
    return (f"LT-OPD pipeline, `{s.profile}` profile. One run per job: run names read "
            "`method@budget backbone benchmark seed (rule)`; method, budget, benchmark, seed and backbone are "
            "params too (filter with e.g. `tags.rule = \"evaluate\" and params.benchmark = \"gqa\"`), the "
            "official score is the metric "
            "`score`, and each table's CSV and markdown are artifacts of its `table2`/`study_table` run. "
            "Every invocation of the pipeline is a parent run (`<date> <time> (pipeline)`): expand it (+) to see "
            "its jobs, then the chart view compares them. A run's datasets (LT-14K, benchmark records) are its "
            "dataset inputs; each twin, release and student is a logged model (Models tab) linked to the run "
            "that made it, with the evaluations' scores as its metrics.")


def relocate(s: Settings) -> dict[str, int]:
    """After the project folder moved or was copied: point the experiment, its runs and its logged
    models at this folder's artifact root (MLflow stores absolute artifact URIs; dataset sources and
    model folders are stored relative to the project, lineage.project_path), and each logged
    model's MLmodel file at its model's new location (the file repeats it as ``artifact_path``).
    SQLite backends only; returns how many runs, models and MLmodel files were rewritten."""
    done = {"runs": 0, "models": 0, "mlmodel_files": 0}
    if not s.tracking_uri.startswith("sqlite:///"):
        return done
    import sqlite3

    db = Path(s.tracking_uri.removeprefix("sqlite:///"))
    if not db.is_file():
        return done
    root = Path(s.artifact_root).resolve().as_uri()
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        row = con.execute("SELECT experiment_id, artifact_location FROM experiments WHERE name = ?",
                          (s.experiment,)).fetchone()
        if row is None:
            return done
        exp_id, old = row
        has_models = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'logged_models'"
                                 ).fetchone() is not None
        if old != root:
            con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (root, exp_id))
            for table, column, key in (("runs", "artifact_uri", "runs"),
                                       ("logged_models", "artifact_location", "models")):
                if table == "runs" or has_models:
                    done[key] = con.execute(f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                                            f"WHERE experiment_id = ? AND substr({column}, 1, ?) = ?",
                                            (root, len(old) + 1, exp_id, len(old), old)).rowcount
        # every model's file, not only those moved now: a store relocated before MLmodel files were
        # rewritten is mended by running the command again
        locations = [r[0] for r in con.execute("SELECT artifact_location FROM logged_models WHERE experiment_id = ?",
                                               (exp_id,))] if has_models else []
    done["mlmodel_files"] = sum(_point_mlmodel(location) for location in locations)
    return done


def _point_mlmodel(location: str) -> bool:
    """Set the ``artifact_path`` of the MLmodel file under a logged model's (local) artifact
    location to that location; True when the file said otherwise and was rewritten."""
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    from ltopd.atomic import atomic_file

    url = urlparse(location)
    if url.scheme not in ("file", ""):
        return False
    mlmodel = Path(url2pathname(url.path)) / "MLmodel"
    if not mlmodel.is_file():
        return False
    lines = mlmodel.read_text().splitlines(keepends=True)
    # a top-level key of the YAML file MLflow writes (Model.to_yaml), one line; edited in place so the
    # rest of the file stays byte for byte MLflow's
    at = [i for i, line in enumerate(lines) if line.startswith("artifact_path:")]
    if len(at) != 1 or lines[at[0]].split(":", 1)[1].strip() == location:
        return False
    lines[at[0]] = f"artifact_path: {location}\n"
    with atomic_file(mlmodel) as fh:
        fh.write("".join(lines))
    return True


def git_tags(repo: str | Path = ".") -> dict[str, str]:
    """Commit, dirty flag and dvc.lock digest: MLflow does not set these for shell jobs."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    tags = {"mlflow.source.git.commit": git("rev-parse", "HEAD") or "unknown",
            "git.dirty": str(bool(git("status", "--porcelain", "--untracked-files=no")))}
    lock = Path(repo) / "dvc.lock"
    if lock.is_file():
        tags["dvc.lock.sha256"] = hashlib.sha256(lock.read_bytes()).hexdigest()
    return tags


def path_digest(path: str | Path) -> str:
    """Content digest of an input: a file's bytes; a folder's manifest hash if it has one, else its
    file names and sizes (cheap enough for checkpoints and datasets), hidden files left out:
    Snakemake stamps a folder output after its job, and the readers must see the writer's digest."""
    p = Path(path)
    if p.is_file():
        h = hashlib.sha256()
        with p.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    manifest = p / "manifest.json"
    if manifest.is_file():
        return json.loads(manifest.read_text()).get("content_sha256") or path_digest(manifest)
    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        rel = f.relative_to(p)
        if any(part.startswith(".") for part in rel.parts):  # Snakemake's .snakemake_timestamp, temp files
            continue
        h.update(f"{rel}:{f.stat().st_size}".encode())
    return h.hexdigest()


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = json.dumps(v) if not isinstance(v, str) else v
    return out


# The Snakemake process of a parent run (Snakemake calls start_pipeline in its own process), so
# the next start can tell a run left RUNNING by a killed Snakemake from one still running.
OWNER_TAGS = ("snakemake.pid", "snakemake.created", "snakemake.host")


def close_stale_pipelines(s: Settings, exp_id: str) -> list[str]:
    """Mark KILLED the parent runs left RUNNING by a Snakemake process of this host that is gone
    (a `kill -9`, the out-of-memory killer; no onerror ran), and their jobs' runs left RUNNING,
    with one line each. Runs of other hosts, or without the owner tags, are left as they are.
    Returns the parent runs' ids."""
    import sys

    from ltopd.watchdog import Owner

    client = _client(s)
    running = "attributes.status = 'RUNNING'"
    closed = []
    for run in _retry(lambda: client.search_runs([exp_id], f"tags.kind = 'pipeline' and {running}")):
        tags = run.data.tags
        try:
            owner = Owner(int(tags[OWNER_TAGS[0]]), float(tags[OWNER_TAGS[1]]), tags[OWNER_TAGS[2]])
        except (KeyError, ValueError):
            continue
        if not owner.local() or owner.alive():
            continue
        rid = run.info.run_id
        jobs = _retry(lambda rid=rid: client.search_runs([exp_id], f"tags.`{PARENT_TAG}` = '{rid}' and {running}"))
        for job in jobs:
            _retry(lambda job=job: client.set_terminated(job.info.run_id, "KILLED"))
        _retry(lambda rid=rid: client.set_terminated(rid, "KILLED"))
        also = f", with its {len(jobs)} unfinished job run{'s' * (len(jobs) > 1)}" if jobs else ""
        print(f"ltopd: MLflow run {run.info.run_name} was left RUNNING by snakemake (pid {owner.pid}), which "
              f"is gone: marked KILLED{also}", file=sys.stderr)
        closed.append(rid)
    return closed


def pipeline_name(now: float | None = None) -> str:
    """"12-06 11:05:01 (pipeline)": the parent run's name leads with when it started, which the
    runs list shows before it cuts the name (the year is in its Created column)."""
    return f"{time.strftime('%m-%d %H:%M:%S', time.localtime(now))} (pipeline)"


def start_pipeline(s: Settings, config_file: str) -> str:
    """Create the parent run of this invocation and write its id where jobs will find it; first
    close the runs a killed invocation left RUNNING."""
    from ltopd.atomic import write_json
    from ltopd.watchdog import Owner

    relocate(s)  # the project folder may have moved since the last invocation
    exp_id = ensure_experiment(s)
    close_stale_pipelines(s, exp_id)
    client = _client(s)
    owner = Owner.current()
    tags = {"profile": s.profile, "config_file": config_file, "kind": "pipeline", **git_tags(),
            **dict(zip(OWNER_TAGS, (str(owner.pid), repr(owner.created), owner.host)))}
    run = _retry(lambda: client.create_run(exp_id, run_name=pipeline_name(), tags=tags))
    write_json(s.parent_file, {"run_id": run.info.run_id, "experiment_id": exp_id})
    return run.info.run_id


def end_pipeline(s: Settings, ok: bool) -> None:
    f = Path(s.parent_file)
    if f.is_file():
        run_id = json.loads(f.read_text())["run_id"]
        _retry(lambda: _client(s).set_terminated(run_id, "FINISHED" if ok else "FAILED"))


class JobRun:
    """Handle given to a job: buffers metrics and writes them in batches."""

    def __init__(self, client: Any, run_id: str, experiment_id: str, flush_every: int = 50) -> None:
        self.client, self.run_id, self.experiment_id, self.flush_every = client, run_id, experiment_id, flush_every
        self._buffer: list = []

    def log_metrics(self, metrics: dict[str, float], step: int = 0, model_id: str | None = None,
                    dataset: Any = None) -> None:
        """Buffer ``metrics``; with ``model_id`` they are the metrics of that logged model (its page
        lists them), with ``dataset`` (name and digest: lineage.DatasetRef) measured on it."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        on = {"dataset_name": dataset.name, "dataset_digest": dataset.digest} if dataset else {}
        self._buffer += [Metric(k, float(v), now, step, model_id=model_id, **on) for k, v in metrics.items()]
        if len(self._buffer) >= self.flush_every:
            self.flush()

    def write(self, fn: Callable[[], T]) -> T:
        """One call to the tracking store, retried while SQLite is locked (ltopd.lineage's writes)."""
        return _retry(fn)

    def log_artifact(self, path: str | Path) -> None:
        """Copy `path` into the run's artifacts; a full disk there is DiskFull naming the artifact's
        path (its partial copy removed: a local store keeps no half file)."""
        from ltopd.atomic import DiskFull, disk_full

        try:
            self.client.log_artifact(self.run_id, str(path))
        except Exception as e:
            if not disk_full(e):
                raise
            from urllib.parse import urlparse
            from urllib.request import url2pathname

            uri = _retry(lambda: self.client.get_run(self.run_id)).info.artifact_uri
            url = urlparse(uri)
            dest = Path(url2pathname(url.path)) / Path(path).name if url.scheme in ("file", "") else None
            if dest is not None:
                dest.unlink(missing_ok=True)
            raise DiskFull(dest or f"{uri}/{Path(path).name}") from e

    def set_tags(self, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        _retry(lambda: self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()]))

    def flush(self) -> None:
        if self._buffer:
            buf, self._buffer = self._buffer, []
            for i in range(0, len(buf), 1000):  # MLflow caps a batch at 1,000 metrics
                _retry(lambda i=i: self.client.log_batch(self.run_id, metrics=buf[i:i + 1000]))


# Run-name order: what tells two runs of one rule apart comes first (the UI truncates names). The
# README's comparison filters one benchmark, so the backbone comes before it.
NAME_ORDER = ("method", "budget", "backbone", "benchmark", "table", "seed")


def run_name(rule: str, wildcards: dict[str, str]) -> str:
    """"ltopd@5% qwen35-tiny gqa s0 (evaluate)": method and budget, backbone, benchmark, seed,
    any other wildcard, then the rule; "full" without a budget."""
    parts, rest = [], dict(wildcards)
    method, budget = rest.pop("method", None), rest.pop("budget", None)
    if method is not None:  # "full" needs no budget; a trained student at 100% does ("ltopd@100%")
        tag = "" if budget is None or method == "full" else f"@{100 * float(budget):g}%"
        parts.append(f"{method}{tag}")
    elif budget is not None:
        parts.append(f"@{100 * float(budget):g}%")
    for key in NAME_ORDER[2:]:
        if key in rest:
            value = rest.pop(key)
            parts.append(f"s{value}" if key == "seed" else str(value))
    parts += [str(v) for v in rest.values()]
    return " ".join(parts + [f"({rule})"]) if parts else rule


@contextlib.contextmanager
def job_run(s: Settings, rule: str, wildcards: dict[str, str], params: dict[str, Any],
            inputs: dict[str, str] | None = None) -> Iterator[JobRun]:
    """One MLflow run for one rule execution, child of the invocation's parent run if known."""
    from mlflow.entities import Param

    from ltopd import preempt

    exp_id = ensure_experiment(s)
    client = _client(s)
    tags = {"rule": rule, "profile": s.profile, "wildcards": json.dumps(wildcards, sort_keys=True),
            **{f"wildcard.{k}": v for k, v in wildcards.items()}, **git_tags()}
    parent = Path(s.parent_file)
    if parent.is_file():
        tags[PARENT_TAG] = json.loads(parent.read_text())["run_id"]
    for name, p in (inputs or {}).items():
        if Path(p).exists():
            tags[f"input.{name}.sha256"] = path_digest(p)
    run = _retry(lambda: client.create_run(exp_id, run_name=run_name(rule, wildcards), tags=tags))
    handle = JobRun(client, run.info.run_id, exp_id)
    # the job's identity as params too, so the UI can filter, group and compare by them
    flat = [Param(k, str(v)) for k, v in wildcards.items()]
    flat += [Param(k, v[:6000]) for k, v in flatten(params).items() if k not in wildcards]
    for i in range(0, len(flat), 100):  # MLflow caps params per batch at 100
        _retry(lambda i=i: client.log_batch(run.info.run_id, params=flat[i:i + 100]))
    status = "FAILED"
    try:
        yield handle
        status = "FINISHED"
    except preempt.Preempted:  # stopped on request, its state saved: the rerun resumes it
        status = "KILLED"
        raise
    finally:
        handle.flush()
        _retry(lambda: client.set_terminated(run.info.run_id, status))
