"""Shared fixtures: tiny profiles and real-format fixture sources made on the fly."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def smoke_cfg() -> dict:
    return yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())


@pytest.fixture
def tiny_lt(smoke_cfg) -> dict:
    """An LT-14K section small enough for unit tests: 14 questions (7, 3, 3, 1) in 7 batches of 2."""
    lt = copy.deepcopy(smoke_cfg["lt14k"])
    lt.update(scale=0.001, num_batches=7, batch_size=2)
    return lt


def _img(i: int) -> Image.Image:
    return Image.new("RGB", (32, 24), ((37 * i) % 256, (91 * i) % 256, (13 * i) % 256))


def make_jsonl_source(folder: Path, n: int = 12) -> Path:
    (folder / "imgs").mkdir(parents=True)
    lines = []
    for i in range(n):
        _img(i).save(folder / "imgs" / f"{i}.png")
        lines.append(json.dumps({"id": f"q{i}", "image": f"imgs/{i}.png", "question": f"what is {i}?",
                                 "answer": str(i)}))
    path = folder / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def make_hf_source(folder: Path, n: int = 12) -> Path:
    import datasets

    ds = datasets.Dataset.from_list(
        [{"qid": i, "img": _img(i), "prompt": f"colour {i}?", "label": f"c{i}"} for i in range(n)],
        features=datasets.Features({"qid": datasets.Value("int64"), "img": datasets.Image(),
                                    "prompt": datasets.Value("string"), "label": datasets.Value("string")}))
    ds.save_to_disk(str(folder))
    return folder


def make_imagefolder_source(folder: Path, n: int = 12) -> Path:
    folder.mkdir(parents=True)
    meta = []
    for i in range(n):
        _img(i).save(folder / f"{i}.png")
        meta.append(json.dumps({"file_name": f"{i}.png", "question": f"q{i}", "answer": f"a{i}"}))
    (folder / "metadata.jsonl").write_text("\n".join(meta) + "\n")
    return folder
