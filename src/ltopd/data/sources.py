"""LT-14K sources as index-addressable pools of records (format: docs/design.md).

A pool is sampled by index, so a synthetic source only renders the items actually picked and a
real source only decodes their images. Real sources come from local paths in four formats:
a `datasets` dataset saved with save_to_disk, a JSONL file (image paths relative to the file),
or an image folder with a metadata.jsonl (the `datasets` imagefolder loader).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from ltopd.jsonl import JsonlError, read_jsonl

# record field -> default column name in a real source
DEFAULT_FIELDS = {
    "id": "id", "question": "question", "answer": "answer", "image": "image",
    "options": "options", "response": "response", "task": "task",
}
REQUIRED = ("question", "answer", "image")


class SourceError(ValueError):
    """A source path is missing, empty, short of its quota or lacks a needed field (one line;
    `ltopd.cli` prints it without a traceback)."""

    one_line = True


@dataclass
class Pool:
    name: str
    size: int
    get: Callable[[int], dict[str, Any]]


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_record(name: str, i: int, row: dict, fields: dict[str, str], load_image) -> dict[str, Any]:
    f = {**DEFAULT_FIELDS, **fields}
    if "conversations" in f and f["conversations"] in row:  # LLaVA-style chat JSON
        turns = row[f["conversations"]]
        question = turns[0]["value"].replace("<image>", "").strip()
        answer = response = turns[1]["value"].strip()
    else:
        question, answer = str(row[f["question"]]), str(row[f["answer"]])
        response = str(row.get(f["response"]) or answer)
    rid = row.get(f["id"], i)
    return {
        "id": f"{name}-{rid}",
        "source": name,
        "images": [load_image(x) for x in _as_list(row[f["image"]])],
        "question": question,
        "options": [str(o) for o in (row.get(f["options"]) or [])],
        "answer": answer,
        "response": response,
        "task": str(row.get(f["task"]) or "vqa"),
        "meta": json.dumps({"source_index": i}),
    }


def _check_fields(where: str, columns, fields: dict[str, str]) -> None:
    f = {**DEFAULT_FIELDS, **fields}
    need = ["conversations", "image"] if "conversations" in f else list(REQUIRED)
    missing = [f"{k} (column {f[k]!r})" for k in need if f[k] not in columns]
    if missing:
        raise SourceError(f"{where}: missing field(s) {missing}; available columns: {sorted(columns)}")


def _hf_pool(name: str, path: Path, fields: dict[str, str]) -> Pool:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError as e:
        raise SourceError(f"{path}: not a dataset saved with save_to_disk ({e})") from e
    if isinstance(ds, datasets.DatasetDict):
        ds = ds[next(iter(ds))]
    _check_fields(str(path), ds.column_names, fields)
    return Pool(name, len(ds), lambda i: _to_record(name, i, ds[i], fields, _pil))


def _jsonl_pool(name: str, path: Path, fields: dict[str, str]) -> Pool:
    try:
        rows = read_jsonl(path)
    except JsonlError as e:
        raise SourceError(str(e)) from e
    if rows:
        _check_fields(str(path), rows[0].keys(), fields)
    base = path.parent

    def load(p):
        full = base / p
        if not full.is_file():
            raise SourceError(f"{path}: image {p!r} not found at {full}")
        return _pil(full)

    return Pool(name, len(rows), lambda i: _to_record(name, i, rows[i], fields, load))


def _imagefolder_pool(name: str, path: Path, fields: dict[str, str]) -> Pool:
    import datasets

    if not (path / "metadata.jsonl").is_file() and not (path / "metadata.csv").is_file():
        raise SourceError(f"{path}: an image folder needs metadata.jsonl (file_name + question/answer columns)")
    ds = datasets.load_dataset("imagefolder", data_dir=str(path), split="train")
    _check_fields(str(path), ds.column_names, fields)
    return Pool(name, len(ds), lambda i: _to_record(name, i, ds[i], fields, _pil))


def _pil(x) -> Image.Image:
    img = x if isinstance(x, Image.Image) else Image.open(x)
    return img.convert("RGB")


def world_config(world: dict[str, Any]):
    """The profile's `world` section as a WorldConfig: pixel sizes scaled to image_size (times its
    object_scale), then overrides (ltopd.data.world.canvas.base_world)."""
    from ltopd.data.world.canvas import base_world

    return base_world(world)


def _synthetic_pool(name: str, quota: int, seed: int, pool_factor: float, world: dict) -> Pool:
    from ltopd.data.world import generate_item

    cfg = world_config(world)
    return Pool(name, max(1, math.ceil(quota * pool_factor)), lambda i: generate_item(name, i, seed, cfg))


LOADERS = {"hf_disk": _hf_pool, "jsonl": _jsonl_pool, "imagefolder": _imagefolder_pool}


def open_pool(name: str, spec: dict[str, Any], quota: int, pool_factor: float, world: dict) -> Pool:
    """Open source `name` as described by its config entry (kind, path, fields, seed)."""
    if spec["kind"] == "synthetic":
        return _synthetic_pool(name, quota, spec["seed"], pool_factor, world)
    path = Path(spec["path"])
    if not path.exists():
        raise SourceError(f"lt14k.sources.{name}.path: {path} does not exist")
    pool = LOADERS[spec["kind"]](name, path, spec.get("fields") or {})
    if pool.size == 0:
        raise SourceError(f"lt14k.sources.{name}.path: {path} holds no records")
    return pool
