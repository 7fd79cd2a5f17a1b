"""Backbones: adapters over the three families, processor, loading, and the visual-token reduction hook."""

from ltopd.models.backbone import BACKBONE_FAMILIES, Backbone, EncodedBatch, family_ops
from ltopd.models.hook import PrunedSequence, Selection, check_ratio, choose, prune_sequence
from ltopd.models.loading import load_backbone, save_backbone
from ltopd.models.processor import ImageSpan, ImageTextProcessor, TileProcessor, build_image_processor
from ltopd.models.prompt import build_messages, build_target, extract_answer, render_prompt, user_text

__all__ = [
    "BACKBONE_FAMILIES",
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
    "check_ratio",
    "choose",
    "extract_answer",
    "family_ops",
    "load_backbone",
    "prune_sequence",
    "render_prompt",
    "save_backbone",
    "user_text",
]
