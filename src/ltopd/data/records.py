"""The shared question record (docs/design.md): its `datasets` schema and a stable content hash."""
from __future__ import annotations

import hashlib
import json
from typing import Any

import datasets
from PIL import Image

TEXT_FIELDS = ("id", "source", "question", "answer", "response", "task", "meta")

FEATURES = datasets.Features({
    "id": datasets.Value("string"),
    "source": datasets.Value("string"),
    "batch": datasets.Value("int32"),
    "position": datasets.Value("int32"),
    "images": datasets.List(datasets.Image()),
    "question": datasets.Value("string"),
    "options": datasets.List(datasets.Value("string")),
    "answer": datasets.Value("string"),
    "response": datasets.Value("string"),
    "task": datasets.Value("string"),
    "meta": datasets.Value("string"),
})


def hash_record(rec: dict[str, Any]) -> bytes:
    """Digest of a record's text and decoded pixels (not of the PNG encoding, which may vary)."""
    h = hashlib.sha256()
    text = {k: rec.get(k) for k in (*TEXT_FIELDS, "options", "batch", "position")}
    h.update(json.dumps(text, sort_keys=True, ensure_ascii=False).encode())
    for img in rec["images"]:
        h.update(f"{img.mode}:{img.size}".encode())
        h.update(img.tobytes())
    return h.digest()


# Lossless WebP stores the world's RGB images in half PNG's bytes (level 1) and decodes faster
# (measured on GQA's 256 px images: 26.7 vs 58.0 KB, 1.16 vs 1.54 ms); it holds RGB and RGBA
# only, so other modes keep PNG and every image decodes to its own pixels and mode. Effort
# quality 10, method 1: 39-43% of the encoding time of quality 50, method 2 for 0-6% more bytes
# (200 images each of V*Bench, OCRBench, TextVQA, MVBench at 256 px, HR-Bench at 512 px: e.g.
# V*Bench 2.78 vs 6.75 ms, 26.9 vs 26.3 KB); encoding was half of a record-set job's CPU.
WEBP_MODES = ("RGB", "RGBA")


def encode_image(img: Image.Image) -> dict[str, Any]:
    """One image as `datasets` Image bytes, losslessly (decoded: the same mode and pixels)."""
    import io

    buf = io.BytesIO()
    if img.mode in WEBP_MODES:
        img.save(buf, format="WEBP", lossless=True, quality=10, method=1, exact=True)
    else:
        img.save(buf, format="PNG", compress_level=1)
    return {"bytes": buf.getvalue(), "path": None}


def encode_images(rec: dict[str, Any], encoded: dict[int, tuple[Image.Image, dict]] | None = None) -> dict[str, Any]:
    """The record with its images encoded once, losslessly and fast (`encode_image`); `datasets`
    would otherwise re-encode each PIL image as PNG at the slow default level. Records sharing
    ``encoded`` (id -> (image, its encoding)) encode an image object they share once (a
    benchmark's questions about one picture)."""
    encoded = {} if encoded is None else encoded
    for image in rec["images"]:
        if id(image) not in encoded:
            encoded[id(image)] = (image, encode_image(image))  # the image kept: its id stays its own
    return {**rec, "images": [encoded[id(i)][1] for i in rec["images"]]}
