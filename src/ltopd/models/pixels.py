"""Qwen2-VL's image patches without the processor's float passes: the same float32s, several times faster.

transformers' PIL image processor turns a uint8 image into float32 patches in four passes over
the whole image (to float, rescale, normalise, patchify with the temporal copy); on the twins'
256 px images that is a fifth of a student's evaluation job and a seventh of a training job
(docs/measured/pixel-cache.md). Every step but the layout acts on one byte of one channel at a
time (IEEE arithmetic, element by element), so a table of the processor's own output for each of
the 256 byte values of each channel gives the same floats, and the layout is the processor's
patch order written once into the output.

Taken only where the processor would not resize (the image already on its patch grid, RGB), and
checked against the processor on the first images each instance sees: a transformers release
whose arithmetic differs falls back to the processor, with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil, smart_resize


class PatchTable:
    """The processor's patches of on-grid RGB images, read from a per-channel table of its output."""

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
        self.verified: bool | None = None  # None: not yet compared with the processor

    @staticmethod
    def supports(processor: object) -> bool:
        """The processor class whose arithmetic this reproduces (subclasses may change it)."""
        return type(processor) is Qwen2VLImageProcessorPil

    def on_grid(self, image: Image.Image) -> bool:
        """True when the processor would take the image's pixels as they are (RGB, no resize)."""
        if image.mode != "RGB":
            return False
        p = self.processor
        if not p.do_resize:
            return image.height % (self.patch * self.merge) == 0 and image.width % (self.patch * self.merge) == 0
        side = smart_resize(image.height, image.width, factor=self.patch * self.merge,
                            min_pixels=p.size["shortest_edge"], max_pixels=p.size["longest_edge"])
        return side == (image.height, image.width)

    def __call__(self, images: Sequence[Image.Image]) -> dict[str, torch.Tensor] | None:
        """pixel_values and image_grid_thw as the processor returns them, or None where this
        cannot give them (an image off its grid, or the first comparison failed)."""
        if self.verified is False or not images or not all(self.on_grid(im) for im in images):
            return None
        out = self._patches(images)
        if self.verified is None:
            reference = self.processor(images=list(images), return_tensors="pt")
            self.verified = all(torch.equal(out[k], reference[k]) for k in out)
            if not self.verified:
                warnings.warn(f"{type(self.processor).__name__}'s patches differ from ltopd.models.pixels' table "
                              "(a changed transformers release?); using the processor", stacklevel=2)
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
