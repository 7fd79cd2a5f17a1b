"""The patch table (ltopd.models.pixels) against transformers' Qwen2-VL image processor: bit for bit."""

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from ltopd.models.downsample import DownsampledProcessor
from ltopd.models.pixels import PatchTable
from ltopd.models.processor import (
    ImageTextProcessor,
    TileProcessor,
    build_glm_image_processor,
    build_image_processor,
    build_llava_image_processor,
)


def images(sizes, seed=0, mode="RGB"):
    rng = np.random.default_rng(seed)
    out = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sizes]
    return [im.convert(mode) for im in out]


def reference(processor, imgs):
    return processor(images=list(imgs), return_tensors="pt")


def assert_same(got, want):
    assert got["pixel_values"].dtype == want["pixel_values"].dtype == torch.float32
    assert torch.equal(got["pixel_values"], want["pixel_values"])
    assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])


ON_GRID = [(256, 256), (64, 128), (96, 32), (32, 32)]  # multiples of patch 16 x merge 2, within the pixel budget


@pytest.mark.parametrize("settings", [
    {},                                                                   # the twins' processor
    {"image_mean": [0.48145466, 0.4578275, 0.40821073],                   # Qwen's own
     "image_std": [0.26862954, 0.26130258, 0.27577711]},
    {"do_normalize": False},
    {"do_rescale": False, "do_normalize": False},
])
def test_table_equals_the_processor_bit_for_bit(settings):
    processor = build_image_processor(256)
    for key, value in settings.items():
        setattr(processor, key, value)
    table = PatchTable(processor)
    imgs = images(ON_GRID)
    got = table(imgs)
    assert got is not None and table.verified == {False: True}
    assert_same(got, reference(processor, imgs))
    assert_same(table(images(ON_GRID, seed=1)), reference(processor, images(ON_GRID, seed=1)))


def test_every_byte_of_every_channel():
    """An image holding each of the 256 values in each channel: the table's every entry is read."""
    processor = build_image_processor(256)
    ramp = np.stack([np.arange(256, dtype=np.uint8).reshape(16, 16)] * 3, axis=-1)
    img = Image.fromarray(np.tile(ramp, (2, 2, 1)))  # 32 x 32
    img2 = Image.fromarray(np.ascontiguousarray(np.tile(ramp, (2, 2, 1))[..., ::-1]))
    assert_same(PatchTable(processor)([img, img2]), reference(processor, [img, img2]))


@pytest.mark.parametrize("sizes", [[(100, 70)], [(512, 512)], [(64, 64), (300, 200), (32, 32)]])
def test_images_the_processor_resizes(sizes):
    """Off the patch grid or above the pixel budget: resized as the processor resizes, then the table."""
    processor = build_image_processor(256)
    table = PatchTable(processor)
    imgs = images(sizes)
    assert_same(table(imgs), reference(processor, imgs))
    assert table.verified == {True: True}


def test_a_calls_pixel_budget():
    """`size=` as the downsampling control passes it (a smaller pixel budget per call)."""
    processor = build_image_processor(256)
    table = PatchTable(processor)
    size = {"shortest_edge": 1024, "longest_edge": 4 * 1024}
    imgs = images([(256, 256), (512, 512)])
    assert_same(table(imgs, size), processor(images=imgs, size=size, return_tensors="pt"))


def test_images_not_rgb_are_left_to_the_processor():
    table = PatchTable(build_image_processor(256))
    assert table(images([(64, 64)], mode="L")) is None
    assert table(images([(64, 64)], mode="RGBA")) is None
    assert table([]) is None
    assert table.verified == {}  # nothing compared


def test_only_the_qwen2_vl_processor_itself():
    assert PatchTable.supports(build_image_processor(256))
    assert not PatchTable.supports(build_glm_image_processor(224))

    class Changed(Qwen2VLImageProcessorPil):
        pass

    assert not PatchTable.supports(Changed())


def test_a_table_that_differs_falls_back_with_a_warning():
    processor = build_image_processor(256)
    table = PatchTable(processor)
    table.table = table.table + np.float32(1e-6)  # as if a release changed the arithmetic
    imgs = images(ON_GRID)
    with pytest.warns(UserWarning, match="differ"):
        got = table(imgs)
    assert table.verified == {False: False}
    assert_same(got, reference(processor, imgs))
    assert table(imgs) is None  # from then on, the processor
    with pytest.warns(UserWarning, match="resized"):  # resized images are compared on their own
        table(images([(100, 70)]))
    assert table.verified == {False: False, True: False}


class _Tokenizer:
    """What ImageTextProcessor.process_images needs of a tokenizer (nothing but the image token)."""

    def convert_tokens_to_ids(self, token):
        return 7


@pytest.mark.parametrize("order", [[0, 1, 2], [0, 0, 1, 0, 2, 2], [2, 1, 2]])
def test_process_images_repeats_an_image_object_given_twice(order):
    """Rollouts of one question name one image object several times: it is processed once and
    its patches repeated, as the processor's output for the repeated list."""
    processor = ImageTextProcessor(_Tokenizer(), build_image_processor(256))
    distinct = images([(64, 64), (32, 96), (256, 256)])
    given = [distinct[i] for i in order]
    assert_same(processor.process_images(given), reference(processor.image_processor, given))


@pytest.mark.parametrize("kind", ["qwen", "downsampled", "tile"])
def test_take_images_picks_images_out_of_process_images(kind):
    """take_images(process_images(all), index) is process_images of those images, for each
    layout (native patches, a downsampling budget's, LLaVA's tiles), repeats and order included;
    so is process_images of a list naming an object twice (processed once)."""
    base = ImageTextProcessor(_Tokenizer(), build_image_processor(256))
    processor = {"qwen": base, "downsampled": DownsampledProcessor(base, 0.25, 1),
                 "tile": TileProcessor(_Tokenizer(), build_llava_image_processor(64), patch_size=8)}[kind]
    given = images([(64, 64), (100, 70), (256, 256), (32, 96)], seed=4)
    every = processor.process_images(given)
    for index in ([2, 0], [1, 1, 3, 1], [3]):
        want = processor.process_images([given[i] for i in index])
        got = processor.take_images(every, index)
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    repeated = [given[2], given[0], given[2], given[2]]
    separate = [given[2], given[0], given[2].copy(), given[2].copy()]  # equal pixels, other objects
    got, want = processor.process_images(repeated), processor.process_images(separate)
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_process_images_mixed_batch_equals_the_processor():
    processor = ImageTextProcessor(_Tokenizer(), build_image_processor(256))
    given = images([(64, 64), (100, 70), (32, 32)]) + images([(64, 64)], mode="L")  # one not RGB: the processor
    given.append(given[1])
    assert_same(processor.process_images(given), reference(processor.image_processor, given))


def test_the_downsampling_control_reads_its_base_table():
    """Each budget's processor shares the base's table (compared with the processor once per kind)
    and gives the processor's patches at the budget's pixel budget."""
    base = ImageTextProcessor(_Tokenizer(), build_image_processor(256))
    small = DownsampledProcessor(base, 0.25, 1)
    assert small.patch_table is base.patch_table
    imgs = images([(256, 256), (512, 512)])
    # both images have 64 tokens at full size (the 512 px one after the processor's resize): 0.25 keeps
    # 16 tokens of 32 x 32 px
    size = {"shortest_edge": 1024, "longest_edge": 16 * 1024}
    want = [base.image_processor(images=[im], size=size, return_tensors="pt") for im in imgs]
    got = small.process_images(imgs)
    assert torch.equal(got["pixel_values"], torch.cat([w["pixel_values"] for w in want]))
    assert torch.equal(got["image_grid_thw"], torch.cat([w["image_grid_thw"] for w in want]))
