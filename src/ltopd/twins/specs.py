"""The tiny twins' shapes: names and widths only, importable without torch or transformers
(profile validation and the Snakefile read the names; ltopd.twins.architectures builds them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TwinSpec:
    """Shape of a tiny twin of `family` (a model_type); image_side fixes the canvas
    (Qwen 256 px / patch 16 / merge 2, GLM 224 px / 14 / 2, LLaVA tile 112 px / 14: 8x8 = 64 tokens)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vision_hidden: int
    vision_layers: int
    vision_heads: int
    image_side: int = 256
    patch_size: int = 16
    merge_size: int = 2
    family: str = "qwen3_5"


TWINS: dict[str, TwinSpec] = {
    "qwen35-tiny": TwinSpec(
        hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, vision_hidden=64, vision_layers=2, vision_heads=4
    ),
    # The Table 3 "scale" axis: the same family and vision tower, a wider and twice as deep
    # language model (about 2.8x the parameters; one update costs about 2x on a CPU).
    "qwen35-small": TwinSpec(
        hidden=192, layers=8, heads=6, kv_heads=2, head_dim=32, vision_hidden=64, vision_layers=2, vision_heads=4
    ),
    "glm46v-tiny": TwinSpec(
        hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, vision_hidden=64, vision_layers=2, vision_heads=4,
        image_side=224, patch_size=14, family="glm46v",
    ),
    "llava-ov-tiny": TwinSpec(
        hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, vision_hidden=64, vision_layers=2, vision_heads=4,
        image_side=112, patch_size=14, merge_size=1, family="llava_onevision",
    ),
}
