"""Every name the pipeline knows, declared once: methods, benchmarks, tables and figures.

The experiment grid, the registries of suites and scorers, the tables' row order and labels, and
the profiles' validation all read these declarations; nothing here imports the rest of the
package, so it sits at the bottom of the import graph. Implementations are named by module path
("module:function", resolved when first used), so a declaration costs no import.

Adding a selector, a method, a benchmark or a table: docs/design.md lists the files it touches.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

MethodKind = Literal["reference", "selector", "resize", "trained"]


@dataclass(frozen=True)
class Method:
    """A row of the tables. ``kind``: "reference" is evaluated once, unreduced (full tokens; with
    ``images`` False, none: the blind twin); "selector" reduces at each
    budget of the grid by itself (a registered selector of ltopd.selectors); "resize" runs at each
    budget too, with no selector: the image itself resized to the budget's token count
    (ltopd.models.downsample, VTC-Bench's downsampling control); "trained" trains the
    student at the grid's smallest budget (ltopd.train.methods.TRAINED holds its recipe) and is
    evaluated there with the profile's ``training.selector``. ``images`` False: the model is asked
    without the items' images (the blind twin, a baseline of the gates, not a point of any
    budget or FLOPs curve)."""

    name: str
    label: str
    kind: MethodKind
    images: bool = True


@dataclass(frozen=True)
class Bootstrap:
    """How a benchmark's official score decomposes for the paired bootstrap (ltopd.stats.bootstrap):
    the resampling ``unit`` ("row"; "mme_pair": an image's two questions, scored together by
    acc+; "mmbench_group": a question's circular rotations, all of which must be right), the
    field naming a row's ``stratum`` (None: one stratum), how the strata ``combine`` ("mean": a
    macro mean, "sum", "size": weighted by stratum size), and whether a unit counts only when
    answered (``answered_only``: MVBench divides by the non-blank predictions)."""

    unit: str = "row"
    stratum: str | None = None
    combine: str = "mean"
    answered_only: bool = False


ROWS = Bootstrap()  # one stratum of rows: the plain accuracy or mean of most benchmarks


@dataclass(frozen=True)
class Benchmark:
    """An evaluation benchmark: its twin's generator and real-data loader (ltopd.bench.suites),
    its official scorer (ltopd.bench.scoring), its label in the tables, its generation cap
    (max new tokens, the closing answer tag included), how its score decomposes for the bootstrap,
    and, for a benchmark whose official parser reads an "<evidence>, so <answer>" reply, what its
    evidence-first answer names (``evidence``: a kind of ltopd.bench.evidence.EVIDENCE_KINDS;
    None: the twin is never taught that style)."""

    name: str
    label: str
    generation_cap: int
    synthetic: str  # "module:function" under ltopd.bench.suites: (n, seed, WorldConfig) -> records
    scorer: str  # "module:function" under ltopd.bench.scoring: records -> metrics
    bootstrap: Bootstrap
    evidence: str | None = None
    # "module:function" under ltopd.bench.suites: the base WorldConfig -> the canvas the twin is
    # drawn on when the profile's world section names none for it (None: the base canvas)
    default_canvas: str | None = None


TableKind = Literal["grid", "ablation", "study", "efficiency", "pareto"]

# The files a table can write (ltopd.grid.table_outputs): results/<name>.csv, .md, .json (DVC
# metrics) and results/figures/<figure_file>.png.
TABLE_OUTPUTS = ("csv", "md", "json", "figure")

# The pipeline job (ltopd.pipeline.<job>) that builds a table of each kind, unless it names its own.
KIND_JOBS: dict[str, str] = {"grid": "table_jobs", "ablation": "table_jobs", "study": "study_jobs",
                             "efficiency": "efficiency_jobs", "pareto": "study_jobs"}


@dataclass(frozen=True)
class Table:
    """A table or figure of the paper. ``grid``: Table 2 (every method and budget of the grid but
    the ablation tables' variants);
    ``ablation``: trained variants at the target budget beside full tokens, built when the grid
    has every one of ``methods``; ``study``: fixed ``methods`` (STUDENT_SELECTOR: the profile's
    training.selector) at the target budget on the backbones and benchmarks of the profile's
    ``studies.<name>``; ``efficiency``: measured and
    analytic cost (Table 5, Figure 1 right), built when the profile has an ``efficiency`` section;
    ``pareto``: Table 2's retain ratios on the costs the latency protocol measured, built when it
    measures Table 2's backbone.
    ``outputs``: the files it writes (of TABLE_OUTPUTS; a figure's are its data and its plot),
    ``figure_file`` its plot's file name where that is not its own, ``job`` the pipeline job that
    builds it (default: its kind's, KIND_JOBS), ``measured`` whether it reads the latency
    protocol's measurements (results/efficiency/): DVC builds it in the stage that measures
    (table5), not in Table 2's."""

    name: str
    title: str
    kind: TableKind
    methods: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ("csv", "md")
    figure_file: str = ""
    job: str = ""
    measured: bool = False

    def __post_init__(self) -> None:
        if stray := [o for o in self.outputs if o not in TABLE_OUTPUTS]:
            raise ValueError(f"table {self.name!r}: outputs {stray}; allowed values: {list(TABLE_OUTPUTS)}")
        if self.kind not in KIND_JOBS:
            raise ValueError(f"table {self.name!r}: kind {self.kind!r}; allowed values: {list(KIND_JOBS)}")
        object.__setattr__(self, "job", self.job or KIND_JOBS[self.kind])

    @property
    def is_figure(self) -> bool:
        """A figure: its data (CSV) and its plot, no markdown table."""
        return "figure" in self.outputs and "md" not in self.outputs


def _index(*items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if item.name in out:
            raise ValueError(f"{item.name!r} is declared twice")
        out[item.name] = item
    return out


# The paper's row order: full tokens, the training-free selectors, then the trained methods with
# LT-OPD after its ablations' baselines (Table 2), then Table 6's RL algorithms.
METHODS: dict[str, Method] = _index(
    Method("full", "Full tokens", "reference"),
    Method("blind", "Blind (no image)", "reference", images=False),
    Method("fastv", "FastV", "selector"),
    Method("divprune", "DivPrune", "selector"),
    Method("dart", "DART", "selector"),
    Method("cdpruner", "CDPruner", "selector"),
    Method("hiprune", "HiPrune", "selector"),
    Method("random", "Random", "selector"),
    Method("uniform", "Uniform", "selector"),
    Method("downsample", "Downsampling (resize)", "resize"),
    Method("sft", "SFT", "trained"),
    Method("sft_curriculum", "SFT + curriculum", "trained"),
    Method("llava_mini", "LLaVA-Mini", "trained"),
    Method("epic", "EPIC", "trained"),
    Method("kd_fixed_prefix", "Curriculum + fixed-prefix JSD (KD)", "trained"),
    Method("opd_no_curriculum", "On-policy JSD, no curriculum", "trained"),
    Method("ltopd", "LT-OPD", "trained"),
    Method("learnable_merge", "LT-OPD + merge", "trained"),  # the authors' later variant (learnable merge)
    Method("ltopd_no_plateau", "LT-OPD, no final plateau", "trained"),
    Method("ltopd_forward_kl", "LT-OPD, forward KL", "trained"),
    Method("ltopd_reverse_kl", "LT-OPD, reverse KL", "trained"),
    Method("ltopd_teacher_ema", "LT-OPD, EMA teacher", "trained"),
    Method("ltopd_trust_region", "LT-OPD, trust-region teacher", "trained"),
    Method("grpo", "GRPO", "trained"),
    Method("gspo", "GSPO", "trained"),
    Method("dapo", "DAPO", "trained"),
)

# Table 2's nine benchmarks, then the multi-image pair of Table 14. Caps: option letters and
# yes/no fit in a few tokens; open words, numbers and dates in 16-32; OCRBench's formulas and
# key-value answers get 64.
BENCHMARKS: dict[str, Benchmark] = _index(
    Benchmark("vstar", "V*Bench", 16, "vstar:synthetic", "vstar:score_vstar", ROWS, evidence="option"),
    Benchmark("hrbench4k", "HR-4K", 16, "hrbench:synthetic", "hrbench:score_hrbench",
              Bootstrap(stratum="cycle_category"), evidence="option", default_canvas="hrbench:large_canvas"),
    Benchmark("gqa", "GQA", 16, "gqa:synthetic", "gqa:score_gqa", ROWS),
    Benchmark("mmmu", "MMMU", 32, "mmmu:synthetic", "mmmu:score_mmmu", ROWS, evidence="option"),
    Benchmark("mmbench", "MMB", 16, "mmbench:synthetic", "mmbench:score_mmbench", Bootstrap("mmbench_group"),
              evidence="option"),
    Benchmark("mme", "MME", 16, "mme:synthetic", "mme:score_mme", Bootstrap("mme_pair", "category", "sum")),
    Benchmark("pope", "POPE", 16, "pope:synthetic", "pope:score_pope", Bootstrap(stratum="split"), evidence="pope"),
    Benchmark("textvqa", "TVQA", 32, "textvqa:synthetic", "textvqa:score_textvqa", ROWS),
    Benchmark("ocrbench", "OCRB", 64, "ocrbench:synthetic", "ocrbench:score_ocrbench", ROWS),
    Benchmark("muirbench", "MuirBench", 16, "multi_image:muirbench", "multi_image:score_muirbench", ROWS,
              evidence="option"),
    Benchmark("mvbench", "MVBench", 16, "multi_image:mvbench", "multi_image:score_mvbench",
              Bootstrap(stratum="task", combine="size", answered_only=True)),
)


def evidence_benchmarks() -> list[str]:
    """The benchmarks whose twins can be taught the evidence-first answer (a profile's stage and
    backbone ``evidence`` lists; the schema's enum of both is this list)."""
    return [b.name for b in BENCHMARKS.values() if b.evidence is not None]


# A study's row of the untrained student: the selector the students train with, evaluated at the
# target budget without training (S_pruned of Figure 4's recovery; CDPruner in the paper). It is no
# method name: the profile's training.selector takes its place (study_methods), so a profile that
# trains with DivPrune compares against DivPrune.
STUDENT_SELECTOR = "<training.selector>"

_RL_STUDY = ("full", STUDENT_SELECTOR, "grpo", "gspo", "dapo", "ltopd")

TABLES: dict[str, Table] = _index(
    Table("table2", "Table 2", "grid", outputs=("csv", "md", "json", "figure"), figure_file="table2_retain_vs_budget"),
    Table("table7", "Table 7: the teacher", "ablation", ("ltopd", "ltopd_trust_region", "ltopd_teacher_ema")),
    Table("table12", "Table 12: the divergence", "ablation", ("ltopd_forward_kl", "ltopd_reverse_kl", "ltopd")),
    Table("appendix_h", "Appendix H: the final 5% plateau", "ablation", ("ltopd_no_plateau", "ltopd")),
    Table("table3", "Table 3: model scales", "study", ("full", STUDENT_SELECTOR, "ltopd")),
    Table("table4", "Table 4: model families", "study", ("full", STUDENT_SELECTOR, "ltopd")),
    Table("table6", "Table 6: RL algorithms vs LT-OPD", "study", _RL_STUDY),
    Table("table14", "Table 14: multi-image benchmarks", "study", ("full", STUDENT_SELECTOR, "epic", "ltopd")),
    Table("figure4", "Figure 4: compression-gap recovery", "study", _RL_STUDY, outputs=("csv", "figure")),
    Table("table5", "Table 5: efficiency", "efficiency", measured=True),
    Table("figure1_right", "Figure 1 (right): FLOPs ratio vs average retain ratio", "efficiency",
          outputs=("csv", "figure"), job="study_jobs"),  # from Table 2's rows and the analytic FLOPs
    Table("figure_pareto", "Average retain ratio vs measured cost, the Pareto front", "pareto",
          outputs=("csv", "figure"), measured=True),  # Table 2's rows on the latency protocol's costs
)


def methods_of_kind(kind: MethodKind) -> list[str]:
    return [m.name for m in METHODS.values() if m.kind == kind]


def tables_of_kind(kind: TableKind) -> list[str]:
    return [t.name for t in TABLES.values() if t.kind == kind]


def ablation_variants() -> frozenset[str]:
    """The methods only an ablation table compares: LT-OPD's variants, each set beside LT-OPD
    itself (Table 2's row). Table 2 leaves them to their tables, so asking for Table 2 does not
    train them."""
    return frozenset(m for t in tables_of_kind("ablation") for m in TABLES[t].methods) - {"ltopd"}


def study_methods(study: str, selector: str | None) -> list[str]:
    """A study's rows in the paper's order, the untrained student's (STUDENT_SELECTOR) being
    ``selector``: the profile's training.selector (ltopd.grid.reduction_defaults)."""
    methods = TABLES[study].methods
    if STUDENT_SELECTOR in methods and selector is None:
        raise ValueError(f"{study}: its untrained-student row is the profile's training.selector, and there is none")
    return [selector if m == STUDENT_SELECTOR else m for m in methods]


# A student trained elsewhere (a profile's ``external_students`` entry) is a row of its own, named
# "external-<entry>": it has no recipe here, and is evaluated as a trained student is, with the
# selector, budget and floor its entry says it was trained for (ltopd.grid.external_students).
EXTERNAL_PREFIX = "external-"


def external_method(entry: str) -> str:
    """The row (method) name of the profile's external student ``entry``."""
    return EXTERNAL_PREFIX + entry


def method(name: str) -> Method:
    """A declared method, or an external student's row: a trained student's kind (one model of its
    own, reduced with the selector it was trained with), labelled by its entry."""
    if name.startswith(EXTERNAL_PREFIX) and len(name) > len(EXTERNAL_PREFIX):
        return Method(name, f"{name.removeprefix(EXTERNAL_PREFIX)} (external)", "trained")
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; allowed values: {list(METHODS)}")
    return METHODS[name]


_method_entry = method  # for eval_setting, whose argument is named ``method``


def benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; allowed values: {list(BENCHMARKS)}")
    return BENCHMARKS[name]


def resolve(package: str, ref: str) -> Callable[..., Any]:
    """The function a "module:function" reference names under ``package``."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(f"{package}.{module}"), name)


def eval_setting(method: str, budget: float, train_selector: str | None = None) -> tuple[float, str | None]:
    """(keep ratio, selector) an evaluation of ``method`` at ``budget`` runs with: the reference
    keeps every token (``train_selector`` is then unused); a selector keeps ``budget`` of them
    itself; the downsampling control ("resize") keeps ``budget`` of them by resizing the image,
    with no selector (ltopd.models.downsample); a trained student is evaluated with the selector
    it was trained with (the profile's ``training.selector``: CDPruner in the paper), which its
    caller must pass."""
    kind = _method_entry(method).kind  # externals too; an unknown name is refused there
    if not 0 < budget <= 1:
        raise ValueError(f"budget must be in (0, 1], got {budget!r}")
    if kind == "reference":
        return 1.0, train_selector  # no selector runs at ratio 1
    if kind == "selector":
        return float(budget), method
    if kind == "resize":
        return float(budget), None
    if train_selector is None:
        raise ValueError(f"{method} is a trained method: give the selector it was trained with (training.selector)")
    return float(budget), train_selector
