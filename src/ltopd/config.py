"""Load and validate a pipeline profile (config/*.yaml) against the package's JSON schema.

Errors name the file, the dotted key and what is allowed, so a typo stops the run at start.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml


class ConfigError(ValueError):
    """A profile does not match the schema (or a cross-field rule)."""


def schema() -> dict[str, Any]:
    """The profile schema, with the names the catalog declares filled in: the studies' keys and
    the evidence-first benchmarks' enum (the YAML file leaves both to the catalog)."""
    from ltopd.catalog import evidence_benchmarks, tables_of_kind

    text = resources.files("ltopd").joinpath("schemas/config.schema.yaml").read_text()
    out = yaml.safe_load(text)
    out["properties"]["studies"]["properties"] = {s: {"$ref": "#/$defs/study"} for s in tables_of_kind("study")}
    out["$defs"]["evidence_benchmark"]["enum"] = evidence_benchmarks()
    out["$defs"]["selector"]["enum"] = _selector_names()
    return out


def _key(path: Sequence[Any]) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _explain(err: jsonschema.ValidationError) -> str:
    """One readable line per schema violation: key, offending value, what is allowed."""
    key, v = _key(err.absolute_path), err.validator
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        return f"{key}: unknown key(s) {extra}; allowed keys: {allowed}"
    if v == "required":
        return f"{key}: {err.message}; required keys: {err.validator_value}"
    if v == "enum":
        return f"{key}: {err.instance!r} is not allowed; allowed values: {err.validator_value}"
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        s = err.schema
        lo = (f">= {s['minimum']}" if "minimum" in s
              else f"> {s['exclusiveMinimum']}" if "exclusiveMinimum" in s else "")
        hi = (f"<= {s['maximum']}" if "maximum" in s
              else f"< {s['exclusiveMaximum']}" if "exclusiveMaximum" in s else "")
        rng = " and ".join(x for x in (lo, hi) if x)
        return f"{key}: {err.instance!r} is out of range; allowed: {rng}"
    return f"{key}: {err.message}"


def _blamed(err: jsonschema.ValidationError) -> tuple[list[Any], bool]:
    """The key a schema violation is about, for naming its layer (ltopd.layers): an unknown key's
    own path; a missing key's mapping (whoever made it, ``True``); else the offending value's."""
    path = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return path + extra[:1], False
    return path, err.validator == "required"


def _leading_key(problem: str) -> list[str]:
    """The dotted key a cross-field problem line starts with ("grid.methods: ..." -> grid, methods)."""
    head = problem.split(":", 1)[0].split(" ", 1)[0]
    return [] if head.startswith("<") else head.split(".")


def validate(cfg: Any, source: str = "<config>", origins: Any = None) -> dict[str, Any]:
    """Validate a loaded profile; raise ConfigError listing every problem. ``origins``
    (ltopd.layers.Origins, for layered profiles) prefixes each line with the file or `--config`
    key that set the offending value."""
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(map(str, e.absolute_path)))
    problems = [(*_blamed(e), _explain(e)) for e in errors]
    if not problems:
        problems = [(_leading_key(p), False, p) for p in _cross_field_problems(cfg)]
    if problems:
        lines = [origins.label(path, text, created) if origins else text for path, created, text in problems]
        raise ConfigError(f"{source}: invalid configuration:\n  - " + "\n  - ".join(lines))
    return cfg


def _cross_field_problems(cfg: dict[str, Any]) -> list[str]:
    """Rules a JSON schema cannot say: grid names must exist, quotas must fill the batches."""
    from ltopd.catalog import BENCHMARKS, METHODS
    from ltopd.data.sampler import scaled_quotas

    out = []
    grid = cfg["grid"]
    for b in grid["backbones"]:
        if b not in cfg["backbones"]:
            out.append(f"grid.backbones: {b!r} is not defined; defined backbones: {sorted(cfg['backbones'])}")
    for m in grid["methods"]:
        if m not in METHODS:
            out.append(f"grid.methods: {m!r} is not a known method; allowed values: {sorted(METHODS)}")
    seeded = grid.get("seeded_methods")
    if seeded is not None:
        # a filter on grid.methods: known methods outside the grid are ignored, so a narrower grid
        # (e.g. --config grid=...) keeps the profile's list
        if stray := [m for m in seeded if m not in METHODS]:
            out.append(f"grid.seeded_methods: {stray} are not known methods; allowed values: {sorted(METHODS)}")
        if seeded and "full" not in seeded and "full" in grid["methods"]:
            out.append("grid.seeded_methods: must include 'full' (each seed's retain ratio divides by that seed's "
                       "full-token score)")
    for b in grid["benchmarks"]:
        if b not in BENCHMARKS:
            out.append(f"grid.benchmarks: {b!r} is not a known benchmark; allowed values: {list(BENCHMARKS)}")
        elif b not in cfg["evaluation"]["benchmarks"]:
            out.append(f"evaluation.benchmarks: no entry for grid benchmark {b!r}; give {{n: ...}} (synthetic "
                       f"twin) or {{path: ...}} (real data)")
    for b in cfg["evaluation"]["benchmarks"]:
        if b not in BENCHMARKS:
            out.append(f"evaluation.benchmarks: {b!r} is not a known benchmark; allowed values: {list(BENCHMARKS)}")
    from ltopd.grid import BASELINE_SEED_OFFSET

    offset = cfg["evaluation"].get("baseline_seed_offset", BASELINE_SEED_OFFSET)
    if clash := sorted(s + offset for s in cfg["seeds"] if s + offset in cfg["seeds"]):
        out.append(f"evaluation.baseline_seed_offset: {offset} puts the question-only baseline's fit seeds "
                   f"{clash} on evaluation seeds (it would be fitted in sample); allowed: an offset beyond "
                   f"{max(cfg['seeds']) - min(cfg['seeds'])}")
    from ltopd.bench.suites.instruct import GATE_SEED

    if high := [s for s in cfg["seeds"] if s + offset >= GATE_SEED]:
        out.append(f"seeds: {high} (+ baseline_seed_offset {offset}) reach the released twins' gate and "
                   f"pretraining items; allowed: seeds + offset below {GATE_SEED}")
    from ltopd.train.methods import TRAINED

    SELECTORS = _selector_names()

    runnable = sorted(m for m, spec in METHODS.items() if spec.kind != "trained" or m in TRAINED)
    missing = [m for m in grid["methods"] if m in METHODS and m not in runnable]
    if missing:
        out.append(f"grid.methods: {missing} have no trainer in this version; allowed values now: {runnable}")
    out += _study_problems(cfg)
    out += _external_problems(cfg)
    from ltopd.catalog import TABLES
    from ltopd.grid import grid_jobs, studies

    # the grid's and the studies' (whose untrained-student row needs training.selector to be expanded)
    trained = sorted({j.method for j in grid_jobs(cfg) if j.method in TRAINED}
                     | {m for s in studies(cfg) for m in TABLES[s].methods if m in TRAINED}) if not out else []
    if trained and "training" not in cfg:
        out.append(f"training: required because the grid or a study has trained methods {trained}")
    rl = sorted(m for m in trained if TRAINED[m].family == "rl")
    if rl and "training" in cfg:  # caught here, not after the jobs before them have run for hours
        t, sec = cfg["training"], cfg.get("rl") or {}
        if t["rollouts"] < 2:
            out.append(f"training.rollouts: {t['rollouts']} leaves {rl} no group to normalise; allowed: >= 2")
        if sec.get("overlong_cache", 0) > t["max_new_tokens"]:
            out.append(f"rl.overlong_cache: {sec['overlong_cache']} exceeds training.max_new_tokens "
                       f"{t['max_new_tokens']}; allowed: <= {t['max_new_tokens']}")
        for key in ("gspo_clip", "dapo_clip"):
            if key in sec and not sec[key][0] < 1:
                out.append(f"rl.{key}: the low clip {sec[key][0]} must be < 1 (ratio >= 1 - low)")
    if "training" in cfg and cfg["training"]["selector"] not in SELECTORS:
        out.append(f"training.selector: {cfg['training']['selector']!r} unknown; allowed values: {sorted(SELECTORS)}")
    eff = cfg.get("efficiency") or {}
    if "efficiency" in cfg and "training" not in cfg:
        out.append("training: required because of efficiency (Table 5): LT-OPD's rows reduce with training.selector")
    for b in eff.get("backbones") or []:
        if b not in cfg["backbones"]:
            out.append(f"efficiency.backbones: {b!r} is not defined; defined backbones: {sorted(cfg['backbones'])}")
    for m in eff.get("methods") or []:
        if m not in METHODS or METHODS[m].kind == "resize":  # the latency protocol times selections only
            allowed = sorted(k for k, v in METHODS.items() if v.kind != "resize")
            out.append(f"efficiency.methods: {m!r} is not a method Table 5 can time; allowed values: {allowed}")
    if "benchmark" in eff and eff["benchmark"] not in cfg["evaluation"]["benchmarks"]:
        out.append(f"efficiency.benchmark: {eff['benchmark']!r} has no evaluation.benchmarks entry; "
                   f"allowed values: {sorted(cfg['evaluation']['benchmarks'])}")
    for name, bb in cfg["backbones"].items():
        if not bb.get("twin") and not bb.get("checkpoint"):
            out.append(f"backbones.{name}: give either 'twin' (a tiny twin to pretrain) or 'checkpoint' (a local path)")
        if bb.get("release") and not bb.get("twin"):
            out.append(f"backbones.{name}.release: a released twin needs 'twin' (the twin it releases)")
    out += _world_problems(cfg["world"])
    out += _pretrain_problems(cfg)
    lt = cfg["lt14k"]
    for name, src in lt["sources"].items():
        if src["kind"] != "synthetic" and not src.get("path"):
            out.append(f"lt14k.sources.{name}.path: required when kind is {src['kind']!r}")
    try:
        scaled_quotas({k: v["quota"] for k, v in lt["sources"].items()}, lt["scale"],
                      lt["num_batches"] * lt["batch_size"])
    except ValueError as e:
        out.append(f"lt14k: {e}")
    return out


def _study_problems(cfg: dict[str, Any]) -> list[str]:
    """Each study's backbones must be defined and its benchmarks known and configured."""
    from ltopd.catalog import BENCHMARKS

    out = []
    for name, study in (cfg.get("studies") or {}).items():
        for b in study.get("backbones") or []:
            if b not in cfg["backbones"]:
                out.append(f"studies.{name}.backbones: {b!r} is not defined; "
                           f"defined backbones: {sorted(cfg['backbones'])}")
        for b in study.get("benchmarks") or []:
            if b not in BENCHMARKS:
                out.append(f"studies.{name}.benchmarks: {b!r} is not a known benchmark; "
                           f"allowed values: {list(BENCHMARKS)}")
            elif b not in cfg["evaluation"]["benchmarks"]:
                out.append(f"studies.{name}.benchmarks: {b!r} has no evaluation.benchmarks entry")
    return out


def _external_problems(cfg: dict[str, Any]) -> list[str]:
    """An external student is a Table 2 row: its backbone is Table 2's (the grid's first)."""
    table2 = cfg["grid"]["backbones"][:1]
    return [f"external_students.{name}.backbone: {e['backbone']!r} is not Table 2's backbone; allowed values: {table2}"
            for name, e in (cfg.get("external_students") or {}).items() if e["backbone"] not in table2]


def _selector_names() -> list[str]:
    """The selector registry's names, read from the catalog (test_catalog: equal) so that a profile
    check, which runs in every job and every Snakemake parse, imports no torch."""
    from ltopd.catalog import methods_of_kind

    return methods_of_kind("selector")


def _pretrain_problems(cfg: dict[str, Any]) -> list[str]:
    from ltopd.data.world import TASKS
    from ltopd.twins.release import twin_spec
    from ltopd.twins.specs import TWINS

    SELECTORS = _selector_names()

    out = []
    for name, bb in cfg["backbones"].items():
        if bb.get("twin") and bb["twin"] not in TWINS:
            out.append(f"backbones.{name}.twin: {bb['twin']!r} is not a tiny twin; allowed values: {sorted(TWINS)}")
    if "pretrain" not in cfg:
        twins = [n for n, bb in cfg["backbones"].items() if bb.get("twin")]
        return out + ([f"pretrain: required because backbones {twins} are tiny twins to pretrain"] if twins else [])
    pt = cfg["pretrain"]
    released = [n for n, bb in cfg["backbones"].items() if bb.get("twin") and bb.get("release")]
    if released and "gates" not in pt:
        out.append(f"pretrain.gates: required because backbones {released} are released (their gates' ratio and "
                   "selector)")
    if "gates" in pt and pt["gates"]["selector"] not in SELECTORS:
        out.append(f"pretrain.gates.selector: {pt['gates']['selector']!r} unknown; allowed values: {sorted(SELECTORS)}")
    out += _stage_problems("pretrain.stages", pt["stages"], cfg["world"])
    for name, bb in cfg["backbones"].items():
        out += _stage_problems(f"backbones.{name}.pretrain_stages", bb.get("pretrain_stages") or [], cfg["world"])
        if bb.get("twin"):  # a twin is asked evidence-first exactly where its stages taught it so
            stages = twin_spec(cfg, name)["pretrain"]["stages"]
            taught = {b for st in stages for b in st.get("evidence", [])}
            asked = set(bb.get("evidence", []))
            if taught != asked:
                out.append(f"backbones.{name}.evidence: {sorted(asked)}, but its pretraining stages teach "
                           f"{sorted(taught)} evidence-first; list exactly those (evaluation asks them with "
                           "their instruction, the others plainly)")
    out += [f"pretrain.heldout.{p}" for p in _world_problems({**cfg["world"], **pt["heldout"].get("world", {})})]
    bad = [t for t in pt["heldout"]["tasks"] if t not in TASKS]
    if bad:
        out.append(f"pretrain.heldout.tasks: {bad} unknown; allowed values: {sorted(TASKS)}")
    bad = [s for s in pt["heldout"]["selectors"] if s not in SELECTORS]
    if bad:
        out.append(f"pretrain.heldout.selectors: {bad} unknown; allowed values: {sorted(SELECTORS)}")
    return out


def _stage_problems(key: str, stages: list[dict[str, Any]], base_world: dict[str, Any]) -> list[str]:
    from ltopd.catalog import BENCHMARKS
    from ltopd.data.world import TASKS
    from ltopd.twins.objectives import DENSE_OBJECTIVES

    out = []
    for i, stage in enumerate(stages):
        bad = [t for t in stage.get("tasks", []) if t not in TASKS]
        unknown = [b for b in stage.get("bench", []) if b not in BENCHMARKS]
        if unknown:
            out.append(f"{key}.{i}.bench: {unknown} unknown; allowed values: {list(BENCHMARKS)}")
        if bad:
            out.append(f"{key}.{i}.tasks: {bad} unknown; allowed values: {sorted(TASKS)}")
        dense = stage.get("objective") in DENSE_OBJECTIVES
        if dense and (stage.get("bench") or not stage.get("tasks")):
            out.append(f"{key}.{i}: a {stage['objective']} stage trains on world `tasks` items (their scenes "
                       "label the tokens), not `bench`")
        if dense and stage.get("text_only"):
            out.append(f"{key}.{i}.text_only: a {stage['objective']} stage labels the image's tokens; "
                       "it needs the images")
        stray = [b for b in stage.get("evidence", []) if b not in stage.get("bench", [])]
        if stray:
            out.append(f"{key}.{i}.evidence: {stray} not among the stage's `bench` {stage.get('bench', [])} "
                       "(evidence-first answers are given to those twins' items only)")
        world = {**base_world, **stage.get("world", {})}
        problems = _world_problems(world)
        out += [f"{key}.{i}.{p}" for p in problems]
        if not bad and not problems:
            out += [f"{key}.{i}: {p}" for p in _unaskable(stage.get("tasks", []), world)]
        if not unknown and not problems and stage.get("world"):  # the profile's world poses every twin already
            out += [f"{key}.{i}: {p}" for p in _unposable(stage.get("bench", []), world)]
    return out


# Items of each bench twin drawn in a stage's own world (MME: 200 images, every category 28 times).
# A twin item's answer is drawn before its scene (no acceptance bias), so a narrow world fails some
# items only: in a world of at most four objects an MMBench count of five (one question in 36) can
# never be posed, which crashed a run 20 minutes in (docs/lab/pretraining-record.md). The draws are seeded and
# world-independent, so the check is deterministic: seed 0's 400 MMBench records (116 questions)
# hold two counts of five. Rarer failures still surface in the run, as its error.
POSABLE_DRAWS = 400


def _unposable(bench: list[str], world: dict[str, Any]) -> list[str]:
    """Benchmark twins a stage's own world cannot pose, found by drawing POSABLE_DRAWS items of each."""
    key = json.dumps(world, sort_keys=True)
    return [f"bench twin {name!r} cannot be posed in this world ({error})"
            for name in bench if (error := _posing_error(name, key)) is not None]


@functools.cache
def _posing_error(name: str, world_json: str) -> str | None:
    """Why `name`'s first POSABLE_DRAWS items cannot be drawn in the world (JSON), or None. The
    verdict is a function of the twin, the world and the drawing code alone (seeded draws), so it
    is kept in a file (posing_cache_file) under the hash of all three: a parse reads it instead of
    drawing again (0.1-0.6 CPU s per twin; 7 s per parse of the default profile), and an edited
    generator draws anew. Cached in memory too, as stages and profiles repeat worlds."""
    key = hashlib.sha256(json.dumps([name, world_json, _drawing_code()]).encode()).hexdigest()
    path = posing_cache_file()
    try:
        verdicts = json.loads(path.read_text())
    except (OSError, ValueError):
        verdicts = {}
    if key in verdicts:
        return verdicts[key]
    from ltopd.bench.suites import synthetic_records

    try:
        synthetic_records(name, POSABLE_DRAWS, 0, json.loads(world_json))
        error = None
    except RuntimeError as e:
        error = str(e)
    from ltopd.atomic import write_json

    try:
        write_json(path, {**verdicts, key: error})  # a concurrent writer may drop one verdict: redrawn later
    except OSError:
        pass  # an unwritable cache: the next parse draws again
    return error


def posing_cache_file() -> Path:
    """The posing verdicts' file: $LTOPD_CACHE_DIR/posable.json, else under $XDG_CACHE_HOME/ltopd
    (default ~/.cache/ltopd)."""
    folder = os.environ.get("LTOPD_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ltopd"
    return Path(folder) / "posable.json"


@functools.cache
def _drawing_code() -> dict[str, str]:
    """sha256 of every source file drawing a bench twin's items can run, and numpy's version (its
    generators draw them)."""
    import numpy

    from ltopd.job_identity import code_hashes

    return {**code_hashes(("ltopd.bench.suites",)), "numpy": numpy.__version__}


def _unaskable(tasks: list[str], world: dict[str, Any]) -> list[str]:
    """Tasks the stage's world cannot pose (e.g. counts up to 5 with at most 3 objects), found by
    generating a few items now instead of failing minutes into pretraining."""
    from ltopd.data.sources import world_config
    from ltopd.data.world import generate_task_item

    cfg, out = world_config(world), []
    for task in tasks:
        try:
            for i in range(4):
                generate_task_item(task, i, 0, cfg)
        except RuntimeError as e:
            out.append(f"task {task!r} cannot be posed in this world ({e})")
    return out


def _world_problems(world: dict[str, Any]) -> list[str]:
    import dataclasses

    from ltopd.catalog import BENCHMARKS
    from ltopd.data.world import WorldConfig
    from ltopd.data.world.canvas import REGIME_KEYS

    allowed = [f.name for f in dataclasses.fields(WorldConfig)] + list(REGIME_KEYS)
    unknown = sorted(set(world) - set(allowed))
    if unknown:
        return [f"world: unknown key(s) {unknown}; allowed keys: {allowed}"]
    strange = sorted(set(world.get("canvas") or {}) - set(BENCHMARKS))
    if strange:
        return [f"world.canvas: unknown benchmark(s) {strange}; allowed values: {sorted(BENCHMARKS)}"]
    from ltopd.data.sources import world_config

    try:
        world_config(world)
    except (TypeError, ValueError) as e:
        return [f"world: {e}"]
    return []


def path_problems(cfg: dict[str, Any]) -> list[str]:
    """Local data a profile names that is missing or lacks the fields its loader needs: LT-14K's
    real sources (opened as the build opens them), checkpoints (a config.json) and real benchmark
    data (loaded as the evaluation loads it). One line per problem, naming the key."""
    from ltopd.bench.suites import load_records
    from ltopd.data.sources import SourceError, open_pool

    out = []
    lt = cfg["lt14k"]
    for name, spec in lt["sources"].items():
        if spec.get("kind", "synthetic") != "synthetic":
            try:
                open_pool(name, spec, spec["quota"], lt.get("pool_factor", 1.0), cfg["world"])
            except (SourceError, OSError, ValueError) as e:
                out.append(str(e) if str(e).startswith("lt14k.") else f"lt14k.sources.{name}: {e}")
    for name, bb in cfg["backbones"].items():
        if bb.get("checkpoint") and not (Path(bb["checkpoint"]) / "config.json").is_file():
            out.append(f"backbones.{name}.checkpoint: {bb['checkpoint']} holds no config.json (a Hugging Face "
                       "model folder saved with save_pretrained)")
    for name, entry in cfg["evaluation"]["benchmarks"].items():
        if entry.get("path"):
            if not Path(entry["path"]).exists():
                out.append(f"evaluation.benchmarks.{name}.path: {entry['path']} does not exist")
                continue
            try:
                load_records(name, entry["path"])
            except (OSError, ValueError) as e:
                out.append(f"evaluation.benchmarks.{name}.path: {e}")
    return out


def read(path: str | Path) -> dict[str, Any]:
    """A profile YAML as a dict (not yet validated); errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        cfg = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: a profile is a YAML mapping, got {type(cfg).__name__}")
    return cfg




def yaml_typed(value: Any) -> Any:
    """`value` with every string leaf read as a YAML scalar would be ('0.05' -> 0.05, 'true' ->
    True, 'cdpruner' stays a string): Snakemake parses nested `--config` values with YAML's base
    loader, which leaves every scalar a string."""
    if isinstance(value, dict):
        return {k: yaml_typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [yaml_typed(v) for v in value]
    if isinstance(value, str):
        try:
            typed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        return (typed if isinstance(typed, (bool, int, float)) or typed is None and value.strip() in ("null", "~")
                else value)
    return value


def load(path: str | Path) -> dict[str, Any]:
    """Read a profile YAML and validate it; errors name the file."""
    return validate(read(path), source=str(path))
