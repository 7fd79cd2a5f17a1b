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


def encode_images(rec: dict[str, Any]) -> dict[str, Any]:
    """The record with its images as PNG bytes, encoded once with fast (still lossless)
    compression; `datasets` would otherwise re-encode each PIL image at the slow default level."""
    import io

    def png(img: Image.Image) -> dict[str, Any]:
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        return {"bytes": buf.getvalue(), "path": None}

    return {**rec, "images": [png(i) for i in rec["images"]]}
