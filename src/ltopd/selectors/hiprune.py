"""HiPrune: hierarchical vision-encoder attention -> anchors, buffers, registers.

With budget ``k``:
- anchors: the top ``max(1, round(k * alpha / 5))`` tokens by ``encoder_attention_object`` (a middle
  "object" layer); each anchor plus its 4 buffers covers 5 tokens, so anchors and buffers take
  about ``alpha * k`` (alpha is a config value, 0.1 in one port; Python ``round``, half to even);
- buffers: the 4-neighbours of the anchors on the ``grid_hw`` grid (row-major), visited anchor by
  anchor in descending attention order, each anchor's neighbours in ascending index order
  (up, left, right, down); anchors and repeats are skipped, and the list is truncated to
  ``k - #anchors`` when it overflows;
- registers: the remaining budget, by ``encoder_attention_output`` (output layer).
Exactly ``k`` tokens; ties go to the lowest index.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import SelectionInputs, register, stable_rank

_NEEDS = frozenset({"encoder_attention_object", "encoder_attention_output", "grid_hw"})


def anchor_count(k: int, alpha: float) -> int:
    return min(k, max(1, round(k * alpha / 5)))


def grid_neighbours(index: int, grid_hw: tuple[int, int]) -> list[int]:
    """4-neighbours of a row-major grid cell, in ascending index order (up, left, right, down)."""
    h, w = grid_hw
    row, col = divmod(index, w)
    out = []
    if row > 0:
        out.append(index - w)
    if col > 0:
        out.append(index - 1)
    if col < w - 1:
        out.append(index + 1)
    if row < h - 1:
        out.append(index + w)
    return out


@register("hiprune", _NEEDS)
def hiprune(inputs: SelectionInputs, k: int, *, alpha: float = 0.1) -> Tensor:
    if not alpha > 0.0:
        raise ValueError(f"hiprune: alpha={alpha!r} must be > 0")
    obj, out, grid = inputs.encoder_attention_object, inputs.encoder_attention_output, inputs.grid_hw
    assert obj is not None and out is not None and grid is not None  # guaranteed by the registry
    anchors = stable_rank(obj)[: anchor_count(k, alpha)].tolist()
    taken = set(anchors)
    buffers: list[int] = []
    for anchor in anchors:
        for neighbour in grid_neighbours(anchor, grid):
            if neighbour not in taken:
                taken.add(neighbour)
                buffers.append(neighbour)
    buffers = buffers[: k - len(anchors)]
    chosen = torch.zeros(obj.shape[0], dtype=torch.bool, device=obj.device)
    chosen[anchors + buffers] = True
    n_registers = k - len(anchors) - len(buffers)
    registers = stable_rank(torch.where(chosen, out.new_tensor(-math.inf), out))[:n_registers]
    return torch.cat([torch.tensor(anchors + buffers, dtype=torch.long, device=obj.device), registers])
