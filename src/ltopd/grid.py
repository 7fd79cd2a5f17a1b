"""The experiment grid, declared once in the profile and expanded here.

Snakemake's targets (workflow/rules/common.smk) and dvc.yaml (`ltopd dvc-yaml`) both come from
this module, so the two cannot drift apart; tests/pipeline/test_dvc_sync.py fails if dvc.yaml is stale.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltopd import codegraph
from ltopd.catalog import (  # noqa: F401  (eval_setting: re-exported)
    EXTERNAL_PREFIX,
    METHODS,
    TABLES,
    ablation_variants,
    eval_setting,
    external_method,
    study_methods,
)
from ltopd.catalog import method as method_entry  # a declared method or an external student's row


@dataclass(frozen=True)
class EvalJob:
    backbone: str
    method: str
    budget: float
    benchmark: str
    seed: int

    @property
    def budget_tag(self) -> str:
        return budget_tag(self.budget)


def budget_tag(budget: float) -> str:
    """Budget as it appears in paths and wildcards: 0.05 -> '0.05', 1.0 -> '1'."""
    return f"{budget:g}"


def eval_jobs(cfg: dict[str, Any]) -> Iterator[EvalJob]:
    """Every evaluation the grid and the studies ask for, each once. The reference methods (`full`,
    `blind`) run once (budget 1);
    trained methods run at the smallest budget, the one the paper trains for; selectors at every
    budget of the grid (at the smallest in a study)."""
    seen: set[EvalJob] = set()
    for job in grid_jobs(cfg):
        seen.add(job)
        yield job
    for study in studies(cfg):
        for job in study_jobs(cfg, study):
            if job not in seen:
                seen.add(job)
                yield job
    yield from external_jobs(cfg)  # rows of their own: never one of the grid's


def external_students(cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The profile's students trained elsewhere (``external_students``): entry -> its folder
    (``path``), ``backbone``, and the ``selector``, ``budget`` and ``floor`` it was trained for."""
    return dict(cfg.get("external_students") or {})


def external_entry(cfg: dict[str, Any], method_name: str | None) -> dict[str, Any] | None:
    """The external_students entry whose row is ``method_name`` (catalog.external_method), else None."""
    if not method_name or not method_name.startswith(EXTERNAL_PREFIX):
        return None
    return external_students(cfg).get(method_name.removeprefix(EXTERNAL_PREFIX))


def external_jobs(cfg: dict[str, Any]) -> Iterator[EvalJob]:
    """Each external student on every benchmark of the grid at every seed (each seed's records,
    paired with that seed's full tokens), at the budget it was trained for: Table 2's rows."""
    for name, entry in external_students(cfg).items():
        for bench, seed in itertools.product(cfg["grid"]["benchmarks"], cfg["seeds"]):
            yield EvalJob(entry["backbone"], external_method(name), float(entry["budget"]), bench, seed)


def external_inputs(cfg: dict[str, Any], key: str = "eval_metrics") -> list[str]:
    """The ``key`` path (metrics or predictions) of every external student's evaluation: Table 2
    reads them beside :func:`table2_inputs` (their backbone is Table 2's, validated)."""
    p = paths(cfg)[key]
    return [p.format(backbone=j.backbone, method=j.method, budget=j.budget_tag, benchmark=j.benchmark, seed=j.seed)
            for j in external_jobs(cfg)]


@dataclass(frozen=True)
class ReductionDefaults:
    """How visual tokens are reduced wherever a table row or a job does not name its own setting:
    ``selector`` the training-free selector the students train with and are evaluated with
    (``training.selector``), which is also the untrained student's row (Table 2's paired
    comparisons, the studies' and Figure 4's S_pruned, Table 5's LT-OPD rows); ``budget`` the
    target budget students train for and are evaluated at (the grid's smallest: 5% in the paper);
    ``floor`` the fewest visual tokens an image keeps (``reduction.floor``). Each is None where the
    profile, or the part of it a job's spec carries, lacks its section."""

    selector: str | None
    budget: float | None
    floor: int | None


def reduction_defaults(cfg: dict[str, Any]) -> ReductionDefaults:
    """The one reader of the selector, the target budget and the floor: from a profile, or from a
    job's spec (the profile's sections the job depends on). No other code defaults them."""
    budgets = (cfg.get("grid") or {}).get("budgets")
    floor = (cfg.get("reduction") or {}).get("floor")
    return ReductionDefaults(selector=(cfg.get("training") or {}).get("selector"),
                             budget=float(min(budgets)) if budgets else None,
                             floor=int(floor) if floor is not None else None)


def eval_groups(cfg: dict[str, Any]) -> dict[tuple[str, str | None, int], list[EvalJob]]:
    """The evaluation jobs grouped by the model they load: (backbone, student, seed) -> its
    settings. A trained method's student is a model of its own (student: the method); every
    training-free row of a backbone (full, blind, the selectors, the downsampling control; student:
    None) evaluates the backbone itself, so they share one group per seed. One process per group
    loads the model and each benchmark's records once and runs each image through the vision
    tower once for all of the group's settings that see it (rule evaluate_*)."""
    groups: dict[tuple[str, str | None, int], list[EvalJob]] = {}
    for job in eval_jobs(cfg):
        groups.setdefault((job.backbone, group_student(job.method), job.seed), []).append(job)
    return groups


def group_student(method: str) -> str | None:
    """The student an evaluation of `method` loads: the trained method (or external student)
    itself, else None (the backbone)."""
    return method if method_entry(method).kind == "trained" else None


def group_name(backbone: str, student: str | None, seed: int) -> str:
    """A group's rule name (Snakemake rule names are identifiers): "evaluate_qwen35_tiny_ltopd_s0"
    for a student, "evaluate_qwen35_tiny_s0" for the backbone's training-free rows."""
    parts = (backbone,) if student is None else (backbone, student)
    return "evaluate_" + "_".join(x.replace("-", "_").replace(".", "_") for x in parts) + f"_s{seed}"


def grid_jobs(cfg: dict[str, Any]) -> Iterator[EvalJob]:
    """The evaluations of the `grid` section alone (Table 2's)."""
    g = cfg["grid"]
    lowest = reduction_defaults(cfg).budget
    trained = [lowest, 1.0] if g.get("student_full_tokens") else [lowest]
    for bb, m, bench in itertools.product(g["backbones"], g["methods"], g["benchmarks"]):
        kind = METHODS[m].kind
        budgets = [1.0] if kind == "reference" else trained if kind == "trained" else g["budgets"]
        for seed, b in itertools.product(method_seeds(cfg, m), budgets):
            yield EvalJob(bb, m, float(b), bench, seed)


def method_seeds(cfg: dict[str, Any], method: str) -> list[int]:
    """The seeds `method` runs at (trained and evaluated): every profile seed for the methods in
    `grid.seeded_methods` (all methods when the key is absent), else the first seed only."""
    seeded = cfg["grid"].get("seeded_methods")
    return list(cfg["seeds"]) if seeded is None or method in seeded else list(cfg["seeds"][:1])


def paths(cfg: dict[str, Any]) -> dict[str, str]:
    """Every artifact path of the pipeline, relative to the working directory."""
    root = Path(cfg["out_root"])
    return {
        "lt14k": str(root / "data" / "lt14k"),
        "lt14k_metrics": str(root / "metrics" / "lt14k.json"),
        "logs": str(root / "logs"),
        "mlflow_parent": str(root / "logs" / "mlflow-parent.json"),
        "tokenizer": str(root / "models" / "tokenizer"),
        "twin": str(root / "models" / "{backbone}"),
        # released twins are committed with the code: outside out_root
        "release": str(Path(cfg.get("release_dir", "releases")) / "{backbone}"),
        "twin_metrics": str(root / "metrics" / "pretrain" / "{backbone}.json"),
        "bench": str(root / "data" / "bench" / "{benchmark}" / "seed{seed}"),
        # the question-only baseline's fit records: the same records, without their images
        "bench_fit": str(root / "data" / "bench" / "{benchmark}" / "fit{seed}"),
        "eval_dir": str(root / "results" / "eval" / "{backbone}" / "{method}" / "{budget}" / "{benchmark}"
                        / "seed{seed}"),
        "eval_metrics": str(root / "results" / "eval" / "{backbone}" / "{method}" / "{budget}" / "{benchmark}"
                            / "seed{seed}" / "metrics.json"),
        "eval_predictions": str(root / "results" / "eval" / "{backbone}" / "{method}" / "{budget}" / "{benchmark}"
                                / "seed{seed}" / "predictions.jsonl"),
        "student": str(root / "models" / "students" / "{backbone}" / "{method}" / "seed{seed}"),
        "train_metrics": str(root / "metrics" / "train" / "{backbone}" / "{method}" / "seed{seed}.json"),
        "checkpoints": str(root / "train_state" / "{backbone}" / "{method}" / "seed{seed}"),
        # an evaluation group's finished settings while it runs (a stopped group's rerun skips them)
        "eval_state": str(root / "train_state" / "evaluate" / "{group}"),
        "efficiency": str(root / "results" / "efficiency" / "{backbone}.json"),
        "prefill_costs": str(root / "results" / "efficiency" / "prefill" / "{backbone}.json"),  # every Table 2 row
        # a catalog table's files (table_outputs): the keys are TABLE_FILES'
        "table": str(root / "results" / "{table}.csv"),
        "table_md": str(root / "results" / "{table}.md"),
        "table_json": str(root / "results" / "{table}.json"),  # headline numbers: `dvc metrics show`
        "figure": str(root / "results" / "figures" / "{figure}.png"),
    }


def eval_outputs(cfg: dict[str, Any], key: str = "eval_metrics") -> list[str]:
    """The ``key`` path (metrics or predictions) of every evaluation job of the grid."""
    p = paths(cfg)[key]
    return [p.format(backbone=j.backbone, method=j.method, budget=j.budget_tag, benchmark=j.benchmark, seed=j.seed)
            for j in eval_jobs(cfg)]


def table2_methods(cfg: dict[str, Any]) -> list[str]:
    """Table 2's rows: the grid's methods but the ablation tables' variants (ablation_inputs)."""
    variants = ablation_variants()
    return [m for m in cfg["grid"]["methods"] if m not in variants]


def table2_inputs(cfg: dict[str, Any], methods: set[str] | None = None, key: str = "eval_metrics") -> list[str]:
    """The evaluations of the grid's first backbone (Qwen3.5-4B in the paper) that Table 2 reads
    (:func:`table2_methods`), or those of ``methods``; ``key`` "eval_predictions" gives their
    per-item predictions (the bootstrap's input) instead of their metrics."""
    first = cfg["grid"]["backbones"][0]
    keep = set(table2_methods(cfg) if methods is None else methods)
    p = paths(cfg)[key]
    return [p.format(backbone=j.backbone, method=j.method, budget=j.budget_tag, benchmark=j.benchmark, seed=j.seed)
            for j in grid_jobs(cfg) if j.backbone == first and j.method in keep]


# The question-only baseline of a synthetic twin is fitted on the twin's records at another
# evaluation seed (out of sample): seed + evaluation.baseline_seed_offset (default below).
BASELINE_SEED_OFFSET = 1000


def baseline_seed(cfg: dict[str, Any], seed: int) -> int:
    """The fit seed of the question-only baseline for evaluation ``seed``."""
    return int(seed) + int(cfg["evaluation"].get("baseline_seed_offset", BASELINE_SEED_OFFSET))


def synthetic_benchmarks(cfg: dict[str, Any]) -> list[str]:
    """The profile's benchmarks given as synthetic twins (no ``path:``, so records at any seed)."""
    return sorted(b for b, entry in cfg["evaluation"]["benchmarks"].items() if not entry.get("path"))


def table2_fit_records(cfg: dict[str, Any]) -> dict[str, str]:
    """"benchmark:seed" -> the records the question-only baseline of that evaluation is fitted
    on (rule fit_records at the fit seed: the twin's records there, without images, which the
    baseline never reads), for the grid's synthetic benchmarks. A real benchmark (``path:``) has
    one record set; Table 2 cross-fits its baseline instead."""
    p, synthetic = paths(cfg)["bench_fit"], synthetic_benchmarks(cfg)
    return {f"{b}:{s}": p.format(benchmark=b, seed=baseline_seed(cfg, s))
            for b in cfg["grid"]["benchmarks"] if b in synthetic for s in cfg["seeds"]}


# Whether a profile builds a catalog table, by the table's kind.
BUILDS: dict[str, Callable[[dict[str, Any], str], bool]] = {
    "grid": lambda cfg, table: True,
    "ablation": lambda cfg, table: set(TABLES[table].methods) <= set(cfg["grid"]["methods"]),
    "study": lambda cfg, table: table in (cfg.get("studies") or {}),
    "efficiency": lambda cfg, table: bool(cfg.get("efficiency")),
    "pareto": lambda cfg, table: pareto_backbone(cfg) is not None,
}

# A table's output (catalog.TABLE_OUTPUTS) -> its path in paths().
TABLE_FILES = {"csv": "table", "md": "table_md", "json": "table_json", "figure": "figure"}


def tables(cfg: dict[str, Any]) -> list[str]:
    """The catalog's tables and figures this profile builds, in catalog order: Table 2; each
    ablation table whose every compared method is in the grid; the studies of its ``studies``
    section; Table 5 and Figure 1 right with an ``efficiency`` section."""
    return [t for t, spec in TABLES.items() if BUILDS[spec.kind](cfg, t)]


def table_outputs(cfg: dict[str, Any], table: str) -> dict[str, str]:
    """A table's files, by output (its catalog entry's ``outputs``): results/<table>.csv, .md, .json,
    results/figures/<figure_file or table>.png. The rules' named outputs."""
    spec = TABLES[table]
    p = paths(cfg)
    return {o: p[TABLE_FILES[o]].format(table=table, figure=spec.figure_file or table) for o in spec.outputs}


def rule_outputs(cfg: dict[str, Any], tables: list[str]) -> dict[str, str]:
    """The named outputs of one rule that builds each of ``tables`` (wildcard ``{table}``): their
    catalog outputs, which must be the same, each file named by its table."""
    kinds = {TABLES[t].outputs for t in tables}
    if len(kinds) != 1 or any(TABLES[t].figure_file for t in tables):
        raise ValueError(f"tables {tables}: one rule builds them, so they need the same outputs and no "
                         f"figure_file of their own; got {sorted(kinds)}")
    p = paths(cfg)
    return {o: p[TABLE_FILES[o]].replace("{figure}", "{table}") for o in kinds.pop()}


def ablation_tables(cfg: dict[str, Any]) -> list[str]:
    """The catalog's ablation tables whose every compared method is in the grid."""
    return [t for t in tables(cfg) if TABLES[t].kind == "ablation"]


def ablation_inputs(cfg: dict[str, Any], table: str, key: str = "eval_metrics") -> list[str]:
    """An ablation table's evaluations: its methods, with full tokens and the blind twin for the
    gates Table 2 computes (the same gated benchmarks, so its rows read as Table 2's)."""
    return table2_inputs(cfg, {"full", "blind", *TABLES[table].methods}, key)


def studies(cfg: dict[str, Any]) -> list[str]:
    """The catalog's studies this profile builds (its ``studies`` section), in catalog order."""
    return [t for t in tables(cfg) if TABLES[t].kind == "study"]


def study_backbones(cfg: dict[str, Any], study: str) -> list[str]:
    return (cfg.get("studies") or {}).get(study, {}).get("backbones") or cfg["grid"]["backbones"][:1]


def study_benchmarks(cfg: dict[str, Any], study: str) -> list[str]:
    return (cfg.get("studies") or {}).get(study, {}).get("benchmarks") or list(cfg["grid"]["benchmarks"])


def study_jobs(cfg: dict[str, Any], study: str) -> Iterator[EvalJob]:
    """Full tokens once (budget 1), every other method at the grid's smallest budget; the untrained
    student's row with the profile's training.selector (catalog.study_methods)."""
    rd = reduction_defaults(cfg)
    lowest = rd.budget
    for bb, m, bench in itertools.product(study_backbones(cfg, study), study_methods(study, rd.selector),
                                          study_benchmarks(cfg, study)):
        for seed in method_seeds(cfg, m):
            yield EvalJob(bb, m, 1.0 if METHODS[m].kind == "reference" else lowest, bench, seed)


def study_scope(cfg: dict[str, Any], study: str) -> tuple[list[str], list[str], float, str]:
    """(backbones, benchmarks, budget, selector of the untrained student's row) a study compares
    on: the report builders' arguments."""
    rd = reduction_defaults(cfg)
    if rd.selector is None:
        raise ValueError(f"{study}: its untrained-student row is the profile's training.selector, and there is none")
    return study_backbones(cfg, study), study_benchmarks(cfg, study), rd.budget, rd.selector


def study_inputs(cfg: dict[str, Any], study: str) -> list[str]:
    p = paths(cfg)["eval_metrics"]
    return [p.format(backbone=j.backbone, method=j.method, budget=j.budget_tag, benchmark=j.benchmark, seed=j.seed)
            for j in study_jobs(cfg, study)]


def evaluated_backbones(cfg: dict[str, Any]) -> list[str]:
    """Every backbone some evaluation of the grid or a study uses, in first-use order."""
    return list(dict.fromkeys(j.backbone for j in eval_jobs(cfg)))


def twins(cfg: dict[str, Any]) -> list[str]:
    """Backbones the pipeline pretrains in its own run (tiny twins without a release); the
    others load a released twin or a local checkpoint."""
    return [name for name, bb in cfg["backbones"].items() if bb.get("twin") and not bb.get("release")]


def released(cfg: dict[str, Any]) -> list[str]:
    """Backbones loaded from a released twin folder (built by `snakemake release_twins`)."""
    return [name for name, bb in cfg["backbones"].items() if bb.get("twin") and bb.get("release")]


def model_path(cfg: dict[str, Any], backbone: str) -> str:
    """Where `backbone`'s starting weights are: a local checkpoint, a released twin, or the twin
    this run pretrains."""
    bb = cfg["backbones"][backbone]
    if bb.get("checkpoint"):
        return bb["checkpoint"]
    return paths(cfg)["release" if bb.get("release") else "twin"].format(backbone=backbone)


def targets(cfg: dict[str, Any]) -> list[str]:
    """What `rule all` builds: every stage's final outputs for this profile."""
    p = paths(cfg)
    out = [p["lt14k"], p["lt14k_metrics"]]
    for b in twins(cfg):
        out += [p["twin"].format(backbone=b), p["twin_metrics"].format(backbone=b)]
    return out + eval_outputs(cfg) + all_tables(cfg)


def all_tables(cfg: dict[str, Any], which: list[str] | None = None) -> list[str]:
    """The files of every table and figure the profile builds (rule all_tables), or of ``which``."""
    return [f for t in (tables(cfg) if which is None else which) for f in table_outputs(cfg, t).values()]


def efficiency_backbones(cfg: dict[str, Any]) -> list[str]:
    """Backbones Table 5 measures: `efficiency.backbones`, else the grid's."""
    return (cfg.get("efficiency") or {}).get("backbones") or cfg["grid"]["backbones"]


def pareto_backbone(cfg: dict[str, Any]) -> str | None:
    """Table 2's backbone (the Pareto figure's, its rows' prefill measured by rule prefill_costs)
    when the profile has an ``efficiency`` section (the measuring protocol), else None."""
    return cfg["grid"]["backbones"][0] if cfg.get("efficiency") else None


REPO = codegraph.PACKAGE_ROOT.parents[1]  # the checkout holding src/ltopd (an editable install)


def job_code(job: str, repo: str | Path = REPO) -> list[str]:
    """The files (relative to ``repo``) that the job module ltopd.pipeline.<job> can run: its
    rule's code inputs, from the import graph of the checkout's sources."""
    repo = Path(repo).resolve()
    return codegraph.relative_code_files([f"ltopd.pipeline.{job}"], start=repo, root=repo / "src" / "ltopd")


def code_deps(jobs: list[str], repo: str | Path = REPO) -> list[str]:
    """``job_code`` of several jobs as DVC deps: a folder whose every file is listed is named
    once (its files are then all deps, as DVC hashes a folder)."""
    repo = Path(repo).resolve()
    files = {f for j in jobs for f in job_code(j, repo)}
    covered: dict[str, bool] = {}

    def full(folder: Path) -> bool:
        key = str(folder.relative_to(repo))
        if key not in covered:
            inside = [p for p in folder.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")]
            covered[key] = all(full(p) if p.is_dir() else str(p.relative_to(repo)) in files for p in inside)
        return covered[key]

    out = []
    for f in sorted(files):
        parents = [p for p in reversed(Path(f).parents) if str(p) != "."]
        top = next((p for p in parents if full(repo / p)), None)
        out.append(str(top) if top is not None else f)
    return sorted(set(out))


def dvc_stages(cfg: dict[str, Any], config_file: str) -> dict[str, Any]:
    """Coarse DVC stages, each a `snakemake` call on one target group (see README: DVC and
    Snakemake). Outputs are persisted so DVC never deletes what Snakemake manages."""
    p = paths(cfg)
    snake = (f"snakemake --cores all --configfile {config_file} --rerun-triggers params input software-env code "
             "--rerun-incomplete")
    stages: dict[str, Any] = {
        "lt14k": {
            "cmd": f"{snake} -- {p['lt14k']} {p['lt14k_metrics']}",
            "deps": [config_file, "Snakefile", "workflow/rules/data.smk", *code_deps(["data_jobs"])],
            "params": [{config_file: ["lt14k", "world"]}],
            "outs": [{p["lt14k"]: {"persist": True}}],
            # the default profile's LT-14K fingerprint is committed to git (.gitignore); other
            # profiles write under runs/ (ignored), so DVC caches theirs
            "metrics": [{p["lt14k_metrics"]: {"persist": True,
                                              **({"cache": False} if cfg["out_root"] == "." else {})}}],
        },
    }
    tw = twins(cfg)
    if tw:
        outs = [p["twin"].format(backbone=b) for b in tw]
        mets = [p["twin_metrics"].format(backbone=b) for b in tw]
        stages["twins"] = {
            "cmd": f"{snake} -- {' '.join(outs + mets)}",
            "deps": [config_file, "Snakefile", "workflow/rules/backbone.smk",
                     *code_deps(["data_jobs", "twin_jobs"])],
            "params": [{config_file: ["backbones", "pretrain", "reduction", "world"]}],
            "outs": [{p["tokenizer"]: {"persist": True}}] + [{o: {"persist": True}} for o in outs],
            "metrics": [{m: {"persist": True}} for m in mets],
        }
    root = Path(cfg["out_root"])
    # the tables from the evaluations; those from the efficiency measurements get their own stage
    built = tables(cfg)
    measured = [t for t in built if TABLES[t].measured]
    reported = [t for t in built if t not in measured]
    files = all_tables(cfg, reported)
    outputs = {t: table_outputs(cfg, t) for t in reported}
    metrics = [o["json"] for o in outputs.values() if "json" in o]  # headline numbers
    plots = [f for f in files if f.endswith(".png")]
    stages["table2"] = {
        "cmd": f"{snake} -- all_evaluations {' '.join(files)}",  # rule all_evaluations: every eval job
        "deps": [config_file, "Snakefile", "workflow/rules/common.smk", "workflow/rules/eval.smk",
                 "workflow/rules/train.smk", "workflow/rules/report.smk",
                 *code_deps(["data_jobs", "train_job", "evaluate", *dict.fromkeys(TABLES[t].job for t in reported)])]
        # the students' data, by its fingerprint (content hash, committed): a changed LT-14K reruns
        # this stage, and `dvc repro --dry` works on a fresh clone (DVC cannot hash an upstream
        # output that is not there yet, treeverse/dvc#9021)
        + ([p["lt14k_metrics"]] if any(METHODS[m].kind == "trained" for m in cfg["grid"]["methods"]) else [])
        + [model_path(cfg, b) for b in evaluated_backbones(cfg) if b in tw or b in released(cfg)]
        + ([cfg["efficiency"]["analytic_config"]] if cfg.get("efficiency") else [])  # Figure 1 right
        + [e["path"] for e in external_students(cfg).values()],  # DVC hashes their content
        "params": [{config_file: ["evaluation", "grid", "seeds", "reduction", "world"]
                    + [k for k in ("training", "rl", "epic", "llava_mini", "learnable_merge", "studies", "efficiency",
                                   "external_students") if k in cfg]}],
        "outs": [{str(root / "data" / "bench"): {"persist": True}},
                 {str(root / "models" / "students"): {"persist": True}},
                 {str(root / "metrics" / "train"): {"persist": True}},
                 {str(root / "results" / "eval"): {"persist": True}}]
        + [{t: {"persist": True}} for t in files if t not in metrics + plots],
        "metrics": [{m: {"persist": True}} for m in metrics],  # numbers only (ltopd.report.dvc_metrics)
        # the figures as image plots: `dvc plots show` needs no network for them (a Vega plot's page
        # loads its library from a CDN) and they colour by method, as the paper's figures do
        "plots": [{t: {"persist": True}} for t in plots],
    }
    if measured:
        backbones = efficiency_backbones(cfg)
        stages["table5"] = {
            "cmd": f"{snake} -- {' '.join(all_tables(cfg, measured))}",
            "deps": [config_file, "Snakefile", "workflow/rules/efficiency.smk",
                     *code_deps(list(dict.fromkeys(TABLES[t].job for t in measured))),
                     cfg["efficiency"]["analytic_config"]]
            + [model_path(cfg, b) for b in backbones if b in tw or b in released(cfg)]
            # the Pareto figure: Figure 1 right's retain (the table2 stage's output) on measured costs;
            # it depends on what the table2 stage depends on, not on that stage's output file, which
            # DVC cannot hash on a fresh clone's dry run (treeverse/dvc#9021)
            + ([d for d in stages["table2"]["deps"]
                if d != config_file and d not in [e["path"] for e in external_students(cfg).values()]]
               + [model_path(cfg, pb) for pb in [pareto_backbone(cfg)]
                  if pb not in backbones and (pb in tw or pb in released(cfg))]
               if "figure_pareto" in measured else []),
            "params": [{config_file: list(dict.fromkeys(
                ["efficiency", "reduction", "grid", "training"]
                + (stages["table2"]["params"][0][config_file] if "figure_pareto" in measured else [])))}],
            "outs": [{str(root / "results" / "efficiency"): {"persist": True}}]
            + [{t: {"persist": True}} for t in all_tables(cfg, measured) if not t.endswith(".png")],
        }
        if shown := [t for t in all_tables(cfg, measured) if t.endswith(".png")]:  # image plots, as Table 2's
            stages["table5"]["plots"] = [{t: {"persist": True}} for t in shown]
    return stages
