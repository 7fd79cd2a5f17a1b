"""The faster CPU paths every model of the package gets, built or loaded: one call site, so a
twin just built and the same twin loaded from its folder compute alike.

Both keep the weights and the state dict as they are and compute the same function: patch-wise
convolutions as one matmul (``patch_linear``), and Qwen3.5's Gated DeltaNet layers on the
re-batched kernels (``delta_rule``, installed only where the model has such layers).
"""

from __future__ import annotations

from torch import nn

from ltopd.models import delta_rule
from ltopd.models.patch_linear import linearize_patch_convs


def install(model: nn.Module) -> nn.Module:
    """Switch ``model``'s patch convolutions and linear-attention kernels in place; returns it."""
    linearize_patch_convs(model)
    delta_rule.install(model)
    return model
