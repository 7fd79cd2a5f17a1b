"""The downsampling control (VTC-Bench): each image resized by the backbone's own processor so
that its visual-token count matches a budget's keep count; no selector runs, the model sees
every token of the smaller image.

The keep count is a selector's at the same budget (``keep_count(n, ratio, floor)`` of the
image's n full-resolution tokens), so a downsampled row and a selector's row of Table 2 spend
the same visual tokens up to the processor's granularity (a whole row or column of merged
patches). Per family, how the processor is asked for fewer tokens:

* native resolution (Qwen3.5, GLM-4.xV): the image's pixel budget (``size["longest_edge"]``)
  is set to keep-count merged patches' worth of pixels (times the temporal copies GLM counts),
  image by image, and the processor's own ``smart_resize`` picks the grid;
* LLaVA-OneVision's single tile: the tile's side is the keep count's square root (rounded) in
  patches, the SigLIP tower interpolating its learned positions to that grid
  (ltopd.models.llava_ov reads the grid from the pixels).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from PIL import Image
from transformers.image_utils import SizeDict
from transformers.models.glm46v.image_processing_pil_glm46v import Glm46VImageProcessorPil
from transformers.models.glm46v.image_processing_pil_glm46v import smart_resize as glm_resize
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as qwen_resize

from ltopd.models.backbone import Backbone
from ltopd.models.processor import ImageTextProcessor, TileProcessor
from ltopd.selectors import keep_count

# Frames a native-resolution processor counts against its pixel budget (GLM budgets both
# temporal copies of an image, Qwen one).
_BUDGETED_FRAMES = {
    Qwen2VLImageProcessorPil: lambda ip: 1,
    Glm46VImageProcessorPil: lambda ip: int(ip.temporal_patch_size),
}

# ... and the (height, width) it resizes an image to under a pixel budget `size`: its own
# `smart_resize`, called as its resize step calls it.
_RESIZED = {
    Qwen2VLImageProcessorPil: lambda ip, h, w, size: qwen_resize(
        h, w, factor=ip.patch_size * ip.merge_size, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"]),
    Glm46VImageProcessorPil: lambda ip, h, w, size: glm_resize(
        num_frames=ip.temporal_patch_size, height=h, width=w, factor=ip.patch_size * ip.merge_size,
        temporal_factor=ip.temporal_patch_size, min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"]),
}


class DownsampledProcessor(ImageTextProcessor):
    """A native-resolution processor whose images each get ``ratio`` of their full tokens."""

    def __init__(self, base: ImageTextProcessor, ratio: float, floor: int) -> None:
        super().__init__(base.tokenizer, base.image_processor, base.max_input_pixels, base.span)
        if type(base.image_processor) not in _BUDGETED_FRAMES:
            raise ValueError(f"no downsampling rule for image processor {type(base.image_processor).__name__}; "
                             f"known: {sorted(c.__name__ for c in _BUDGETED_FRAMES)}")
        self.base, self.ratio, self.floor = base, ratio, floor
        self.patch_table = base.patch_table  # the same processor: one table, compared with it once per kind

    def budget(self, image: Image.Image) -> dict[str, int]:
        """The pixel budget (the processor's ``size``) that gives ``image`` its keep count."""
        ip = self.image_processor
        unit = int(ip.patch_size * ip.merge_size) ** 2 * _BUDGETED_FRAMES[type(ip)](ip)  # pixels per token
        full = self.base.tokens_for_size(image.height, image.width)  # the count alone: no full-size pass
        keep = keep_count(full, self.ratio, self.floor)
        return {"shortest_edge": ip.size["shortest_edge"], "longest_edge": keep * unit}

    def resized(self, image: Image.Image) -> tuple[int, int]:
        """(height, width) of ``image`` once resized: its pixels depend on nothing else."""
        ip = self.image_processor
        if not ip.do_resize:
            return image.height, image.width
        height, width = _RESIZED[type(ip)](ip, image.height, image.width, self.budget(image))
        return int(height), int(width)

    def _process(self, images: Sequence[Image.Image]) -> dict[str, torch.Tensor]:
        ip = self.image_processor
        parts = []
        for image in images:
            size = self.budget(image)
            out = self.patch_table([image], size) if self.patch_table is not None else None
            if out is None:
                out = ip(images=[image], size=size, return_tensors="pt")
            parts.append((out["pixel_values"], out["image_grid_thw"]))
        return {"pixel_values": torch.cat([p for p, _ in parts]), "image_grid_thw": torch.cat([g for _, g in parts])}


def downsampled_tile(base: TileProcessor, ratio: float, floor: int) -> TileProcessor:
    """LLaVA-OneVision's tile processor at the side whose grid holds about the keep count."""
    side = base.image_processor.size["height"] // base.patch_size
    keep = keep_count(side * side, ratio, floor)
    small = max(1, round(math.sqrt(keep))) * base.patch_size
    ip = copy.deepcopy(base.image_processor)  # its normalisation and resampling kept
    ip.size, ip.image_grid_pinpoints = SizeDict(height=small, width=small), [[small, small]]
    return TileProcessor(base.tokenizer, ip, base.patch_size, base.max_input_pixels, base.span)


def pixels_key(small: Backbone, records: Sequence[dict[str, Any]]) -> tuple:
    """What the pixels that the downsampled ``small`` sees of ``records`` depend on besides the
    images: each image's resized size (native resolution), the tile's side (LLaVA-OneVision).
    Budgets with one key see the same pixels, hence give the same answers (0.2 and 0.15 keep 13
    and 10 of the twins' 64 tokens, both resized to 3 x 3): one pass serves them all."""
    proc: Any = small.processor
    if isinstance(proc, TileProcessor):
        return ("tile", proc.image_processor.size["height"])
    if not isinstance(proc, DownsampledProcessor):  # ratio 1: the backbone's own processor
        return ("full",)
    return ("native", *(proc.resized(image) for record in records for image in record.get("images") or []))


def downsampled(backbone: Backbone, ratio: float, floor: int) -> Backbone:
    """``backbone`` (the same model) whose processor resizes every image to about ``ratio`` of
    its visual tokens (at least ``floor``); ratio 1 returns it unchanged."""
    if not 0 < ratio <= 1:
        raise ValueError(f"downsampling ratio must be in (0, 1], got {ratio!r}")
    if ratio == 1:
        return backbone
    proc: Any = backbone.processor
    small = (downsampled_tile(proc, ratio, floor) if isinstance(proc, TileProcessor)
             else DownsampledProcessor(proc, ratio, floor))
    return replace(backbone, processor=small)
