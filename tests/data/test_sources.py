"""Real-format sources (HF on disk, JSONL, image folder) and their error messages."""
from __future__ import annotations

import json

import pytest

from conftest import make_hf_source, make_imagefolder_source, make_jsonl_source
from ltopd.data.sources import SourceError, open_pool


def _open(kind, path, fields=None):
    return open_pool("src", {"kind": kind, "path": str(path), "seed": 0, "fields": fields or {}}, 4, 1.0, {})


def test_jsonl_source(tmp_path):
    pool = _open("jsonl", make_jsonl_source(tmp_path / "j"))
    assert pool.size == 12
    rec = pool.get(3)
    assert rec["id"] == "src-q3" and rec["question"] == "what is 3?" and rec["answer"] == "3"
    assert rec["images"][0].size == (32, 24) and rec["images"][0].getpixel((0, 0)) == (111, 17, 39)
    assert rec["response"] == "3" and rec["options"] == [] and rec["source"] == "src"


def test_hf_disk_source_with_field_map(tmp_path):
    pool = _open("hf_disk", make_hf_source(tmp_path / "h"),
                 {"id": "qid", "image": "img", "question": "prompt", "answer": "label"})
    rec = pool.get(5)
    assert (rec["id"], rec["question"], rec["answer"]) == ("src-5", "colour 5?", "c5")
    assert rec["images"][0].getpixel((0, 0)) == (185, 199, 65)


def test_imagefolder_source(tmp_path):
    pool = _open("imagefolder", make_imagefolder_source(tmp_path / "f"))
    assert pool.size == 12
    answers = sorted(pool.get(i)["answer"] for i in range(12))
    assert answers == sorted(f"a{i}" for i in range(12))


def test_llava_conversations(tmp_path):
    (tmp_path / "i.png").write_bytes(b"")
    from PIL import Image
    Image.new("RGB", (8, 8)).save(tmp_path / "i.png")
    row = {"id": "x1", "image": "i.png", "conversations": [
        {"from": "human", "value": "<image>\nWhat colour is it?"}, {"from": "gpt", "value": "Black."}]}
    (tmp_path / "l.jsonl").write_text(json.dumps(row) + "\n")
    rec = _open("jsonl", tmp_path / "l.jsonl", {"conversations": "conversations"}).get(0)
    assert rec["question"] == "What colour is it?" and rec["answer"] == "Black." and rec["id"] == "src-x1"


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(SourceError, match=r"lt14k.sources.src.path: .*nope does not exist"):
        _open("jsonl", tmp_path / "nope")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SourceError, match="holds no records"):
        _open("jsonl", tmp_path / "empty.jsonl")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "q", "image": "x.png"}) + "\n")
    with pytest.raises(SourceError, match=r"bad.jsonl: missing field\(s\) \[\"answer \(column 'answer'\)\"\]"):
        _open("jsonl", tmp_path / "bad.jsonl")
    path = make_jsonl_source(tmp_path / "j2", n=2)
    (tmp_path / "j2" / "imgs" / "1.png").unlink()
    with pytest.raises(SourceError, match="image 'imgs/1.png' not found"):
        _open("jsonl", path).get(1)
    (tmp_path / "noisy.jsonl").write_text("{not json\n")
    with pytest.raises(SourceError, match=r"noisy.jsonl:1: not valid JSON"):
        _open("jsonl", tmp_path / "noisy.jsonl")
    (tmp_path / "folder").mkdir()
    with pytest.raises(SourceError, match="needs metadata.jsonl"):
        _open("imagefolder", tmp_path / "folder")
