"""The vision tower once per update: the post-merger features of an update's distinct images,
shared by every pass that reads them (rollout, selection, teacher and student scoring).

An LT-OPD update of 8 questions x 4 rollouts reads 32 image copies of 8 distinct images; without
sharing, the student's tower ran over all 32 in selection, again in generation and again in
scoring, and the teacher's once more. Each image goes through a tower independently of the other
images in its batch, so indexing one pass over the distinct images gives the same features.

The student's features carry gradient to its vision tower. Scoring microbatches read detached
leaves; ``backward()`` then sends the gradient they accumulated through the tower once, which
equals backpropagating through the tower in every microbatch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ltopd.models.backbone import Backbone


@dataclass(frozen=True)
class ImageFeatures:
    """Post-merger features of each distinct record's images (records in update order)."""

    per_record: tuple[tuple[Tensor, ...], ...]

    @classmethod
    def of(cls, backbone: Backbone, records: Sequence[Mapping[str, Any]]) -> ImageFeatures:
        """One tower pass over ``records``' images (differentiable when grad is enabled)."""
        it = iter(backbone.image_features(backbone.encode(records)))
        return cls(tuple(tuple(next(it) for _ in (r.get("images") or [])) for r in records))

    def rows(self, index: Sequence[int]) -> tuple[Tensor, ...]:
        """Features per image of the rows ``index`` (row j holds record ``index[j]``), in the
        order a batch of those rows lists its images."""
        return tuple(f for i in index for f in self.per_record[i])

    def subset(self, index: Sequence[int]) -> ImageFeatures:
        """The features of records ``index`` (a sub-batch of the same update)."""
        return ImageFeatures(tuple(self.per_record[i] for i in index))

    def detached(self) -> ImageFeatures:
        return ImageFeatures(tuple(tuple(f.detach() for f in rec) for rec in self.per_record))


class StudentFeatures:
    """The student's features with gradient: microbatches read ``leaves``; ``backward()`` pushes
    what they accumulated through the vision tower (call it once, after the last microbatch)."""

    def __init__(self, features: ImageFeatures):
        self.features = features
        self.detached = features.detached()
        self.leaves = ImageFeatures(tuple(tuple(f.detach().requires_grad_(f.requires_grad) for f in rec)
                                          for rec in features.per_record))

    @classmethod
    def of(cls, backbone: Backbone, records: Sequence[Mapping[str, Any]]) -> StudentFeatures:
        return cls(ImageFeatures.of(backbone, records))

    def backward(self) -> None:
        pairs = [(f, leaf.grad) for rec, leaves in zip(self.features.per_record, self.leaves.per_record)
                 for f, leaf in zip(rec, leaves) if f.requires_grad and leaf.grad is not None]
        if pairs:
            torch.autograd.backward([f for f, _ in pairs], [g for _, g in pairs])


def repeated(n_records: int, n: int) -> list[int]:
    """Row -> record index when each of ``n_records`` records is repeated ``n`` times in a row."""
    return [i for i in range(n_records) for _ in range(n)]
