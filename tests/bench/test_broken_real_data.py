"""Broken real data under the paper profile's loaders (issue 54, fault 5): fixture files written
here, each fault one line naming the file, the row and the field, raised by the record loader
(the bench_records job, before any evaluation of the benchmark); the CLI prints it without a
traceback. The LT-14K sampler's short source: tests/data/test_lt14k.py."""
from __future__ import annotations

import base64
import csv
import io
from pathlib import Path

import pytest
from PIL import Image

from conftest import job_env
from ltopd.bench.suites.real import RealFormatError, load_real


def _png() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _tsv(path: Path, rows: list[dict]) -> Path:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, columns, delimiter="\t")
        w.writeheader()
        w.writerows(rows)
    return path


def _mmbench(n: int = 3) -> list[dict]:
    return [{"index": i, "image": _png(), "question": f"q{i}?", "A": "red", "B": "blue", "answer": "A",
             "category": "color", "l2-category": "attr"} for i in range(n)]


_record = None  # record_property of the running test: benchmarks/faults.py prints what it records


_recorded: list[str] = []


@pytest.fixture(autouse=True)
def _recorder(record_property):
    global _record
    _record = record_property
    _recorded.clear()
    yield
    _record = None


def _one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text
    if not _recorded:  # as ltopd.cli prints it (a test's first fault is shown)
        _recorded.append(text)
        _record("line", f"ltopd: {text}")
    return text


def test_a_whole_file_loads(tmp_path):
    assert len(load_real("mmbench", _tsv(tmp_path / "ok.tsv", _mmbench()))) == 3 * 2  # two rotations each


def test_an_image_that_does_not_decode(tmp_path):
    rows = _mmbench()
    rows[1]["image"] = base64.b64encode(b"\x89PNG\r\n\x1a\n cut short").decode()
    path = _tsv(tmp_path / "bad_image.tsv", rows)
    with pytest.raises(RealFormatError) as e:
        load_real("mmbench", path)
    assert _one_line(e).startswith(f"{path} (row 1), field 'image': image does not decode")


def test_a_missing_field(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "answer"} for r in _mmbench()]
    path = _tsv(tmp_path / "no_answer.tsv", rows)
    with pytest.raises(RealFormatError) as e:
        load_real("mmbench", path)
    assert _one_line(e).startswith(f"{path} (row 0): missing column 'answer' / 'answers' (the reference)")


def test_a_wrong_answer_type(tmp_path):
    rows = [{"index": i, "image": _png(), "question": "Is there a dog?", "answer": a, "category": "random"}
            for i, a in enumerate(["yes", "no", "7"])]
    path = _tsv(tmp_path / "pope.tsv", rows)
    with pytest.raises(RealFormatError) as e:
        load_real("pope", path)
    assert _one_line(e) == f"{path} (row 2), field 'answer': POPE's answer must be yes or no, got '7'"
    rows = _mmbench()
    rows[2]["answer"] = "F"
    path = _tsv(tmp_path / "letters.tsv", rows)
    with pytest.raises(RealFormatError) as e:
        load_real("mmbench", path)
    assert _one_line(e) == f"{path} (row 2), field 'answer': 'F' is neither an option letter nor an option"


def test_a_wrong_answer_type_in_a_parquet_split(tmp_path):
    import datasets

    ds = datasets.Dataset.from_list([{"id": str(i), "image": {"bytes": base64.b64decode(_png()), "path": None},
                                      "question": "q?", "answer": [1, 2], "category": "random"} for i in range(2)],
                                    features=datasets.Features({"id": datasets.Value("string"),
                                                                "image": datasets.Image(),
                                                                "question": datasets.Value("string"),
                                                                "answer": datasets.Sequence(datasets.Value("int32")),
                                                                "category": datasets.Value("string")}))
    ds.to_parquet(str(tmp_path / "pope.parquet"))
    with pytest.raises(RealFormatError) as e:
        load_real("pope", tmp_path / "pope.parquet")
    assert _one_line(e) == f"{tmp_path / 'pope.parquet'} (row 0), field 'answer': expected text, got list '[1, 2]'"


def test_an_empty_split(tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_text("index\timage\tquestion\tA\tB\tanswer\n")
    with pytest.raises(RealFormatError) as e:
        load_real("mmbench", path)
    assert _one_line(e).startswith(f"{path}: holds no rows (an empty split)")


def test_a_duplicated_question_id(tmp_path):
    rows = _mmbench()
    rows[2]["index"] = 0
    path = _tsv(tmp_path / "dup.tsv", rows)
    with pytest.raises(RealFormatError) as e:
        load_real("mmbench", path)
    assert _one_line(e) == (f"{path} (row 2), field 'index': duplicate question id '0' (first in row 0); "
                            "each question needs its own id")


def test_the_records_job_prints_the_one_line_and_fails(tmp_path, capsys, monkeypatch):
    """`ltopd build-bench` (rule bench_records) on a broken file: exit 1, the line, no traceback,
    no record set written."""
    import json

    from ltopd.cli import main

    job_env(tmp_path, monkeypatch)

    rows = _mmbench()
    rows[1]["image"] = "bm90IGFuIGltYWdl"  # base64 of "not an image"
    path = _tsv(tmp_path / "bad.tsv", rows)
    spec = {"profile": "t", "world": {"image_size": 128},
            "evaluation": {"benchmarks": {"mmbench": {"path": str(path)}}}}
    rc = main(["build-bench", "--spec", json.dumps(spec), "--benchmark", "mmbench", "--seed", "0",
               "--out", str(tmp_path / "out")])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("ltopd: ")]  # MLflow logs beside it
    assert rc == 1 and len(lines) == 1
    assert lines[0].startswith(f"ltopd: {path} (row 1), field 'image': image does not decode")
    assert not (tmp_path / "out").exists()
