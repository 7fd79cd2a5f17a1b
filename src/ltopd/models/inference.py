"""Greedy answers of a backbone at a visual-token budget (the evaluation protocol, Appendix D)."""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.prompt import extract_answer
from ltopd.progress import bar as progress_bar


@torch.no_grad()
def predict(backbone: Backbone, records: Sequence[Mapping[str, Any]], ratio: float = 1.0,
            selector: str = "cdpruner", floor: int = 1, batch_size: int = 16, max_new_tokens: int = 32,
            seed: int = 0, progress: bool = False, desc: str = "predict") -> list[str]:
    """Raw generated text per record: greedy, images before text, the empty-think + open-answer
    prefix, stop at '</answer>' or after `max_new_tokens`; visual tokens reduced to `ratio`
    (per image, with `floor`) by `selector`; ratio 1 keeps every token."""
    backbone.model.eval()
    out: list[str] = []
    with progress_bar(len(records), desc, "q", progress) as bar:
        for start in range(0, len(records), batch_size):
            chunk = list(records[start:start + batch_size])
            batch = backbone.encode(chunk)
            selection = None if ratio >= 1.0 else backbone.select(batch, ratio, selector, floor=floor, seed=seed + start)
            ids = backbone.generate(batch, selection, do_sample=False, max_new_tokens=max_new_tokens)
            out += backbone.tokenizer.batch_decode(ids, skip_special_tokens=False)
            bar.update(len(chunk))
    return out


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
