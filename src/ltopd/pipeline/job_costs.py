"""What each job of a run is expected to cost, for the ETA (ltopd.pipeline.eta).

Jobs differ a hundredfold: an evaluation group of every selector at every budget answers ~30x
the questions of a student's. A job's cost is a fixed start-up (imports, loading) plus its units
times its kind's seconds per unit: an evaluation's units are its settings' questions (settings x
items), a training's the questions it answers per update (rollouts each when on-policy) over its
updates, a record set's its items. The priors are the default run's (docs/measured/pipeline-time.md,
2 cores); a run's finished jobs and the last run's records scale them, kind by kind (eta.Eta).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltopd.atomic import write_json

# Snakemake keeps its own state in .snakemake/; the records of the last run sit beside it.
RECORDS = Path(".snakemake") / "ltopd-costs.json"


@dataclass(frozen=True)
class Prior:
    fixed_s: float      # start-up of one job (imports, model and records loading)
    per_unit_s: float   # seconds per unit on the reference machine


# Per job kind. Measured on the default run (2 cores): the training-free group 163,200 settings x
# items in ~650 s, a student's 10,880 in ~80 s; trainings ~0.027 s per answered question either way
# (on-policy 3,200 in ~90 s, off-policy 800 in ~28 s).
PRIORS: dict[str, Prior] = {
    "evaluate": Prior(6.0, 0.005),
    "train": Prior(6.0, 0.027),
    "bench_records": Prior(3.0, 0.01),
    "fit_records": Prior(3.0, 0.002),
    "lt14k": Prior(5.0, 0.02),
    "pretrain_twin": Prior(6.0, 1.0),
    "release_twin": Prior(6.0, 1.0),
    "table2": Prior(20.0, 0.0),
}
OTHER = Prior(10.0, 0.0)  # a kind with no prior: a small job


def kind(rule: str) -> str:
    """The job kind a rule counts as: the evaluate_<backbone>[_<student>]_s<seed> groups are "evaluate"."""
    return "evaluate" if rule.startswith("evaluate_") else rule


def _items(cfg: Mapping[str, Any], benchmark: str) -> int:
    entry = cfg["evaluation"]["benchmarks"].get(benchmark, {})
    return int(entry.get("n", 100))  # real data (path:) gives no count before loading: a hundred


def _evaluate(cfg: Mapping[str, Any], rule: str, wildcards: Mapping[str, str]) -> float:
    from ltopd.grid import eval_groups, group_name

    for key, jobs in eval_groups(cfg).items():
        if group_name(*key) == rule:
            return float(sum(_items(cfg, j.benchmark) for j in jobs))
    return 0.0


# The families that sample training.rollouts responses per question (the others score the
# reference answers once).
ROLLOUT_FAMILIES = ("distill", "rl")


def _train(cfg: Mapping[str, Any], rule: str, wildcards: Mapping[str, str]) -> float:
    from ltopd.train.job import total_updates
    from ltopd.train.methods import TRAINED

    lt = cfg["lt14k"]
    t = cfg.get("training") or {}
    spec = TRAINED.get(wildcards.get("method", ""))
    rolls = spec is not None and spec.family in ROLLOUT_FAMILIES and spec.on_policy
    rollouts = t.get("rollouts", 1) if rolls else 1
    return float(total_updates(t, lt["num_batches"]) * lt["batch_size"] * rollouts)


def _records(cfg: Mapping[str, Any], rule: str, wildcards: Mapping[str, str]) -> float:
    return float(_items(cfg, wildcards.get("benchmark", "")))


def _lt14k(cfg: Mapping[str, Any], rule: str, wildcards: Mapping[str, str]) -> float:
    lt = cfg["lt14k"]
    return float(lt["num_batches"] * lt["batch_size"])


def _pretrain(cfg: Mapping[str, Any], rule: str, wildcards: Mapping[str, str]) -> float:
    return float(sum(s.get("steps", 0) for s in (cfg.get("pretrain") or {}).get("stages", [])))


# kind -> the job's units; a kind not listed is one unit (its prior's fixed cost).
UNITS: dict[str, Callable[[Mapping[str, Any], str, Mapping[str, str]], float]] = {
    "evaluate": _evaluate,
    "train": _train,
    "bench_records": _records,
    "fit_records": _records,
    "lt14k": _lt14k,
    "pretrain_twin": _pretrain,
    "release_twin": _pretrain,
}


@dataclass(frozen=True)
class JobCost:
    key: str       # rule and wildcards: how the logger recognises the job when it starts
    kind: str
    units: float


def job_key(rule: str, wildcards: Mapping[str, Any]) -> str:
    return " ".join([rule, *(f"{k}={v}" for k, v in sorted(wildcards.items()))])


def plan(cfg: Mapping[str, Any], jobs: Iterable[tuple[str, Mapping[str, Any]]]) -> list[JobCost]:
    """The expected units of each (rule, wildcards) job of a run."""
    out = []
    for rule, wildcards in jobs:
        k = kind(rule)
        units = UNITS[k](cfg, rule, {str(a): str(b) for a, b in wildcards.items()}) if k in UNITS else 0.0
        out.append(JobCost(job_key(rule, wildcards), k, units))
    return out


# The run's plan, handed from the Snakefile's onstart to the logger plugin (one process).
PUBLISHED: dict[str, Any] = {}


def publish(profile: str, costs: list[JobCost], cores: int | None) -> None:
    PUBLISHED.clear()
    PUBLISHED.update(profile=profile, costs=costs, cores=cores)


def read_records(profile: str, path: Path = RECORDS) -> dict[str, tuple[float, float]]:
    """The last run's seconds taken and seconds its priors expected, per kind, for ``profile`` ({}
    when there are none)."""
    try:
        data = json.loads(Path(path).read_text())
        return {k: (float(v[0]), float(v[1])) for k, v in data.get(profile, {}).items()}
    except (OSError, ValueError, TypeError, IndexError, AttributeError):
        return {}


def write_records(profile: str, records: Mapping[str, tuple[float, float]], path: Path = RECORDS) -> None:
    """This run's (seconds taken, seconds the priors expected) per kind for ``profile``, kept beside
    the other profiles' (atomic: a killed run leaves the last good file)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        data = {}
    data[profile] = {k: list(v) for k, v in records.items()}
    try:
        write_json(path, data)
    except OSError:
        pass  # an unwritable folder: the next run starts from the priors
