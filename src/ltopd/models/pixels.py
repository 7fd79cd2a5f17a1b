"""Qwen2-VL's image patches without the processor's float passes: the same float32s in a quarter of the time.

transformers' PIL image processor turns a uint8 image into float32 patches in four passes over
the whole image (to float, rescale, normalise, patchify with the temporal copy); on the twins'
256 px images that was about a tenth of a student's evaluation job and a seventh of an LT-OPD
training job (py-spy; the table's figures: docs/measured/pixel-cache.md). Every step but the
layout acts on one byte of one channel at a time (IEEE arithmetic, element by element), so a
table of the processor's own output for each of the 256 byte values of each channel gives the
same floats, and the layout is the processor's patch order written once into the output.

Taken for RGB images (the twins' records); an image off the processor's patch grid is first
resized as the processor resizes it (PIL, its resampling filter, to its ``smart_resize`` size). Each
instance compares its first on-grid and its first resized batch with the processor itself: a
transformers release whose arithmetic differs falls back to the processor, with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil, smart_resize


class PatchTable:
    """The processor's patches of RGB images, read from a per-channel table of its output."""

    def __init__(self, processor: Qwen2VLImageProcessorPil) -> None:
        self.processor = processor
        self.patch, self.merge, self.frames = processor.patch_size, processor.merge_size, processor.temporal_patch_size
        # every byte value of every channel, channel-first as the processor holds an image
        values = np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256)).copy()
        if processor.do_rescale:
            values = processor.rescale(values, processor.rescale_factor)
        if processor.do_normalize:
            values = processor.normalize(values, processor.image_mean, processor.image_std)
        self.table = np.asarray(values, dtype=np.float32)[:, 0, :]  # (channel, byte) -> float32
        self.verified: dict[bool, bool] = {}  # resized or not -> equal to the processor (absent: not compared yet)

    @staticmethod
    def supports(processor: object) -> bool:
        """The processor class whose arithmetic this reproduces (subclasses may change it)."""
        return type(processor) is Qwen2VLImageProcessorPil

    def target(self, image: Image.Image, size: dict[str, int] | None = None) -> tuple[int, int]:
        """(height, width) the processor gives the image (its resize rule; ``size`` overrides its
        pixel budget as a call's ``size=`` does)."""
        p, (height, width) = self.processor, (image.height, image.width)
        if not p.do_resize:
            return height, width
        size = size or p.size
        return smart_resize(height, width, factor=self.patch * self.merge,
                            min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"])

    def __call__(self, images: Sequence[Image.Image],
                 size: dict[str, int] | None = None) -> dict[str, torch.Tensor] | None:
        """pixel_values and image_grid_thw as ``processor(images=images, size=size)`` returns
        them, or None where this does not give them (an image not RGB, or a comparison failed)."""
        if not images or any(im.mode != "RGB" for im in images):
            return None
        targets = [self.target(im, size) for im in images]
        resized = any(t != (im.height, im.width) for t, im in zip(targets, images))
        if self.verified.get(resized) is False:
            return None
        grid = [im if t == (im.height, im.width) else im.resize((t[1], t[0]), resample=self.processor.resample)
                for t, im in zip(targets, images)]
        out = self._patches(grid)
        if resized not in self.verified:
            reference = self.processor(images=list(images), return_tensors="pt",
                                       **({"size": size} if size is not None else {}))
            self.verified[resized] = all(torch.equal(out[k], reference[k]) for k in out)
            if not self.verified[resized]:
                warnings.warn(f"{type(self.processor).__name__}'s patches differ from ltopd.models.pixels' table "
                              f"({'resized' if resized else 'on-grid'} images; a changed transformers release?); "
                              "using the processor", stacklevel=2)
                return {k: reference[k] for k in out}
        return out

    def _patches(self, images: Sequence[Image.Image]) -> dict[str, torch.Tensor]:
        ps, m, t = self.patch, self.merge, self.frames
        grids = [(im.height // ps, im.width // ps) for im in images]
        out = np.empty((sum(h * w for h, w in grids), 3 * t * ps * ps), dtype=np.float32)
        row = 0
        for image, (gh, gw) in zip(images, grids):
            pixels = np.asarray(image)  # (H, W, C) uint8
            # the processor's order: merged cells, then the merge window, then channel, frame, patch rows, columns
            cells = pixels.reshape(gh // m, m, ps, gw // m, m, ps, 3).transpose(0, 3, 1, 4, 6, 2, 5)
            dst = out[row:row + gh * gw].reshape(gh // m, gw // m, m, m, 3, t, ps, ps)
            for c in range(3):
                np.take(self.table[c], cells[..., c, :, :], out=dst[..., c, 0, :, :])
            dst[..., 1:, :, :] = dst[..., :1, :, :]  # the temporal copies of a still image
            row += gh * gw
        return {"pixel_values": torch.from_numpy(out),
                "image_grid_thw": torch.tensor([[1, gh, gw] for gh, gw in grids], dtype=torch.long)}
