"""The gate of a benchmark: does the full-token model beat the question-only baseline (the better
of an out-of-sample answer prior and a uniform guess) by a clear margin, and, where it was
evaluated, the blind twin too? Used by Table 2 (which benchmarks enter the average retain ratio)
and by the released twins' manifests (what each twin can do, on its own gate items:
ltopd.twins.build.twin_gates)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ltopd.stats import bootstrap

GATE_SE = 3.0  # full tokens must beat each baseline by this many SEs
CROSS_FIT_FOLDS = 5
CHOICE_BOOT = 200  # bootstrap replicates behind the choice between the two question-only guessers


def question_only(rows: Sequence[dict], benchmark: str, fit: Sequence[dict] | None = None,
                  k: int = CROSS_FIT_FOLDS, seed: int = 0) -> tuple[list[dict], str]:
    """(``rows`` with the question-only baseline's predictions, how it was made): of two guessers
    that never see an image, the uniform guess where it is clearly the better (by 2 SE) on ``fit``
    where given (out of sample), else on ``rows``; the prior otherwise

    * the blind guess, the most frequent answer of the item's group: fitted on ``fit`` (another
      record set of the benchmark), else K-fold cross-fitted on ``rows``, folds by resampling
      unit (an MME pair, an MMBench group stays in one fold);
    * :func:`chance_predictions`, a seeded uniform guess among the option letters or yes / no,
      which beats any constant answer where a metric scores pairs (MME's acc+)."""
    from ltopd.bench.suites.baseline import blind_predictions_oos, cross_fit_predictions, with_predictions

    def cross_fit(records: Sequence[dict]) -> list[str]:
        return cross_fit_predictions(records, k, seed, [bootstrap.unit_key(benchmark, r) for r in records])

    def clearly_better(records: Sequence[dict], chance: list[str], prior: list[str]) -> bool:
        """The coin beats the prior by 2 paired-bootstrap SEs, not by the luck of one draw."""
        if not records:  # nothing to choose on: the prior (its fallbacks answer an empty fit set)
            return False
        d = bootstrap.paired_diff_ci(with_predictions(records, chance), with_predictions(records, prior), benchmark,
                                 CHOICE_BOOT, seed)
        return d.estimate > 2 * d.se

    if fit is not None:
        mode, how = blind_predictions_oos(rows, fit), f"{len(fit)} records of another seed"
    else:
        mode, how = cross_fit(rows), f"{k}-fold cross-fit on the scored records"
    chance = chance_predictions(rows, mode, benchmark, seed)
    if fit is not None:  # chosen on the fit records, the prior out of sample there too (in sample: optimistic)
        fit_prior = cross_fit(fit)
        use_chance = clearly_better(fit, chance_predictions(fit, fit_prior, benchmark, seed), fit_prior)
    else:
        use_chance = clearly_better(rows, chance, mode)
    if use_chance:
        return (with_predictions(rows, chance),
                f"uniform guess (seed {seed}); it beat the most frequent answer, fitted on {how}")
    return with_predictions(rows, mode), how


def chance_predictions(rows: Sequence[dict], prior: Sequence[str], benchmark: str, seed: int = 0) -> list[str]:
    """A seeded uniform guess per item: one of its option letters, or yes / no where the prior's
    guess is yes or no (the kind of question its template asks, known without its answer; without
    templates the prior is one answer for all, and open questions may get a coin too); the
    prior's guess for open questions. On MME's twin a coin scores about 525 of 1,400 (acc 50 and acc+ 25 per
    category), a constant answer 350."""
    rng = np.random.default_rng([seed, zlib.crc32(benchmark.encode())])
    out = []
    for r, guess in zip(rows, prior, strict=True):
        if r.get("options"):
            out.append(chr(ord("A") + int(rng.integers(len(r["options"])))))
        elif str(guess).strip().lower() in ("yes", "no"):
            out.append(("yes", "no")[int(rng.integers(2))])
        else:
            out.append(guess)
    return out


@dataclass(frozen=True)
class Gate:
    """Full tokens vs the out-of-sample question-only baseline on one benchmark's items, and,
    when it was evaluated, vs the blind twin (the same model asked without the images: it keeps
    the model's own text skills, which a fitted answer prior lacks). Both must be cleared."""

    benchmark: str
    seed: int
    full: float
    qo: float
    diff: bootstrap.Interval  # full - QO: (diff, lo, hi, se)
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
    def binding_margin(self) -> float:
        """The smaller of the two margins: the one that decides the gate."""
        return min(self.margin, self.blind.margin) if self.blind else self.margin

    @property
    def passed(self) -> bool:
        return self.binding_margin >= self.need

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

    diff = bootstrap.paired_diff_ci(full_rows, qo_rows, benchmark, n_boot, boot_seed)
    blind = None if blind_rows is None else gate(full_rows, blind_rows, benchmark, seed, n_boot, boot_seed, need)
    return Gate(benchmark, seed, score(benchmark, list(full_rows))["score"], score(benchmark, list(qo_rows))["score"],
                diff, need, blind)
