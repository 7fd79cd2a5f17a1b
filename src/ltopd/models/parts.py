"""A backbone's trainable parts: language model, merger (projector) and vision tower, told apart
by their parameters' names in each family. Pretraining and training give each part its own
learning rate (a rate of 0 freezes it)."""

from __future__ import annotations

import torch

GROUPS = ("lm", "merger", "vision")

# Module-name prefixes of the vision side in each family (Qwen3.5 and GLM: `visual` with its
# `merger`; LLaVA-OneVision: `vision_tower`, `multi_modal_projector` and the newline embedding).
MERGER_PREFIXES = ("model.visual.merger.", "model.multi_modal_projector.", "model.image_newline")
VISION_PREFIXES = ("model.visual.", "model.vision_tower.")
ADDED_PREFIX = ("llava_mini.", "learnable_merge.")  # ltopd.models.addons


def parameter_groups(model: torch.nn.Module) -> dict[str, list[torch.nn.Parameter]]:
    """Split trainable parameters into vision tower, merger (projector) and language model."""
    groups: dict[str, list[torch.nn.Parameter]] = {g: [] for g in GROUPS}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if name.startswith(ADDED_PREFIX):  # a module added for a method: its own group
            groups.setdefault(name.split(".", 1)[0], []).append(param)
        elif name.startswith(MERGER_PREFIXES):
            groups["merger"].append(param)
        elif name.startswith(VISION_PREFIXES):
            groups["vision"].append(param)
        else:
            groups["lm"].append(param)
    return groups
