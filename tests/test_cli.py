"""`ltopd score`: a predictions file scored from the command line, bad ids refused."""
from __future__ import annotations

import json

import pytest

from ltopd.cli import main


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_score_prints_the_official_metric(tmp_path, capsys):
    rows = [{"id": "a", "prediction": "<answer>A</answer>", "answer": "A", "options": ["red", "blue"]},
            {"id": "b", "prediction": "<answer>A</answer>", "answer": "B", "options": ["red", "blue"]}]
    assert main(["score", "--benchmark", "vstar", "--predictions", _write(tmp_path / "p.jsonl", rows)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["score"] == 50.0 and metrics["n"] == 2


def test_score_refuses_bad_ids(tmp_path):
    ref = _write(tmp_path / "r.jsonl", [{"id": "a", "answer": "A", "options": ["x", "y"]},
                                          {"id": "b", "answer": "B", "options": ["x", "y"]}])
    preds = _write(tmp_path / "p.jsonl", [{"id": "a", "prediction": "A"}, {"id": "a", "prediction": "B"}])
    with pytest.raises(SystemExit, match="missing id.*'b'"):
        main(["score", "--benchmark", "vstar", "--predictions", preds, "--records", ref])
    (tmp_path / "bad.jsonl").write_text("{oops\n")
    with pytest.raises(SystemExit, match="bad.jsonl:1: not valid JSON"):
        main(["score", "--benchmark", "vstar", "--predictions", str(tmp_path / "bad.jsonl")])
