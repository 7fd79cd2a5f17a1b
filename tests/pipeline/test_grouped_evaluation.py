"""Evaluation grouped per model: one vision pass per batch for all settings, the same answers as
one setting at a time, and the pipeline's jobs cover the grid exactly once."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import job_env
from ltopd.bench.store import build_records, save_records
from ltopd.cli import main
from ltopd.models.hook import choose
from ltopd.models.inference import predict_settings
from ltopd.models.loading import save_backbone
from ltopd.selectors import requirements
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.tokenizer import build_tokenizer

SETTINGS = [(1.0, "cdpruner"), (0.05, "cdpruner"), (0.2, "fastv"), (0.1, "random"), (0.05, "dart")]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    records = build_records("vstar", {"n": 6}, 0, {"image_size": 128})
    tok = build_tokenizer([r["question"] + " " + " ".join(r["options"]) for r in records] * 3, 400)
    return twin_backbone("qwen35-tiny", tok, seed=0), records


def _reference(bb, records, ratio, selector, batch_size, seed=0):
    """One setting the unshared way: the vision tower in selection, again in generation."""
    out = []
    with torch.no_grad():
        for start in range(0, len(records), batch_size):
            batch = bb.encode(records[start:start + batch_size])
            if ratio >= 1:
                selection = None
            else:
                features = bb.image_features(batch)
                inputs = bb.selection_inputs(batch, features, requirements(selector), seed + start)
                selection = choose(inputs, ratio, selector, 1)
            ids = bb.generate(batch, selection, do_sample=False, max_new_tokens=6)
            out += bb.tokenizer.batch_decode(ids, skip_special_tokens=False)
    return out


def test_shared_features_give_each_settings_own_answers(model):
    bb, records = model
    shared = predict_settings(bb, records, SETTINGS, floor=1, batch_size=4, max_new_tokens=6)
    for (ratio, selector), got in zip(SETTINGS, shared, strict=True):
        assert got == _reference(bb, records, ratio, selector, batch_size=4), (ratio, selector)


def test_one_vision_pass_per_batch(model, monkeypatch):
    bb, records = model
    calls = []
    ops = type(bb.ops)
    original = ops.image_features
    monkeypatch.setattr(ops, "image_features", lambda self, m, b: calls.append(1) or original(self, m, b))
    predict_settings(bb, records, SETTINGS[:2], floor=1, batch_size=3, max_new_tokens=4)
    assert len(calls) == 2  # two batches, two settings: one pass per batch


def test_group_job_writes_the_per_setting_jobs_bytes(tmp_path, monkeypatch):
    """`ltopd evaluate-group` over a backbone's training-free rows (full, blind, two selectors at
    two budgets, the downsampling control) == one `ltopd evaluate` per setting, byte for byte;
    one MLflow run per setting, named as before; the images of a record set go through the vision
    tower once per batch for all the rows that share them, once more per downsampled size (budgets
    whose images come out the same size share it)."""
    import ltopd.bench.evaluate as evaluate_module

    settings = job_env(tmp_path, monkeypatch)
    tok = None
    for bench in ("pope", "mmbench"):
        records = build_records(bench, {"n": 6}, 0, {"image_size": 128})
        save_records(records, tmp_path / "records" / bench)
        tok = tok or build_tokenizer([r["question"] for r in records] * 3, 400)
    save_backbone(twin_backbone("qwen35-tiny", tok, seed=0), tmp_path / "model")
    spec = json.dumps({"profile": "t", "reduction": {"floor": 1}, "evaluation": {"batch_size": 4}})
    common = ["--spec", spec, "--backbone", "b", "--model", str(tmp_path / "model")]
    rows = [("full", 1.0), ("blind", 1.0)] + [(m, b) for m in ("divprune", "random") for b in (0.05, 0.2)]
    # 128 px images: 0.05 and 0.15 keep 1 and 3 of 16 tokens, both resized to 1 x 1
    rows += [("downsample", b) for b in (0.05, 0.15, 0.2)]
    grid = [(m, b, bench) for bench in ("pope", "mmbench") for m, b in rows]
    targets = [{"method": m, "budget": b, "benchmark": bench, "records": str(tmp_path / "records" / bench),
                "out_dir": str(tmp_path / "group" / m / bench / f"{b:g}")} for m, b, bench in grid]
    passes = []
    original = evaluate_module.evaluate_settings
    monkeypatch.setattr(evaluate_module, "evaluate_settings", lambda bb, recs, bench, s, *a, **k: passes.append(
        (bench, len(s))) or original(bb, recs, bench, s, *a, **k))
    assert main(["evaluate-group", *common, "--seed", "0", "--settings", json.dumps(targets)]) == 0
    # per benchmark: full and the 4 selector settings share a pass; blind; one per downsampled size
    assert sorted(passes) == sorted([(bench, n) for bench in ("pope", "mmbench") for n in (5, 1, 1, 1)])
    for m, b, bench in grid:
        one = tmp_path / "one" / m / bench / f"{b:g}"
        assert main(["evaluate", *common, "--method", m, "--records", str(tmp_path / "records" / bench),
                     "--budget", str(b), "--benchmark", bench, "--seed", "0", "--out-dir", str(one)]) == 0
        group = tmp_path / "group" / m / bench / f"{b:g}"
        assert (group / "predictions.jsonl").read_bytes() == (one / "predictions.jsonl").read_bytes(), (m, b, bench)
        m_group, m_one = (json.loads((d / "metrics.json").read_text()) for d in (group, one))
        timing = {"wall_s", "questions_per_s", "settings_per_pass"}
        assert ({k: v for k, v in m_group.items() if k not in timing}
                == {k: v for k, v in m_one.items() if k not in timing})
        assert m_group["settings_per_pass"] == (5 if m in ("full", "divprune", "random") else 1)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(settings.tracking_uri)
    exp = client.get_experiment_by_name("e")
    names = sorted(r.info.run_name for r in client.search_runs([exp.experiment_id]))
    assert names.count("divprune@5% b pope s0 (evaluate)") == 2 and len(names) == 2 * len(grid)


def test_a_settings_item_without_a_method_is_the_method_flags():
    from ltopd.pipeline.evaluate import EvalTarget, parse_targets

    item = {"budget": 0.05, "benchmark": "pope", "records": "r", "out_dir": "o"}
    assert parse_targets(json.dumps([item]), "dart") == [EvalTarget("dart", 0.05, "pope", "r", "o")]
    assert parse_targets(json.dumps([{**item, "method": "full"}]), "dart")[0].method == "full"
    with pytest.raises(ValueError, match="item 0 names no method"):
        parse_targets(json.dumps([item]))


def test_groups_cover_the_grid_once():
    from ltopd import catalog, config, grid

    for profile in ("config/default.yaml", "config/smoke.yaml", "config/paper.yaml"):
        cfg = config.load(profile)
        groups = grid.eval_groups(cfg)
        flat = [j for jobs in groups.values() for j in jobs]
        assert sorted(map(repr, flat)) == sorted(map(repr, grid.eval_jobs(cfg)))
        assert all({(j.backbone, grid.group_student(j.method), j.seed) for j in jobs} == {key}
                   for key, jobs in groups.items())
        # one group per (backbone, seed) for the rows that load the backbone, one per student
        assert {k for k in groups if k[1] is None} == {(j.backbone, None, j.seed) for j in grid.eval_jobs(cfg)
                                                       if catalog.METHODS[j.method].kind != "trained"}
        names = [grid.group_name(*key) for key in groups]
        assert len(set(names)) == len(names) and all(n.isidentifier() for n in names)


def _pope_twin(tmp_path, monkeypatch, n: int) -> list[dict]:
    """n POPE records in tmp_path/records and an untrained twin in tmp_path/model; the records."""
    job_env(tmp_path, monkeypatch)
    records = build_records("pope", {"n": n}, 0, {"image_size": 128})
    save_records(records, tmp_path / "records")
    tok = build_tokenizer([r["question"] for r in records] * 3, 400)
    save_backbone(twin_backbone("qwen35-tiny", tok, seed=0), tmp_path / "model")
    return records


def test_the_blind_twin_is_asked_without_the_images(tmp_path, monkeypatch):
    """`--method blind` evaluates the same records with their images removed, full tokens with them."""
    import ltopd.bench.evaluate as evaluate_module

    _pope_twin(tmp_path, monkeypatch, 6)
    seen = {}
    original = evaluate_module.evaluate_settings
    monkeypatch.setattr(evaluate_module, "evaluate_settings",
                        lambda bb, recs, *a, **k: seen.setdefault(len(seen), recs) and original(bb, recs, *a, **k))
    spec = json.dumps({"profile": "t", "reduction": {"floor": 1}, "evaluation": {"batch_size": 4}})
    for method in ("full", "blind"):
        out = tmp_path / method
        assert main(["evaluate", "--spec", spec, "--backbone", "b", "--model", str(tmp_path / "model"), "--method",
                     method, "--records", str(tmp_path / "records"), "--budget", "1", "--benchmark", "pope",
                     "--seed", "0", "--out-dir", str(out)]) == 0
        assert json.loads((out / "metrics.json").read_text())["images"] == (method == "full")
    full, blind = seen[0], seen[1]
    assert all(r["images"] for r in full) and not any(r["images"] for r in blind)
    assert [r["question"] for r in blind] == [r["question"] for r in full]


def test_a_twin_taught_evidence_first_is_asked_with_the_instruction(tmp_path, monkeypatch):
    """With `evidence: [pope]` in the spec (the backbone's entry) POPE's questions carry the
    twin's instruction, in the written predictions too; without it they are the plain questions."""
    from ltopd.bench.evidence import instructed

    records = _pope_twin(tmp_path, monkeypatch, 4)
    asked = {}
    for evidence in ([], ["pope"]):
        spec = json.dumps({"profile": "t", "reduction": {"floor": 1}, "evaluation": {"batch_size": 4},
                           "evidence": evidence})
        out = tmp_path / f"e{len(evidence)}"
        assert main(["evaluate", "--spec", spec, "--backbone", "b", "--model", str(tmp_path / "model"), "--method",
                     "full", "--records", str(tmp_path / "records"), "--budget", "1", "--benchmark", "pope",
                     "--seed", "0", "--out-dir", str(out)]) == 0
        asked[len(evidence)] = [json.loads(line)["question"] for line in open(out / "predictions.jsonl")]
    assert asked[0] == [r["question"] for r in records]
    assert asked[1] == [instructed(r, "pope")["question"] for r in records]
    assert all(q.endswith("then answer yes or no.") for q in asked[1])


def test_snakemake_passes_a_twins_evidence_to_its_evaluations_only():
    """eval_group_spec: the default's qwen35-tiny (entry `evidence: [..., pope]`) is evaluated with
    it in --spec; glm46v-tiny (no such entry) without, so its evaluations' params are unchanged."""
    import json
    import subprocess
    import sys

    import yaml

    from conftest import ROOT

    def command(rule: str) -> str:
        dry = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", rule], cwd=ROOT,
                             capture_output=True, text=True)
        assert dry.returncode == 0, dry.stderr[-2000:]
        return next(line for line in dry.stdout.splitlines() if "ltopd evaluate-group" in line)

    evidence = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())["backbones"]["qwen35-tiny"]["evidence"]
    assert "pope" in evidence
    assert f'"evidence": {json.dumps(evidence)}' in command("evaluate_qwen35_tiny_s0")
    assert '"evidence"' not in command("evaluate_glm46v_tiny_s0")


def test_by_hand_evaluation_reads_the_backbones_evidence_from_the_profile(tmp_path, monkeypatch):
    """`ltopd evaluate --config P` (no Snakemake --spec) asks POPE as the backbone entry says."""
    import yaml

    from conftest import ROOT
    from ltopd.bench.evidence import instructed

    records = _pope_twin(tmp_path, monkeypatch, 4)
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["pretrain"]["stages"][1].update(bench=["pope"], evidence=["pope"])  # the stages that taught it
    for entry in cfg["backbones"].values():  # every twin of the profile trains on those stages
        entry["evidence"] = ["pope"]
    cfg["mlflow"] = {"tracking_uri": f"sqlite:///{tmp_path}/m.db", "experiment": "e",
                     "artifact_root": str(tmp_path / "a")}
    profile = tmp_path / "p.yaml"
    profile.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    assert main(["evaluate", "--config", str(profile), "--backbone", "qwen35-tiny", "--model", str(tmp_path / "model"),
                 "--method", "full", "--records", str(tmp_path / "records"), "--budget", "1", "--benchmark", "pope",
                 "--seed", "0", "--out-dir", str(out)]) == 0
    asked = [json.loads(line)["question"] for line in open(out / "predictions.jsonl")]
    assert asked == [instructed(r, "pope")["question"] for r in records]


def test_the_downsampling_control_resizes_each_budget_and_runs_no_selector(tmp_path, monkeypatch):
    """`--method downsample`: one evaluation per budget on images resized to its keep count
    (ltopd.models.downsample), every token of them kept; no selector runs."""
    import ltopd.bench.evaluate as evaluate_module
    import ltopd.models.inference as inference

    _pope_twin(tmp_path, monkeypatch, 4)
    monkeypatch.setattr(inference, "choose", lambda *a, **k: pytest.fail("a selector ran"))
    seen = []
    original = evaluate_module.evaluate_settings
    monkeypatch.setattr(evaluate_module, "evaluate_settings", lambda bb, recs, bench, settings, *a, **k: seen.append(
        (type(bb.processor).__name__, list(settings))) or original(bb, recs, bench, settings, *a, **k))
    spec = json.dumps({"profile": "t", "reduction": {"floor": 1}, "evaluation": {"batch_size": 4}})
    targets = [{"budget": b, "benchmark": "pope", "records": str(tmp_path / "records"),
                "out_dir": str(tmp_path / f"{b:g}")} for b in (0.05, 0.25)]
    assert main(["evaluate-group", "--spec", spec, "--backbone", "b", "--model", str(tmp_path / "model"),
                 "--method", "downsample", "--seed", "0", "--settings", json.dumps(targets)]) == 0
    assert seen == [("DownsampledProcessor", [(1.0, None)])] * 2
    for b in (0.05, 0.25):
        m = json.loads((tmp_path / f"{b:g}" / "metrics.json").read_text())
        assert (m["method"], m["ratio"], m["selector"], m["downsampled"]) == ("downsample", b, None, True)
