"""The gate of a benchmark: does the full-token model beat the out-of-sample question-only
baseline by a clear margin? Used by Table 2 (which benchmarks enter the average retain ratio)
and by the released twins' manifests (what each twin can do)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ltopd.report import stats

GATE_SE = 3.0  # full tokens must beat the out-of-sample question-only baseline by this many SEs
CROSS_FIT_FOLDS = 5


def question_only(rows: Sequence[dict], benchmark: str, fit: Sequence[dict] | None = None,
                  k: int = CROSS_FIT_FOLDS, seed: int = 0) -> tuple[list[dict], str]:
    """(``rows`` with the out-of-sample blind guess as prediction, how it was fitted): on
    ``fit`` (another record set of the benchmark), else K-fold cross-fitted on ``rows``, folds by
    resampling unit (an MME pair, an MMBench group stays in one fold)."""
    from ltopd.bench.suites.baseline import blind_predictions_oos, cross_fit_predictions, with_predictions

    if fit is not None:
        return with_predictions(rows, blind_predictions_oos(rows, fit)), f"{len(fit)} records of another seed"
    groups = [stats.unit_key(benchmark, r) for r in rows]
    preds = cross_fit_predictions(rows, k, seed, groups)
    return with_predictions(rows, preds), f"{k}-fold cross-fit on the scored records"


@dataclass(frozen=True)
class Gate:
    """Full tokens vs the out-of-sample question-only baseline on one benchmark's items, and,
    when it was evaluated, vs the blind twin (the same model asked without the images: it keeps
    the model's own text skills, which a fitted answer prior lacks). Both must be cleared."""

    benchmark: str
    seed: int
    full: float
    qo: float
    diff: stats.Interval  # full - QO: (diff, lo, hi, se)
    need: float           # required margin in SEs
    blind: Gate | None = None  # full vs the blind twin (its `qo` is the blind score)

    @property
    def margin(self) -> float:
        """(full - QO) in standard errors (+-inf for a nonzero difference with SE 0)."""
        d, se = self.diff.estimate, self.diff.se
        if se > 0:
            return d / se
        return math.copysign(math.inf, d) if d else 0.0

    @property
    def passed(self) -> bool:
        return self.margin >= self.need and (self.blind is None or self.blind.passed)

    @property
    def verdict(self) -> str:
        """'pass (+7.0 SE)', with the blind twin's margin where it was evaluated."""
        blind = f"; blind {self.blind.margin:+.1f} SE" if self.blind else ""
        return f"{'pass' if self.passed else 'fail'} ({self.margin:+.1f} SE{blind})"

    def describe(self) -> str:
        blind = (f"; vs blind {self.blind.qo:.1f}: {self.blind.margin:+.1f} SE (diff {self.blind.diff.estimate:+.1f}, "
                 f"SE {self.blind.diff.se:.2f})" if self.blind else "")
        return (f"{self.benchmark} {self.margin:+.1f} SE (full {self.full:.1f} vs QO {self.qo:.1f}, "
                f"diff {self.diff.estimate:+.1f}, SE {self.diff.se:.2f}{blind})")


def gate(full_rows: Sequence[dict], qo_rows: Sequence[dict], benchmark: str, seed: int = 0,
         n_boot: int = 1000, boot_seed: int = 0, need: float = GATE_SE,
         blind_rows: Sequence[dict] | None = None) -> Gate:
    """The gate of ``benchmark``: paired bootstrap of full - QO over its units, and of full -
    blind twin when ``blind_rows`` (the same items' predictions without images) are given."""
    from ltopd.bench.scoring import score

    diff = stats.paired_diff_ci(full_rows, qo_rows, benchmark, n_boot, boot_seed)
    blind = None if blind_rows is None else gate(full_rows, blind_rows, benchmark, seed, n_boot, boot_seed, need)
    return Gate(benchmark, seed, score(benchmark, list(full_rows))["score"], score(benchmark, list(qo_rows))["score"],
                diff, need, blind)
