"""A `datasets` dataset's rows, read at once: what ``list(dataset)`` gives, at a third of its cost.

``list(dataset)`` formats row by row (an Arrow slice, a copy of the features, the decoders'
dispatch): about 0.9 ms a row on these machines, three times the decoding of a 256 px image
(benchmark records: a student's evaluation job reads ~5,500 of them, an LT-OPD training 1,400).
Here the Arrow table is converted once and each image is decoded as ``datasets.Image`` decodes
it: opened from its bytes, loaded, turned upright by its EXIF orientation, converted to the
feature's mode. Columns of any other decoded type, and images stored by path, go through the
library's own decoder; a dataset with an output format (a type, a column subset, a transform) is
read by ``list`` itself. The whole table is converted in memory (a record set: tens of MB).

Rows whose images have equal bytes (a benchmark's questions about one picture: POPE asks ~18 about
each of its scenes) share one image object, decoded once; images are read, never modified,
downstream, and the processor and the vision tower then work once per object too.
"""

from __future__ import annotations

import io
from typing import Any

import datasets
from PIL import Image, ImageOps


def _decode_image(value: dict[str, Any] | None, feature: datasets.Image, decoded: dict[tuple, Any]) -> Any:
    """``feature.decode_example(value)`` for an image stored as bytes (the library's for a path);
    equal bytes are decoded once (``decoded``: (mode, bytes) -> image, one per read)."""
    if value is None or not feature.decode:
        return value
    if value.get("bytes") is None:
        return feature.decode_example(value)
    key = (feature.mode, value["bytes"])
    if key not in decoded:
        decoded[key] = _decode_bytes(value["bytes"], feature)
    return decoded[key]


def _decode_bytes(data: bytes, feature: datasets.Image) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    if image.getexif().get(Image.ExifTags.Base.Orientation) is not None:
        image = ImageOps.exif_transpose(image)
    if feature.mode and feature.mode != image.mode:
        image = image.convert(feature.mode)
    return image


def _image_list(feature: Any) -> datasets.Image | None:
    """The image feature of a list-of-images column, else None."""
    inner = getattr(feature, "feature", None)
    is_list = isinstance(feature, datasets.List | datasets.LargeList)
    return inner if is_list and isinstance(inner, datasets.Image) else None


def _plain(ds: datasets.Dataset) -> bool:
    """No output format: ``list(ds)`` gives every column, as Python objects, untransformed."""
    fmt = ds.format
    return fmt["type"] is None and not fmt["format_kwargs"] and list(fmt["columns"]) == ds.column_names \
        and not fmt["output_all_columns"]


def rows(ds: datasets.Dataset) -> list[dict[str, Any]]:
    """Every row of ``ds`` (its indices mapping applied), equal to ``list(ds)``."""
    if not _plain(ds):
        return list(ds)
    images, lists, other = {}, {}, {}
    for name, feature in ds.features.items():
        if isinstance(feature, datasets.Image):
            images[name] = feature
        elif (inner := _image_list(feature)) is not None:
            lists[name] = inner
        elif datasets.features.features.require_decoding(feature):
            other[name] = feature
    out = ds.with_format("arrow")[:].to_pylist()
    decoded: dict[tuple, Any] = {}
    for row in out:
        for name, feature in images.items():
            row[name] = _decode_image(row[name], feature, decoded)
        for name, feature in lists.items():
            if row[name] is not None:
                row[name] = [_decode_image(v, feature, decoded) for v in row[name]]
        for name, feature in other.items():
            row[name] = datasets.features.features.decode_nested_example(feature, row[name])
    return out
