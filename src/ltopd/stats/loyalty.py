"""Loyalty to the full-token model (EffiVLM-Bench) and the answer flips behind it.

Loyalty: the share of items on which a reduced model gives the same answer as the full-token
model on the same item -- the answer as the benchmark's official scorer reads it
(ltopd.bench.scoring.readings), so "B" and "(B) blue" agree. Flips (the instance-level view of
"Accuracy is not all you need", Dutta et al. 2024): items right with full tokens and wrong
reduced (right -> wrong), and the reverse. A retain ratio near 100% can hide many flips in both
directions; loyalty and the flips show them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ltopd.bench.scoring.readings import Reading, read


@dataclass(frozen=True)
class Loyalty:
    """Counts over ``n`` paired items; the shares are percentages of ``n`` (NaN when n is 0)."""

    n: int
    same: int
    right_to_wrong: int
    wrong_to_right: int

    def _pct(self, count: int) -> float:
        return 100.0 * count / self.n if self.n else float("nan")

    @property
    def share(self) -> float:
        return self._pct(self.same)

    @property
    def right_to_wrong_pct(self) -> float:
        return self._pct(self.right_to_wrong)

    @property
    def wrong_to_right_pct(self) -> float:
        return self._pct(self.wrong_to_right)

    def __add__(self, other: Loyalty) -> Loyalty:
        return Loyalty(self.n + other.n, self.same + other.same, self.right_to_wrong + other.right_to_wrong,
                       self.wrong_to_right + other.wrong_to_right)


NONE = Loyalty(0, 0, 0, 0)


def loyalty(full: Sequence[Reading], reduced: Sequence[Reading]) -> Loyalty:
    """Loyalty of ``reduced`` to ``full``, the two readings of the same items in the same order."""
    if len(full) != len(reduced):
        raise ValueError(f"loyalty pairs items: {len(full)} full-token readings but {len(reduced)} reduced")
    return Loyalty(n=len(full), same=sum(f.answer == r.answer for f, r in zip(full, reduced)),
                   right_to_wrong=sum(f.correct and not r.correct for f, r in zip(full, reduced)),
                   wrong_to_right=sum(r.correct and not f.correct for f, r in zip(full, reduced)))


def loyalty_of_rows(benchmark: str, full_rows: Sequence[Mapping], reduced_rows: Sequence[Mapping]) -> Loyalty:
    """:func:`loyalty` of two prediction files' rows (``ltopd evaluate``) of one benchmark and
    record set, paired by item id; both must hold the same ids."""
    full = {str(r["id"]): r for r in full_rows}
    reduced = {str(r["id"]): r for r in reduced_rows}
    if full.keys() != reduced.keys() or len(full) != len(full_rows) or len(reduced) != len(reduced_rows):
        only_full, only_reduced = sorted(full.keys() - reduced.keys()), sorted(reduced.keys() - full.keys())
        raise ValueError(f"{benchmark}: loyalty pairs the same items; ids only with full tokens: {only_full[:5]}, "
                         f"only reduced: {only_reduced[:5]} (or an id repeated)")
    ids = sorted(full)
    return loyalty([read(benchmark, dict(full[i])) for i in ids], [read(benchmark, dict(reduced[i])) for i in ids])


def pooled(parts: Iterable[Loyalty]) -> Loyalty:
    """The counts of several benchmarks or seeds together (shares over all their items)."""
    return sum(parts, NONE)
