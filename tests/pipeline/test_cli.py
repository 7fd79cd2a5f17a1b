"""`ltopd score` and `ltopd validate` from the command line: the official metric, and every bad
input answered with one line (no traceback)."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from ltopd.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_score_prints_the_official_metric(tmp_path, capsys):
    rows = [{"id": "a", "prediction": "<answer>A</answer>", "answer": "A", "options": ["red", "blue"]},
            {"id": "b", "prediction": "<answer>A</answer>", "answer": "B", "options": ["red", "blue"]}]
    assert main(["score", "--benchmark", "vstar", "--predictions", _write(tmp_path / "p.jsonl", rows)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["score"] == 50.0 and metrics["n"] == 2


def _one_line_error(capsys, argv: list[str], expected: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and expected in err, err


def test_score_answers_every_bad_input_with_one_line(tmp_path, capsys):
    ref = _write(tmp_path / "r.jsonl", [{"id": "a", "answer": "A", "options": ["x", "y"]},
                                          {"id": "b", "answer": "B", "options": ["x", "y"]}])
    preds = _write(tmp_path / "p.jsonl", [{"id": "a", "prediction": "A"}, {"id": "a", "prediction": "B"}])
    score = ["score", "--benchmark", "vstar", "--predictions"]
    _one_line_error(capsys, score + [preds, "--records", ref], "missing id")
    (tmp_path / "bad.jsonl").write_text("{oops\n")
    _one_line_error(capsys, score + [str(tmp_path / "bad.jsonl")], "bad.jsonl:1: not valid JSON")
    _one_line_error(capsys, score + [str(tmp_path / "none.jsonl")], "none.jsonl: No such file or directory")
    (tmp_path / "empty.jsonl").write_text("")
    _one_line_error(capsys, score + [str(tmp_path / "empty.jsonl")], "empty.jsonl: no predictions")
    no_field = _write(tmp_path / "nf.jsonl", [{"id": "a", "answer": "A"}])
    _one_line_error(capsys, score + [no_field], "nf.jsonl:1: no 'prediction' field")
    _one_line_error(capsys, ["score", "--benchmark", "VStar", "--predictions", preds],
                    "unknown benchmark 'VStar'; allowed values: ['vstar'")


def test_validate_checks_every_local_path_the_profile_names(tmp_path, capsys):
    from conftest import make_jsonl_source

    cfg = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    sources = cfg["lt14k"]["sources"]
    good = make_jsonl_source(tmp_path / "ok")
    sources["llava"] = {"quota": sources["llava"]["quota"], "seed": 1, "kind": "jsonl", "path": str(good)}
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump(cfg))
    assert main(["validate", "--config", str(profile)]) == 0
    assert "valid profile 'smoke'" in capsys.readouterr().out

    # a missing source, a source without its answer column, a checkpoint without config.json, a
    # real benchmark that is not there: each named by its key
    sources["llava"]["path"] = str(tmp_path / "missing.jsonl")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"question": "q", "image": "x.png"}) + "\n")
    sources["pixmo"] = {"quota": sources["pixmo"]["quota"], "seed": 1, "kind": "jsonl", "path": str(broken)}
    (tmp_path / "ckpt").mkdir()
    cfg["backbones"]["qwen35-tiny"] = {"family": "qwen35", "checkpoint": str(tmp_path / "ckpt")}
    cfg["evaluation"]["benchmarks"]["pope"] = {"path": str(tmp_path / "pope.tsv")}
    profile.write_text(yaml.safe_dump(cfg))
    assert main(["validate", "--config", str(profile)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for key in ("lt14k.sources.llava.path", "lt14k.sources.pixmo", "answer", "backbones.qwen35-tiny.checkpoint",
                "evaluation.benchmarks.pope.path"):
        assert key in err, (key, err)


def test_a_trained_student_is_evaluated_with_the_profiles_training_selector(tmp_path, monkeypatch):
    """The live bug of a hard-coded CDPruner: `training.selector: divprune` must reach evaluate."""
    from dataclasses import asdict

    from ltopd.bench.store import build_records, save_records
    from ltopd.models.loading import save_backbone
    from ltopd.tracking import ENV_PREFIX, Settings
    from ltopd.twins.architectures import twin_backbone
    from ltopd.twins.tokenizer import build_tokenizer

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
    # a student's job loads its student folder; the training-free rows share one job on the backbone
    trained = [c for c in commands if "/models/students/" in c]
    untrained = [c for c in commands if "/models/students/" not in c]
    assert any('"method": "ltopd"' in c for c in trained) and any('"method": "cdpruner"' in c for c in untrained)
    spec = lambda c: c.split("--spec ", 1)[1].split("' --", 1)[0]  # noqa: E731
    assert all('"training": {"selector": "divprune"}' in spec(c) for c in trained)
    assert not any("training" in spec(c) for c in untrained)
    # scheduling: record sets before anything else, then evaluation groups longest first
    import re

    from ltopd import config, grid, layers

    priority = {}
    for block in re.split(r"\n(?=rule \w+:)", proc.stdout):
        m, p = re.match(r"rule (\w+):", block), re.search(r"^\s*priority: (\d+)$", block, re.M)
        if m:
            priority.setdefault(m.group(1), set()).add(int(p.group(1)) if p else 0)
    cfg = layers.merged(config.read(root / "config" / "smoke.yaml"), {"training": {"selector": "divprune"}})
    planned = {name: ps for name, ps in priority.items() if name.startswith("evaluate_")}
    groups = {grid.group_name(*key): (key, jobs) for key, jobs in grid.eval_groups(cfg).items()
              if grid.group_name(*key) in planned}
    assert priority["bench_records"] == priority["fit_records"] == {1000} and priority.get("train", {0}) == {0}
    assert set(groups) == set(planned) and all(planned[n] == {len(jobs)} for n, (_, jobs) in groups.items())
    longest = max(groups.values(), key=lambda g: len(g[1]))
    assert longest[0][1] is None  # a backbone's training-free group
