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


def test_a_trained_student_is_evaluated_with_the_profiles_training_selector(tmp_path, monkeypatch):
    """The live bug of a hard-coded CDPruner: `training.selector: divprune` must reach evaluate."""
    from dataclasses import asdict

    from ltopd.bench.store import build_records, save_records
    from ltopd.models.loading import save_backbone
    from ltopd.models.tokenizer import build_tokenizer
    from ltopd.models.twins import twin_backbone
    from ltopd.tracking import ENV_PREFIX, Settings

    settings = Settings(f"sqlite:///{tmp_path}/m.db", "e", str(tmp_path / "a"), str(tmp_path / "parent.json"), "t")
    for key, value in asdict(settings).items():
        monkeypatch.setenv(f"{ENV_PREFIX}{key.upper()}", value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.tracking_uri)
    records = build_records("pope", {"n": 6}, 0, {"image_size": 128})
    save_records(records, tmp_path / "records")
    tok = build_tokenizer([r["question"] for r in records] * 3, 400)
    save_backbone(twin_backbone("qwen35-tiny", tok, seed=0), tmp_path / "model")
    spec = {"profile": "t", "reduction": {"floor": 1}, "evaluation": {"batch_size": 6},
            "training": {"selector": "divprune"}}
    for method, expected in (("ltopd", "divprune"), ("cdpruner", "cdpruner")):
        out = tmp_path / method
        assert main(["evaluate", "--spec", json.dumps(spec), "--backbone", "b", "--model", str(tmp_path / "model"),
                     "--records", str(tmp_path / "records"), "--method", method, "--budget", "0.05",
                     "--benchmark", "pope", "--seed", "0", "--out-dir", str(out)]) == 0
        assert json.loads((out / "metrics.json").read_text())["selector"] == expected


def test_snakemake_passes_training_selector_to_student_evaluations_only():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", "--configfile",
                           "config/smoke.yaml", "--config", "training={selector: divprune}", "--",
                           "runs/smoke/results/table2.csv"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = [line.split("Shell command:", 1)[-1] for line in proc.stdout.splitlines() if "ltopd evaluate" in line]
    trained = [c for c in commands if "--method ltopd " in c]
    untrained = [c for c in commands if "--method cdpruner " in c]
    assert trained and untrained
    assert all('"training": {"selector": "divprune"}' in c for c in trained)
    assert not any("divprune" in c for c in untrained)
