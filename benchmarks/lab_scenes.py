"""What the lab scripts (binding_lab.py, pooled_probe.py, answer_attention.py) share: the scenes
they ask about and loading a saved pretraining state into a twin."""

from __future__ import annotations

import torch

from ltopd.data.sources import world_config
from ltopd.data.world.config import WorldConfig

VISION_PREFIX = "model.visual."  # the Qwen3.5 twin's tower and merger


def lab_world(min_objects: int, max_objects: int) -> WorldConfig:
    """Scenes of `min_objects`-`max_objects` shapes of 32-96 px on a 256 px canvas, no text, light clutter."""
    return world_config(
        {
            "image_size": 256,
            "min_objects": min_objects,
            "max_objects": max_objects,
            "text_prob": 0.0,
            "clutter": 0.1,
            "min_object_px": 32,
            "max_object_px": 96,
        }
    )


def load_state(model: torch.nn.Module, path: str, vision_only: bool = False) -> list[str]:
    """Load a pretrain_state.pt's weights into `model` (only the tower and merger with
    `vision_only`, the language model then kept as it is); returns the keys left unloaded."""
    state = torch.load(path, map_location="cpu", weights_only=False)["model"]
    if vision_only:
        state = {k: v for k, v in state.items() if k.startswith(VISION_PREFIX)}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise ValueError(f"{path}: weights the model does not have: {unexpected[:5]}")
    return missing
