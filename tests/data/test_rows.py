"""ltopd.data.rows against the reference: ``list(dataset)``, the library's row-by-row decoding."""
from __future__ import annotations

import io

import datasets
import numpy as np
import pytest
from PIL import Image

from ltopd.data.records import FEATURES, encode_image
from ltopd.data.rows import rows

EXIF_ORIENTATION = 0x0112


def _image(rng: np.random.Generator, mode: str, size=(23, 17)) -> Image.Image:
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    arr = rng.integers(0, 256, (size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(arr.squeeze(-1) if channels == 1 else arr, mode)


def _jpeg_rotated(rng: np.random.Generator, orientation: int) -> dict:
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    _image(rng, "RGB").save(buf, format="JPEG", exif=exif.tobytes())
    return {"bytes": buf.getvalue(), "path": None}


def _png(img: Image.Image) -> dict:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def _assert_same(ours: list[dict], reference: list[dict]) -> None:
    assert len(ours) == len(reference)
    for a, b in zip(ours, reference, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            x, y = a[key], b[key]
            if isinstance(y, list) and y and isinstance(y[0], Image.Image):
                assert len(x) == len(y)
                pairs = zip(x, y, strict=True)
            elif isinstance(y, Image.Image):
                pairs = [(x, y)]
            else:
                assert x == y, key
                continue
            for i, j in pairs:
                assert type(i) is type(j) and (i.mode, i.size) == (j.mode, j.size), key
                assert np.array_equal(np.asarray(i), np.asarray(j)), key


def test_benchmark_records_equal_the_librarys_rows(tmp_path) -> None:
    """The records' schema with WebP (RGB, RGBA) and PNG (L, P) images, several per row, an
    empty image list, a saved and reloaded dataset, then a shuffled selection of it."""
    rng = np.random.default_rng(0)
    recs = []
    for i in range(12):
        imgs = [_image(rng, m) for m in ("RGB", "RGBA", "L")[: i % 4]]
        if i % 5 == 0:
            imgs.append(_image(rng, "RGB").convert("P"))
        recs.append({"id": f"q{i}", "source": "s", "batch": i // 4, "position": i % 4,
                     "images": [encode_image(im) for im in imgs], "question": f"what {i}?",
                     "options": [f"o{k}" for k in range(i % 3)], "answer": str(i), "response": "",
                     "task": "t", "meta": "{}"})
    datasets.Dataset.from_list(recs, features=FEATURES).save_to_disk(str(tmp_path / "ds"))
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    assert any(not r["images"] for r in recs) and any(len(r["images"]) > 1 for r in recs)
    _assert_same(rows(ds), list(ds))
    shuffled = ds.shuffle(seed=3).select(range(7))
    _assert_same(rows(shuffled), list(shuffled))
    assert [r["id"] for r in rows(shuffled)] != [r["id"] for r in rows(ds)][:7]


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_exif_orientation_mode_conversion_and_paths_as_the_library_decodes(tmp_path, orientation) -> None:
    """An EXIF-rotated JPEG turned upright, a feature's mode applied, an image stored by path,
    a missing image, an undecoded column and an image nested in a struct."""
    rng = np.random.default_rng(orientation)
    on_disk = tmp_path / "a.png"
    _image(rng, "RGBA").save(on_disk)
    features = datasets.Features({
        "upright": datasets.Image(),
        "as_rgb": datasets.Image(mode="RGB"),
        "by_path": datasets.Image(),
        "raw": datasets.List(datasets.Image(decode=False)),
        "nested": {"img": datasets.Image(), "n": datasets.Value("int32")},
    })
    data = [{"upright": _jpeg_rotated(rng, orientation), "as_rgb": _png(_image(rng, "RGBA")),
             "by_path": {"bytes": None, "path": str(on_disk)}, "raw": [_png(_image(rng, "L"))],
             "nested": {"img": _png(_image(rng, "L")), "n": 4}},
            {"upright": None, "as_rgb": _png(_image(rng, "L")), "by_path": None, "raw": [],
             "nested": {"img": None, "n": 5}}]
    ds = datasets.Dataset.from_list(data, features=features)
    ours, reference = rows(ds), list(ds)
    _assert_same(ours, reference)
    assert ours[0]["upright"].size == ((17, 23) if orientation in (6, 8) else (23, 17))  # turned upright
    assert ours[0]["as_rgb"].mode == "RGB" and ours[0]["raw"][0].keys() == {"bytes", "path"}
    assert np.array_equal(np.asarray(ours[0]["nested"]["img"]), np.asarray(reference[0]["nested"]["img"]))


def test_a_dataset_with_an_output_format_is_read_as_the_library_formats_it(tmp_path) -> None:
    """A type, a column subset, a transform, and a format saved with the dataset."""
    rng = np.random.default_rng(1)
    features = datasets.Features({"img": datasets.Image(), "n": datasets.Value("int32")})
    ds = datasets.Dataset.from_list([{"img": _png(_image(rng, "RGB")), "n": i} for i in range(3)], features=features)
    for formatted in (ds.with_format("numpy"), ds.with_format(columns=["n"]),
                      ds.with_transform(lambda batch: {"n": [n * 2 for n in batch["n"]]})):
        ours, reference = rows(formatted), list(formatted)
        assert len(ours) == len(reference) and all(a.keys() == b.keys() for a, b in zip(ours, reference))
        assert all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for a, b in zip(ours, reference) for k in a)
    assert rows(ds.with_format(columns=["n"]))[0] == {"n": 0}
    assert rows(ds.with_transform(lambda batch: {"n": [n * 2 for n in batch["n"]]}))[2] == {"n": 4}
    ds.with_format("numpy").save_to_disk(str(tmp_path / "numpy"))
    saved = datasets.load_from_disk(str(tmp_path / "numpy"))
    assert isinstance(rows(saved)[0]["img"], np.ndarray)  # the saved format, as list() reads it


def test_rows_with_equal_image_bytes_share_one_decoded_image(tmp_path, monkeypatch) -> None:
    """A benchmark's questions about one picture (equal bytes) get one image object, decoded once;
    equal bytes under another mode are decoded on their own; every row still equals list(ds)."""
    import ltopd.data.rows as rows_module

    rng = np.random.default_rng(2)
    pictures = [encode_image(_image(rng, "RGB")) for _ in range(3)]
    order = [0, 0, 0, 1, 2, 2, 0]
    features = datasets.Features({"images": datasets.List(datasets.Image()), "grey": datasets.Image(mode="L"),
                                  "n": datasets.Value("int32")})
    data = [{"images": [pictures[p], pictures[(p + 1) % 3]], "grey": pictures[p], "n": i} for i, p in enumerate(order)]
    datasets.Dataset.from_list(data, features=features).save_to_disk(str(tmp_path / "ds"))
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    decodes = []
    real = rows_module._decode_bytes
    monkeypatch.setattr(rows_module, "_decode_bytes", lambda data, feature: decodes.append(1) or real(data, feature))
    ours = rows(ds)
    _assert_same(ours, list(ds))
    assert len(decodes) == 3 + 3  # each picture once as stored (RGB) and once as "grey" asks (L), not 14 + 7
    assert ours[0]["images"][0] is ours[1]["images"][0] is ours[6]["images"][0] is ours[4]["images"][1]
    assert ours[0]["images"][0] is not ours[0]["grey"] and ours[0]["grey"] is ours[1]["grey"]
    assert ours[3]["images"][0] is not ours[4]["images"][0]
