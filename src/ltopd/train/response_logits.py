"""Teacher and student logits on the same response tokens: the shared core of every trainer
(not the benchmarks' official scores: ltopd.bench.scoring).

``encode(records, responses)`` right-aligns each response after its left-padded prompt, and the
reduction hook keeps that alignment (it re-left-pads after dropping visual tokens), so the last
T columns of the shifted logits line up response token by response token for any selection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ltopd.models.backbone import Backbone, EncodedBatch
from ltopd.models.hook import Selection

IGNORE_INDEX = -100


@dataclass
class ResponseLogits:
    logits: Tensor  # (B, T, V): logits[b, j] is the distribution of response token j of row b
    ids: Tensor  # (B, T) the response tokens (0 where masked)
    mask: Tensor  # (B, T) True on real response tokens


def response_view(logits: Tensor, labels: Tensor, width: int) -> ResponseLogits:
    """The last ``width`` next-token predictions of a forward (logits (B, L, V), labels (B, L)
    unshifted with IGNORE_INDEX outside the responses)."""
    lg = logits[:, :-1][:, -width:]
    lab = labels[:, 1:][:, -width:]
    mask = lab != IGNORE_INDEX
    return ResponseLogits(lg, lab.clamp_min(0), mask)


def encode_responses(backbone: Backbone, records: Sequence[Mapping[str, Any]],
                     responses: Sequence[Sequence[int] | str]) -> tuple[EncodedBatch, int]:
    batch = backbone.encode(records, list(responses))
    width = int(batch.response_mask.sum(1).max())
    return batch, width


def response_logits(backbone: Backbone, batch: EncodedBatch, width: int, selection: Selection | None,
                    features: Sequence[Tensor] | None = None) -> ResponseLogits:
    """Response-token logits of ``backbone`` on ``batch`` with ``selection`` (None: every visual
    token). ``features``: the batch's post-merger features per image, already computed (from
    ltopd.train.features; None: the forward runs the vision tower). Gradients flow when grad is
    enabled.

    Logits only where the loss reads them: the last ``width + 1`` positions (``logits_to_keep``),
    and no model-side loss over the sequence. The responses end every row before pruning and
    after it (only visual placeholders are dropped, all before the response), so the batch's own
    labels mark the same response tokens in that window."""
    out, _ = backbone.forward(batch, selection, features=features, logits_to_keep=width + 1)
    return response_view(out.logits, batch.labels, width)


@torch.no_grad()
def teacher_response_logits(teacher: Backbone, batch: EncodedBatch, width: int,
                            features: Sequence[Tensor] | None = None) -> ResponseLogits:
    """The dense teacher's view (eval mode, no gradients)."""
    teacher.model.eval()
    return response_logits(teacher, batch, width, None, features)
