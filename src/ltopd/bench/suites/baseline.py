"""The question-only ("blind") baseline of a record set, in its benchmark's own metric.

The guesser never looks at an image: for each record it answers the most frequent reference
answer of the record's group, the group being (task, ``meta["template"]``, has options). Two fits:

* in sample (:func:`blind_predictions`, :func:`question_only_score`): fitted on the very records it
  scores -- an optimistic bound (it memorises each template's answer distribution; e.g. OCRBench's
  twin scores about 106 in sample and 12.5 out of sample), kept for the suite tests;
* out of sample (:func:`blind_predictions_oos`, :func:`question_only_score_oos`): fitted on a
  *fit* record set of the same benchmark -- for a synthetic twin, its records at another
  evaluation seed (the pipeline's fit seed, ``ltopd.grid.baseline_seed``) -- and applied to the
  scored records. A real benchmark has one fixed record set, so :func:`cross_fit_predictions`
  splits it into K folds and answers each fold with a guesser fitted on the other folds (also out
  of sample); records sharing a group key (an MME image pair, an MMBench circular group) stay in
  one fold.

Out of sample, a record's group may be absent from the fit set; the guesser then falls back to
the most frequent answer of the same (task, has options), then of all fit records with / without
options, and at last to "A" (records with options) or "yes". A multiple-choice guess that is not
one of the record's option letters falls back to "A". Ties between equally frequent answers go to
the alphabetically first, so the guesser does not depend on the fit records' order.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ltopd.bench.scoring import score


def _meta(r: dict) -> dict:
    meta = r.get("meta")
    if isinstance(meta, dict):
        return meta
    return json.loads(meta) if meta else {}


def _key(r: dict) -> tuple[str, str, bool]:
    return str(r.get("task", "")), str(_meta(r).get("template", "")), bool(r.get("options"))


def blind_predictions(records: list[dict]) -> list[str]:
    """For each record, the most frequent answer of its (task, template, has options) group,
    fitted on the records themselves: the best image-blind guesser (an optimistic bound)."""
    groups: dict[tuple, Counter] = defaultdict(Counter)
    for r in records:
        groups[_key(r)][r["answer"]] += 1
    return [groups[_key(r)].most_common(1)[0][0] for r in records]


def question_only_score(name: str, records: list[dict]) -> float:
    """The official ``score`` of the in-sample blind guesser's predictions on ``records``."""
    preds = blind_predictions(records)
    return score(name, [dict(r, prediction=p) for r, p in zip(records, preds)])["score"]


def _top(counts: Counter) -> str:
    """The most frequent answer; ties to the alphabetically first."""
    return min(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[0]


@dataclass(frozen=True)
class BlindGuesser:
    """Most frequent answers of a fit set, by group and by the fallback levels."""

    by_group: dict[tuple[str, str, bool], str]
    by_task: dict[tuple[str, bool], str]
    by_kind: dict[bool, str]

    def guess(self, record: dict) -> str:
        task, template, has_options = _key(record)
        answer = (self.by_group.get((task, template, has_options)) or self.by_task.get((task, has_options))
                  or self.by_kind.get(has_options) or ("A" if has_options else "yes"))
        if has_options and len(answer) == 1 and answer.isalpha():
            letters = [chr(ord("A") + i) for i in range(len(record["options"]))]
            if answer.upper() not in letters:
                return "A"
        return answer


def fit_blind(records: Sequence[dict]) -> BlindGuesser:
    """The blind guesser of ``records`` (may be empty: every guess is then the last fallback)."""
    group: dict[tuple, Counter] = defaultdict(Counter)
    task: dict[tuple, Counter] = defaultdict(Counter)
    kind: dict[bool, Counter] = defaultdict(Counter)
    for r in records:
        t, template, has_options = _key(r)
        answer = str(r["answer"])
        group[(t, template, has_options)][answer] += 1
        task[(t, has_options)][answer] += 1
        kind[has_options][answer] += 1
    return BlindGuesser({k: _top(c) for k, c in group.items()}, {k: _top(c) for k, c in task.items()},
                        {k: _top(c) for k, c in kind.items()})


def blind_predictions_oos(records: Sequence[dict], fit: Sequence[dict]) -> list[str]:
    """For each of ``records``, the blind guess of the guesser fitted on ``fit`` (another record
    set of the same benchmark) -- out of sample when ``fit`` shares no item with ``records``."""
    guesser = fit_blind(fit)
    return [guesser.guess(r) for r in records]


def cross_fit_predictions(records: Sequence[dict], k: int = 5, seed: int = 0,
                          groups: Sequence[Hashable] | None = None) -> list[str]:
    """K-fold cross-fitted blind guesses: the distinct ``groups`` (default: each record its own)
    are shuffled with ``seed`` and dealt into ``min(k, #groups)`` folds; each record is guessed
    by the guesser fitted on the records of the other folds."""
    if k < 2:
        raise ValueError(f"cross-fitting needs k >= 2 folds, got {k}")
    records = list(records)
    groups = list(groups) if groups is not None else [("record", i) for i in range(len(records))]
    if len(groups) != len(records):
        raise ValueError(f"{len(groups)} group keys for {len(records)} records")
    distinct = list(dict.fromkeys(groups))
    order = np.random.default_rng(seed).permutation(len(distinct))
    n_folds = max(1, min(k, len(distinct)))
    fold_of = {distinct[j]: rank % n_folds for rank, j in enumerate(order)}
    folds = [fold_of[g] for g in groups]
    out: list[str] = [""] * len(records)
    for f in range(n_folds):
        guesser = fit_blind([r for r, g in zip(records, folds) if g != f])
        for i, (r, g) in enumerate(zip(records, folds)):
            if g == f:
                out[i] = guesser.guess(r)
    return out


def with_predictions(records: Sequence[dict], predictions: Sequence[str]) -> list[dict]:
    """``records`` as prediction rows (each a copy with its ``prediction``)."""
    if len(records) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions for {len(records)} records")
    return [dict(r, prediction=p) for r, p in zip(records, predictions)]


def question_only_score_oos(name: str, records: Sequence[dict], fit: Sequence[dict] | None = None,
                            k: int = 5, seed: int = 0, groups: Sequence[Hashable] | None = None) -> float:
    """The official ``score`` on ``records`` of the out-of-sample blind guesser: fitted on
    ``fit``, or (``fit`` None, a real benchmark) K-fold cross-fitted on ``records`` themselves."""
    preds = (blind_predictions_oos(records, fit) if fit is not None
             else cross_fit_predictions(records, k, seed, groups))
    return score(name, with_predictions(records, preds))["score"]


def load_fit_records(path: str | Path) -> list[dict[str, Any]]:
    """The records `ltopd build-bench` saved at ``path``, without their images (the blind
    guesser reads task, meta, options and answer only)."""
    import datasets

    path = Path(path)
    if not (path / "dataset_info.json").is_file():
        raise FileNotFoundError(f"{path}: not a saved benchmark (no dataset_info.json); "
                                f"build it with `ltopd build-bench`")
    ds = datasets.load_from_disk(str(path))
    keep = [c for c in ("id", "task", "meta", "options", "answer") if c in ds.column_names]
    return list(ds.select_columns(keep))
