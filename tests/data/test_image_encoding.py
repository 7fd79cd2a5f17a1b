"""Record images are stored losslessly: what `datasets` decodes is the image that was encoded."""
import datasets
import numpy as np
import pytest
from PIL import Image

from ltopd.data.records import FEATURES, encode_image, encode_images


def _image(mode: str, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    channels = {"RGB": 3, "RGBA": 4}.get(mode)
    if channels:
        px = rng.integers(0, 256, (37, 53, channels), dtype=np.uint8)
        if mode == "RGBA":
            px[:5, :, 3] = 0  # fully transparent pixels whose colour must survive too
        return Image.fromarray(px, mode)
    img = Image.fromarray(rng.integers(0, 256, (37, 53), dtype=np.uint8), "L")
    return img if mode == "L" else img.convert("P")


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P"])
def test_datasets_decodes_the_same_pixels_and_mode(mode):
    img = _image(mode, seed=len(mode))
    rec = {"id": "r", "source": "s", "batch": 0, "position": 0, "images": [img, img.copy()], "question": "q",
           "options": [], "answer": "a", "response": "a", "task": "t", "meta": "{}"}
    back = datasets.Dataset.from_list([encode_images(rec)], features=FEATURES)[0]["images"]
    assert [b.mode for b in back] == [mode, mode]
    assert all(b.size == img.size and b.tobytes() == img.tobytes() for b in back)
    if mode == "P":
        assert back[0].getpalette() == img.getpalette()


def test_rgb_is_stored_as_webp_and_other_modes_as_png():
    assert encode_image(_image("RGB", 0))["bytes"][8:12] == b"WEBP"
    assert encode_image(_image("L", 0))["bytes"][:8] == b"\x89PNG\r\n\x1a\n"
