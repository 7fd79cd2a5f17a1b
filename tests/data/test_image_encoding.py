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


def test_a_record_set_encodes_an_image_object_its_records_share_once(tmp_path, monkeypatch):
    """POPE's twin asks ~18 questions about each scene (one image object): save_records encodes each
    object once, and the saved bytes equal encoding every record's image on its own."""
    import ltopd.data.records as records_module
    from ltopd.bench.store import save_records
    from ltopd.bench.suites import synthetic_records

    recs = synthetic_records("pope", 40, 0, {"image_size": 64})
    objects = {id(im) for r in recs for im in r["images"]}
    assert len(objects) < len(recs)  # the twin shares its pictures
    calls = []
    real = records_module.encode_image
    monkeypatch.setattr(records_module, "encode_image", lambda img: calls.append(1) or real(img))
    save_records(recs, tmp_path / "pope")
    assert len(calls) == len(objects)
    saved = datasets.load_from_disk(str(tmp_path / "pope")).cast_column(
        "images", datasets.List(datasets.Image(decode=False)))
    assert [[im["bytes"] for im in row["images"]] for row in saved] == [
        [real(im)["bytes"] for im in r["images"]] for r in recs]
