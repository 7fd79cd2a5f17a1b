"""Official-style scorers, one per benchmark: ``score(records) -> metrics``.

Each record is a benchmark record (design.md) plus ``prediction`` (raw model text or None).
Every scorer strips a think block and answer tags first (:func:`strip_answer_tags`) and returns
``score`` (the paper's scale), ``n``, ``n_unparsed`` and its sub-metrics; the fields each reads
are listed in its module docstring.
"""

from __future__ import annotations

from collections.abc import Callable

from .checks import check_predictions
from .common import strip_answer_tags
from .gqa import score_gqa
from .hrbench import score_hrbench
from .mmbench import score_mmbench
from .mme import score_mme
from .mmmu import score_mmmu
from .multi_image import score_muirbench, score_mvbench
from .ocrbench import score_ocrbench
from .pope import score_pope
from .textvqa import score_textvqa
from .vstar import score_vstar

SCORERS: dict[str, Callable[[list[dict]], dict]] = {
    "vstar": score_vstar,
    "hrbench4k": score_hrbench,
    "mmmu": score_mmmu,
    "mmbench": score_mmbench,
    "mme": score_mme,
    "pope": score_pope,
    "gqa": score_gqa,
    "textvqa": score_textvqa,
    "ocrbench": score_ocrbench,
    "muirbench": score_muirbench,
    "mvbench": score_mvbench,
}


def score(benchmark: str, records: list[dict]) -> dict:
    """Metrics of ``records`` under ``benchmark``'s official scorer."""
    if benchmark not in SCORERS:
        raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(SCORERS))}")
    return SCORERS[benchmark](records)


__all__ = ["SCORERS", "check_predictions", "score", "strip_answer_tags"]
