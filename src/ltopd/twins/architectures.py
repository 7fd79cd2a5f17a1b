"""Tiny twins: the real model classes at a few million parameters, built from a config.

Each twin keeps its family's real architecture and shrinks only widths and depths:
Qwen3.5 (Gated DeltaNet / full-attention hybrid with one full layer per four, M-RoPE over
(t, h, w), patch 16 + 2x2 merger), GLM-4.6V (glm4v: full-attention LM with partial M-RoPE, patch
14 + 2x2 conv downsample + merger), LLaVA-OneVision (SigLIP patch 14 + MLP projector + Qwen2 with
1-D RoPE, one base tile per image). Every canvas gives 64 visual tokens for a large square image.
"""

from __future__ import annotations

import torch
from transformers import (
    Glm46VConfig,
    LlavaOnevisionConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3_5Config,
)

from ltopd.models import fast_paths
from ltopd.models.backbone import Backbone, family_ops
from ltopd.models.processor import (
    ImageSpan,
    ImageTextProcessor,
    TileProcessor,
    build_glm_image_processor,
    build_image_processor,
    build_llava_image_processor,
)
from ltopd.models.special_tokens import (
    GLM_IMAGE,
    GLM_IMAGE_END,
    GLM_IMAGE_START,
    IMAGE_PAD,
    LLAVA_IMAGE,
    VIDEO_PAD,
    VISION_END,
    VISION_START,
)
from ltopd.twins.specs import TWINS, TwinSpec

# How each family writes an image into the prompt (the processor rewrites the protocol's span).
SPANS: dict[str, ImageSpan] = {
    "qwen3_5": ImageSpan(VISION_START, IMAGE_PAD, VISION_END),
    "glm46v": ImageSpan(GLM_IMAGE_START, GLM_IMAGE, GLM_IMAGE_END),
    "llava_onevision": ImageSpan("", LLAVA_IMAGE, "\n"),
}


def mrope_section(rotary_half: int) -> list[int]:
    """Split the rotary frequencies over (t, h, w) as evenly as possible, t taking the remainder."""
    third = rotary_half // 3
    return [rotary_half - 2 * third, third, third]


def twin_spec(name: str) -> TwinSpec:
    if name not in TWINS:
        raise ValueError(f"unknown twin {name!r}; known twins: {sorted(TWINS)}")
    return TWINS[name]


def twin_config(name: str, tokenizer: PreTrainedTokenizerFast) -> PretrainedConfig:
    """The config of twin `name` (its family's class) with vocabulary and special ids from `tokenizer`."""
    spec = twin_spec(name)
    builders = {"qwen3_5": _qwen_config, "glm46v": _glm_config, "llava_onevision": _llava_config}
    return builders[spec.family](spec, tokenizer)


def _qwen_config(spec: TwinSpec, tokenizer: PreTrainedTokenizerFast) -> Qwen3_5Config:
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in (IMAGE_PAD, VIDEO_PAD, VISION_START, VISION_END)}
    grid_side = spec.image_side // spec.patch_size
    text_config = {
        **_lm_base(spec, tokenizer),
        "head_dim": spec.head_dim,
        "linear_key_head_dim": spec.head_dim,
        "linear_value_head_dim": spec.head_dim,
        "linear_num_key_heads": spec.kv_heads,
        "linear_num_value_heads": spec.heads,
        # partial_rotary_factor 1: mrope_section must then sum to head_dim / 2.
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 1.0,
            "mrope_section": mrope_section(spec.head_dim // 2),
            "mrope_interleaved": True,
        },
    }
    vision_config = {
        "depth": spec.vision_layers,
        "hidden_size": spec.vision_hidden,
        "intermediate_size": 2 * spec.vision_hidden,
        "num_heads": spec.vision_heads,
        "patch_size": spec.patch_size,
        "spatial_merge_size": spec.merge_size,
        "temporal_patch_size": 2,
        "out_hidden_size": spec.hidden,
        "num_position_embeddings": grid_side * grid_side,
    }
    return Qwen3_5Config(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids[IMAGE_PAD],
        video_token_id=ids[VIDEO_PAD],
        vision_start_token_id=ids[VISION_START],
        vision_end_token_id=ids[VISION_END],
    )


def _lm_config(spec: TwinSpec, tokenizer: PreTrainedTokenizerFast) -> dict:
    """Language-model fields of the GLM and LLaVA twins (head_dim = hidden / heads there)."""
    if spec.hidden != spec.heads * spec.head_dim:
        raise ValueError(f"hidden {spec.hidden} must equal heads {spec.heads} x head_dim {spec.head_dim}")
    return _lm_base(spec, tokenizer)


def _lm_base(spec: TwinSpec, tokenizer: PreTrainedTokenizerFast) -> dict:
    """Language-model fields every family's twin shares."""
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": spec.hidden,
        "intermediate_size": 2 * spec.hidden,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "max_position_embeddings": 4096,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }


def _glm_config(spec: TwinSpec, tokenizer: PreTrainedTokenizerFast) -> Glm46VConfig:
    # GLM rotates half of each head (partial_rotary_factor 0.5), so mrope_section sums to head_dim / 4.
    rope = {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "mrope_section": mrope_section(spec.head_dim // 4),
    }
    vision_config = {
        "depth": spec.vision_layers,
        "hidden_size": spec.vision_hidden,
        "intermediate_size": 2 * spec.hidden,  # the merger's inner width
        "num_heads": spec.vision_heads,
        "image_size": spec.image_side,
        "patch_size": spec.patch_size,
        "spatial_merge_size": spec.merge_size,
        "temporal_patch_size": 2,
        "out_hidden_size": spec.hidden,
    }
    # Video is never used here; its ids point at the unused Qwen video token.
    video = tokenizer.convert_tokens_to_ids(VIDEO_PAD)
    return Glm46VConfig(
        text_config={**_lm_config(spec, tokenizer), "rope_parameters": rope},
        vision_config=vision_config,
        image_token_id=tokenizer.convert_tokens_to_ids(GLM_IMAGE),
        video_token_id=video,
        image_start_token_id=tokenizer.convert_tokens_to_ids(GLM_IMAGE_START),
        image_end_token_id=tokenizer.convert_tokens_to_ids(GLM_IMAGE_END),
        video_start_token_id=video,
        video_end_token_id=video,
    )


def _llava_config(spec: TwinSpec, tokenizer: PreTrainedTokenizerFast) -> LlavaOnevisionConfig:
    vision_config = {
        "model_type": "siglip_vision_model",
        "hidden_size": spec.vision_hidden,
        "intermediate_size": 2 * spec.vision_hidden,
        "num_hidden_layers": spec.vision_layers,
        "num_attention_heads": spec.vision_heads,
        "image_size": spec.image_side,
        "patch_size": spec.patch_size,
        "vision_use_head": False,
    }
    text_config = {
        **_lm_config(spec, tokenizer),
        "model_type": "qwen2",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    return LlavaOnevisionConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=tokenizer.convert_tokens_to_ids(LLAVA_IMAGE),
        video_token_index=tokenizer.convert_tokens_to_ids(VIDEO_PAD),
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=[[spec.image_side, spec.image_side]],
    )


def build_twin(name: str, tokenizer: PreTrainedTokenizerFast, seed: int = 42) -> PreTrainedModel:
    """Randomly initialised twin (seeded), fp32, in eval mode."""
    config = twin_config(name, tokenizer)
    with torch.random.fork_rng():  # seed the init without moving the caller's global RNG
        torch.manual_seed(seed)
        model = family_ops(config.model_type).model_class(config)
    fast_paths.install(model)  # as load_backbone: a built and a loaded twin compute alike
    return model.eval()


def twin_processor(name: str, tokenizer: PreTrainedTokenizerFast,
                   processor_side: int | None = None) -> ImageTextProcessor:
    """The image-only processor of twin `name` (canvas and image span from its spec).
    `processor_side`: the pixel budget's square side instead of the spec's canvas (max_pixels =
    side^2: a larger image keeps more tokens, as the paper's processor keeps up to max_pixels)."""
    spec = twin_spec(name)
    span = SPANS[spec.family]
    side = processor_side or spec.image_side
    if spec.family == "glm46v":
        return ImageTextProcessor(
            tokenizer, build_glm_image_processor(side, spec.patch_size, spec.merge_size), span=span
        )
    if spec.family == "llava_onevision":
        if processor_side and processor_side != spec.image_side:
            raise ValueError(f"{name}: a LLaVA-OneVision twin reads one {spec.image_side} px tile; "
                             "processor_side does not apply to it")
        return TileProcessor(tokenizer, build_llava_image_processor(spec.image_side), spec.patch_size, span=span)
    return ImageTextProcessor(tokenizer, build_image_processor(side, spec.patch_size, spec.merge_size))


def twin_backbone(name: str, tokenizer: PreTrainedTokenizerFast, seed: int = 42,
                  processor_side: int | None = None) -> Backbone:
    """Twin model plus its image-only processor."""
    return Backbone(model=build_twin(name, tokenizer, seed),
                    processor=twin_processor(name, tokenizer, processor_side))
