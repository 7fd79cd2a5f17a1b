"""Image-only processors (no torchvision, no video processor) for every backbone family.

`Qwen3VLProcessor` insists on a video processor, which needs torchvision (unusable here), so this
small class pairs a PIL image processor with the tokenizer and expands each image slot of the
prompt to one placeholder per visual token itself. The prompt protocol writes every image as
`<|vision_start|><|image_pad|><|vision_end|>`; a family's `ImageSpan` says what that becomes
(GLM-4.xV: `<|begin_of_image|><|image|>...<|end_of_image|>`, LLaVA-OneVision: `<image>...\n`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from PIL import Image
from transformers import BatchFeature, PreTrainedTokenizerFast
from transformers.models.glm46v.image_processing_pil_glm46v import Glm46VImageProcessorPil
from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
    LlavaOnevisionImageProcessorPil,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from ltopd.models.pixels import PatchTable
from ltopd.models.special_tokens import IMAGE_PAD, VISION_END, VISION_START

CONFIG_NAME = "ltopd_processor.json"
# The image processor classes a saved processor may name (loaded offline by class, never by hub lookup).
IMAGE_PROCESSORS = {
    cls.__name__: cls for cls in (Qwen2VLImageProcessorPil, Glm46VImageProcessorPil, LlavaOnevisionImageProcessorPil)
}


@dataclass(frozen=True)
class ImageSpan:
    """How a family writes one image: `open + token * n_visual_tokens + close`."""

    open: str
    token: str
    close: str


QWEN_SPAN = ImageSpan(VISION_START, IMAGE_PAD, VISION_END)
PROTOCOL_SPAN = VISION_START + IMAGE_PAD + VISION_END


class ImageCopies(NamedTuple):
    """`images` as distinct objects (an image object given several times is one image: its pixels,
    and the tower's features of them, are equal): ``distinct`` the positions of each object's
    first occurrence, ``index`` each image's position among them."""

    distinct: list[int]
    index: list[int]

    @property
    def repeated(self) -> bool:
        return len(self.distinct) < len(self.index)


def distinct_images(images: Sequence[Any]) -> ImageCopies:
    """`images` by object identity (a batch's and process_images' one reading of it)."""
    at: dict[int, int] = {}  # id -> position among the distinct objects
    distinct = []
    for i, image in enumerate(images):
        if id(image) not in at:
            at[id(image)] = len(distinct)
            distinct.append(i)
    return ImageCopies(distinct, [at[id(image)] for image in images])


def build_image_processor(image_side: int, patch_size: int = 16, merge_size: int = 2) -> Qwen2VLImageProcessorPil:
    """Native-resize PIL processor whose pixel budget is an `image_side` x `image_side` canvas."""
    factor = patch_size * merge_size
    return Qwen2VLImageProcessorPil(
        patch_size=patch_size,
        merge_size=merge_size,
        temporal_patch_size=2,
        min_pixels=factor * factor,
        max_pixels=image_side * image_side,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )


def build_glm_image_processor(image_side: int, patch_size: int = 14, merge_size: int = 2) -> Glm46VImageProcessorPil:
    """GLM-4.xV native-resize processor on an `image_side` canvas.

    GLM's smart_resize budgets pixels over both temporal copies of an image, hence the factor 2.
    """
    factor = patch_size * merge_size
    return Glm46VImageProcessorPil(
        patch_size=patch_size,
        merge_size=merge_size,
        temporal_patch_size=2,
        size={"shortest_edge": 2 * factor * factor, "longest_edge": 2 * image_side * image_side},
    )


def build_llava_image_processor(image_side: int) -> LlavaOnevisionImageProcessorPil:
    """LLaVA-OneVision processor whose only anyres grid is the base tile itself (see TileProcessor)."""
    return LlavaOnevisionImageProcessorPil(
        size={"height": image_side, "width": image_side}, image_grid_pinpoints=[[image_side, image_side]]
    )


class ImageTextProcessor:
    """Tokenizer + native-resolution PIL image processor (patches + image_grid_thw, Qwen / GLM);
    returns left-padded ids with expanded image placeholders."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerFast,
        image_processor: Any,
        max_input_pixels: int = 4096 * 4096,
        span: ImageSpan = QWEN_SPAN,
    ) -> None:
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.max_input_pixels = max_input_pixels
        self.span = span
        self.image_token_id: int = tokenizer.convert_tokens_to_ids(span.token)
        self.patch_table = PatchTable(image_processor) if PatchTable.supports(image_processor) else None

    def settings(self) -> dict[str, Any]:
        """What from_pretrained needs besides the tokenizer and image processor files."""
        return {
            "max_input_pixels": self.max_input_pixels,
            "span": [self.span.open, self.span.token, self.span.close],
            "image_processor": type(self.image_processor).__name__,
        }

    @property
    def merge_size(self) -> int:
        return int(self.image_processor.merge_size)

    def check_image(self, image: Image.Image) -> None:
        """Reject images above the configured input size (decoding huge images stalls the pipeline)."""
        width, height = image.size
        if width * height > self.max_input_pixels:
            raise ValueError(
                f"image of size {width}x{height} ({width * height} pixels) exceeds the limit of "
                f"{self.max_input_pixels} pixels (max_input_pixels)"
            )

    def process_images(self, images: Sequence[Image.Image]) -> dict[str, torch.Tensor]:
        """pixel_values (patches, C*T*P*P) and image_grid_thw (n_images, 3) for `images`.

        An image object given several times (a question's rollouts in training, the questions a
        benchmark asks about one picture) is processed once and its patches repeated; RGB images
        take the processor's exact table (ltopd.models.pixels), the others the processor itself."""
        for image in images:
            self.check_image(image)
        copies = distinct_images(images)
        out = self._process([images[i] for i in copies.distinct])
        return self.take_images(out, copies.index) if copies.repeated else out

    def _process(self, images: Sequence[Image.Image]) -> dict[str, torch.Tensor]:
        """process_images' tensors for distinct `images`."""
        out = self.patch_table(images) if self.patch_table is not None else None
        if out is None:
            out = self.image_processor(images=list(images), return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}

    def take_images(self, vision: Mapping[str, torch.Tensor], index: Sequence[int]) -> dict[str, torch.Tensor]:
        """process_images' tensors of images `index` (in that order, repeats allowed) of `vision`."""
        grids = vision["image_grid_thw"]
        parts = vision["pixel_values"].split(grids.prod(-1).tolist())
        return {"pixel_values": torch.cat([parts[i] for i in index]), "image_grid_thw": grids[list(index)]}

    def tokens_per_image(self, vision: dict[str, torch.Tensor]) -> list[int]:
        """Placeholder count of each image (post-merger tokens)."""
        return (vision["image_grid_thw"].prod(-1) // self.merge_size**2).tolist()

    def tokens_for_size(self, height: int, width: int) -> int:
        """tokens_per_image of an image of this size, from the image processor's own resize rule
        (its `get_number_of_image_patches`), without processing any pixels."""
        return int(self.image_processor.get_number_of_image_patches(height, width)) // self.merge_size**2

    def expand_placeholders(self, text: str, counts: Sequence[int]) -> str:
        """Write the i-th image slot (`<|image_pad|>`, with or without the protocol's vision markers)
        of `text` as the family's span with counts[i] placeholder tokens."""
        text = text.replace(PROTOCOL_SPAN, self.span.open + IMAGE_PAD + self.span.close)
        pieces = text.split(IMAGE_PAD)
        if len(pieces) - 1 != len(counts):
            raise ValueError(f"text has {len(pieces) - 1} image placeholders but {len(counts)} images were given")
        expanded = [pieces[0]]
        for count, piece in zip(counts, pieces[1:]):
            expanded += [self.span.token * count, piece]
        return "".join(expanded)

    def __call__(
        self,
        texts: Sequence[str],
        images: Sequence[Sequence[Image.Image]] | None = None,
        suffix_ids: Sequence[Sequence[int]] | None = None,
    ) -> BatchFeature:
        """Tokenise `texts` (one image list per text), append `suffix_ids` per row, left-pad.

        Returns input_ids, attention_mask, mm_token_type_ids (1 on image placeholders) and, when
        there are images, process_images' tensors (images in row order).
        """
        images = images if images is not None else [[] for _ in texts]
        if len(images) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(images)} image lists")
        flat = [image for row in images for image in row]
        vision = self.process_images(flat) if flat else {}
        counts = self.tokens_per_image(vision) if flat else []
        rows: list[list[int]] = []
        offset = 0
        for i, (text, row_images) in enumerate(zip(texts, images)):
            text = self.expand_placeholders(text, counts[offset : offset + len(row_images)])
            offset += len(row_images)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            rows.append(list(ids) + (list(suffix_ids[i]) if suffix_ids is not None else []))
        input_ids, attention_mask = left_pad(rows, self.tokenizer.pad_token_id)
        data = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "mm_token_type_ids": (input_ids == self.image_token_id).int(),
            **vision,
        }
        return BatchFeature(data=data)

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save_pretrained(directory)
        self.image_processor.save_pretrained(directory)
        (directory / CONFIG_NAME).write_text(json.dumps(self.settings(), indent=2))

    @staticmethod
    def from_pretrained(directory: str | Path) -> ImageTextProcessor:
        """The saved processor, of the class its settings name (older saves: Qwen defaults)."""
        directory = Path(directory)
        if not (directory / CONFIG_NAME).is_file():
            raise FileNotFoundError(f"no {CONFIG_NAME} in {directory}: not a saved ImageTextProcessor")
        settings = json.loads((directory / CONFIG_NAME).read_text())
        name = settings.pop("image_processor", Qwen2VLImageProcessorPil.__name__)
        if name not in IMAGE_PROCESSORS:
            raise ValueError(f"unsupported image processor {name!r}; supported: {sorted(IMAGE_PROCESSORS)}")
        span = ImageSpan(*settings.pop("span", [VISION_START, IMAGE_PAD, VISION_END]))
        tokenizer = PreTrainedTokenizerFast.from_pretrained(directory, local_files_only=True)
        image_processor = IMAGE_PROCESSORS[name].from_pretrained(directory, local_files_only=True)
        cls = TileProcessor if isinstance(image_processor, LlavaOnevisionImageProcessorPil) else ImageTextProcessor
        return cls(tokenizer, image_processor, span=span, **settings)


class TileProcessor(ImageTextProcessor):
    """LLaVA-OneVision with one base tile per image (no anyres crops).

    Each image becomes its whole-image tile resized to the vision tower's square input; the
    model gives (side / patch)^2 grid tokens plus one trailing `image_newline` token, so the
    span holds grid + 1 placeholders. This is the layout LLaVA-OneVision itself uses for
    multi-image inputs; it is also the closest to LLaVA-OV-1.5 (one grid per image, no tiles).
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerFast,
        image_processor: LlavaOnevisionImageProcessorPil,
        patch_size: int,
        max_input_pixels: int = 4096 * 4096,
        span: ImageSpan = QWEN_SPAN,
    ) -> None:
        super().__init__(tokenizer, image_processor, max_input_pixels, span)
        self.patch_size = patch_size

    @property
    def merge_size(self) -> int:
        return 1

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "patch_size": self.patch_size}

    def _process(self, images: Sequence[Image.Image]) -> dict[str, torch.Tensor]:
        """pixel_values (n_images, C, side, side): the base tile (patch 0 of the anyres output)."""
        out = self.image_processor(images=list(images), return_tensors="pt")
        return {"pixel_values": out["pixel_values"][:, 0]}

    def take_images(self, vision: Mapping[str, torch.Tensor], index: Sequence[int]) -> dict[str, torch.Tensor]:
        return {"pixel_values": vision["pixel_values"][list(index)]}

    def tokens_per_image(self, vision: dict[str, torch.Tensor]) -> list[int]:
        side = vision["pixel_values"].shape[-1] // self.patch_size
        return [side * side + 1] * vision["pixel_values"].shape[0]


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) with every row right-aligned; empty batches are rejected."""
    if not rows:
        raise ValueError("cannot pad an empty batch")
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids, mask
