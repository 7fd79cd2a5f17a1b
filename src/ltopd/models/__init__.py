"""Backbones: tokenizer, processor, tiny twins, loading, and the visual-token reduction hook."""

from ltopd.models.backbone import FAMILIES, Backbone, EncodedBatch, family_ops
from ltopd.models.hook import PrunedSequence, Selection, check_ratio, choose, prune_sequence
from ltopd.models.loading import load_backbone, save_backbone
from ltopd.models.processor import ImageSpan, ImageTextProcessor, TileProcessor, build_image_processor
from ltopd.models.prompt import build_messages, build_target, extract_answer, render_prompt, user_text
from ltopd.models.tokenizer import build_tokenizer
from ltopd.models.twins import TWINS, build_twin, twin_backbone, twin_config, twin_processor

__all__ = [
    "FAMILIES",
    "TWINS",
    "Backbone",
    "EncodedBatch",
    "ImageSpan",
    "ImageTextProcessor",
    "PrunedSequence",
    "Selection",
    "TileProcessor",
    "build_image_processor",
    "build_messages",
    "build_target",
    "build_tokenizer",
    "build_twin",
    "check_ratio",
    "choose",
    "extract_answer",
    "family_ops",
    "load_backbone",
    "prune_sequence",
    "render_prompt",
    "save_backbone",
    "twin_backbone",
    "twin_config",
    "twin_processor",
    "user_text",
]
