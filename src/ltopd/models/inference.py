"""Greedy answers of a backbone at visual-token budgets (the evaluation protocol, Appendix D)."""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.hook import choose
from ltopd.models.prompt import extract_answer
from ltopd.progress import bar as progress_bar
from ltopd.selectors import requirements

Setting = tuple[float, str | None]  # (keep ratio, selector); ratio 1 keeps every token (no selector runs)


@torch.no_grad()
def predict_settings(backbone: Backbone, records: Sequence[Mapping[str, Any]], settings: Sequence[Setting],
                     floor: int, batch_size: int = 16, max_new_tokens: int = 32,
                     seed: int = 0, progress: bool = False, desc: str = "predict",
                     counts: list[list[int]] | None = None) -> list[list[str]]:
    """Raw generated text per setting and record: greedy, images before text, the empty-think +
    open-answer prefix, stop at '</answer>' or after `max_new_tokens`; each setting's visual
    tokens reduced to its ratio (per image, with `floor`) by its selector. `counts` (one
    ``[kept, total]`` per setting) accumulates the visual tokens each setting kept and had.

    Each batch is encoded and its images run through the vision tower once; every setting
    selects from and generates with those features, so n settings cost one vision pass, not 2n.
    The batches, the selectors' seeds and the numbers are those of one setting evaluated alone."""
    backbone.model.eval()
    if counts is not None and len(counts) != len(settings):
        raise ValueError(f"counts: one [kept, total] per setting ({len(settings)}), got {len(counts)}")
    out: list[list[str]] = [[] for _ in settings]
    reduced = [s for r, s in settings if r < 1.0]
    needs = frozenset().union(*(requirements(s) for s in reduced)) if reduced else frozenset()
    with progress_bar(len(records) * len(settings), desc, "q", progress) as bar:
        for start in range(0, len(records), batch_size):
            chunk = list(records[start:start + batch_size])
            batch = backbone.encode(chunk)
            features = backbone.image_features(batch)
            inputs = backbone.selection_inputs(batch, features, needs, seed + start) if reduced else None
            for i, (texts, (ratio, selector)) in enumerate(zip(out, settings)):
                selection = backbone.full_selection(batch) if ratio >= 1.0 else choose(inputs, ratio, selector, floor)
                if counts is not None:
                    counts[i][0] += sum(int(k.numel()) for k in selection.kept)
                    counts[i][1] += sum(selection.n_tokens)
                ids = backbone.generate(batch, selection, features, do_sample=False, max_new_tokens=max_new_tokens)
                texts += backbone.tokenizer.batch_decode(ids, skip_special_tokens=False)
                bar.update(len(chunk))
    return out


def predict(backbone: Backbone, records: Sequence[Mapping[str, Any]], ratio: float,
            selector: str | None, floor: int, batch_size: int = 16, max_new_tokens: int = 32,
            seed: int = 0, progress: bool = False, desc: str = "predict") -> list[str]:
    """`predict_settings` for one (ratio, selector)."""
    return predict_settings(backbone, records, [(ratio, selector)], floor, batch_size, max_new_tokens, seed,
                            progress, desc)[0]


def normalise(text: str) -> str:
    """Lowercase, strip punctuation at the ends and collapse spaces (short-answer exact match)."""
    return re.sub(r"\s+", " ", text.strip().lower()).strip(" .,!?;:\"'")


def answer_accuracy(records: Sequence[Mapping[str, Any]], generations: Sequence[str]) -> dict[str, float]:
    """Exact match of the extracted answer with the record's short answer, overall and per task."""
    hits: dict[str, list[int]] = defaultdict(list)
    for rec, gen in zip(records, generations, strict=True):
        ok = int(normalise(extract_answer(gen.split("<|im_end|>")[0])) == normalise(str(rec["answer"])))
        hits["all"].append(ok)
        hits[f"task_{rec.get('task', 'unknown')}"].append(ok)
    return {k: sum(v) / len(v) for k, v in sorted(hits.items())}
