"""Every profile in config/ validates; bad profiles fail naming file, key and allowed values."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ltopd import config, layers
from ltopd.catalog import METHODS
from ltopd.grid import eval_jobs, table2_inputs

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "config").glob("*.yaml"))


def test_the_three_profiles_exist():
    assert {p.stem for p in PROFILES} >= {"default", "smoke", "paper"}


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_every_profile_validates(path):
    cfg = config.load(path)
    assert cfg["profile"] == path.stem
    assert sum(1 for _ in eval_jobs(cfg)) > 0


def _broken(tmp_path, mutate) -> Path:
    cfg = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    mutate(cfg)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("mutate, expected", [
    (lambda c: c["lt14k"].update(scal=0.1), ["lt14k", "unknown key(s) ['scal']", "allowed keys", "scale"]),
    (lambda c: c.pop("grid"), ["'grid' is a required property", "required keys"]),
    (lambda c: c["lt14k"].update(scale=0), ["lt14k.scale", "out of range", "> 0", "<= 1"]),
    (lambda c: c["lt14k"]["sources"]["pixmo"].update(kind="csv"),
     ["lt14k.sources.pixmo.kind", "allowed values", "jsonl"]),
    (lambda c: c["grid"]["methods"].append("ltopdd"), ["grid.methods", "'ltopdd'", "allowed values", "cdpruner"]),
    (lambda c: c["grid"].update(budgets=[1.5]), ["grid.budgets.0", "out of range"]),
    (lambda c: c["world"].update(image_sise=64), ["world", "image_sise", "allowed keys"]),
    (lambda c: c["world"].update(image_size=20), ["world", "image_size"]),
    (lambda c: c["lt14k"].update(batch_size=9), ["lt14k", "num_batches x batch_size = 1575"]),
    (lambda c: c["lt14k"]["sources"]["llava"].update(kind="jsonl"), ["lt14k.sources.llava.path", "required"]),
    (lambda c: c["grid"]["backbones"].append("qwen-huge"), ["grid.backbones", "qwen-huge", "defined backbones"]),
    (lambda c: c["pretrain"]["stages"][0]["tasks"].append("count"), ["pretrain.stages.0", "'count' cannot be posed"]),
    (lambda c: c["pretrain"]["stages"][1].update(bench=["vqav2"]),
     ["pretrain.stages.1.bench", "['vqav2'] unknown", "allowed values"]),
    (lambda c: c.update(seeds=[2**38]), ["seeds", "gate and pretraining items", "below"]),
    (lambda c: c["backbones"]["qwen35-tiny"].update(release="yes"), ["backbones.qwen35-tiny.release"]),
    (lambda c: c["pretrain"]["stages"][0]["tasks"].append("colour"),
     ["pretrain.stages.0.tasks", "['colour'] unknown", "allowed values"]),
    (lambda c: c["pretrain"]["stages"][0].update(objective="dense", bench=["pope"]),
     ["pretrain.stages.0", "a dense stage trains on world `tasks` items"]),
    (lambda c: c["pretrain"]["stages"][0].update(objective="pixels"), ["objective", "'pixels'", "answer"]),
    (lambda c: c["pretrain"]["stages"][1].update(bench=["gqa"], evidence=["pope"]),
     ["pretrain.stages.1.evidence", "['pope'] not among the stage's `bench`"]),
    (lambda c: c["pretrain"]["stages"][1].update(bench=["pope"], world={"min_objects": 1, "max_objects": 1}),
     ["pretrain.stages.1", "bench twin 'pope' cannot be posed in this world"]),
    # an MMBench count of five (one question in 36) cannot be posed there: a run's error 20 minutes in, before
    (lambda c: c["pretrain"]["stages"][1].update(bench=["mmbench"], world={"max_objects": 4, "min_object_px": 32}),
     ["pretrain.stages.1", "bench twin 'mmbench' cannot be posed in this world"]),
    (lambda c: c["pretrain"]["stages"][0].update(objective="words", bench=["textvqa"]),
     ["pretrain.stages.0", "a words stage trains on world `tasks` items"]),
    (lambda c: c["pretrain"]["stages"][0].update(objective="dense", text_only=True),
     ["pretrain.stages.0.text_only", "needs the images"]),
    (lambda c: c["pretrain"]["stages"][1].update(bench=["gqa"], evidence=["gqa"]),
     ["pretrain.stages.1.evidence.0", "'gqa'", "pope"]),
    (lambda c: c["backbones"]["qwen35-tiny"].update(evidence=["mme"]),
     ["backbones.qwen35-tiny.evidence.0", "'mme'", "pope"]),
    (lambda c: c["backbones"]["qwen35-tiny"].pop("evidence"),
     ["backbones.qwen35-tiny.evidence: []",
      "teach ['hrbench4k', 'mmbench', 'mmmu', 'muirbench', 'pope', 'vstar'] evidence-first"]),
    (lambda c: c["backbones"]["glm46v-tiny"].update(evidence=["pope"]),
     ["backbones.glm46v-tiny.evidence: ['pope']", "teach [] evidence-first"]),
    (lambda c: c["backbones"]["qwen35-tiny"].update(twin="qwen9"), ["backbones.qwen35-tiny.twin", "allowed values"]),
    (lambda c: c["evaluation"]["benchmarks"].pop("pope"),
     ["evaluation.benchmarks", "no entry for grid benchmark 'pope'"]),
    (lambda c: c["evaluation"]["benchmarks"].update(pope={"n": 7}), ["evaluation.benchmarks.pope.n", "multiple of 2"]),
    (lambda c: c["evaluation"]["benchmarks"].update(pope={"n": 8, "path": "x"}), ["evaluation.benchmarks.pope"]),
    (lambda c: c["evaluation"]["benchmarks"].update(popee={"n": 8}),
     ["evaluation.benchmarks", "'popee'", "allowed values"]),
    (lambda c: c["grid"]["methods"].append("mqt_llava"),
     ["grid.methods", "'mqt_llava' is not a known method", "allowed values"]),
    (lambda c: c["studies"]["table4"].update(backbones=["qwen-huge"]),
     ["studies.table4.backbones", "'qwen-huge'", "defined backbones"]),
    (lambda c: c["studies"]["table14"].update(benchmarks=["nope"]),
     ["studies.table14.benchmarks", "'nope'", "allowed values"]),
    (lambda c: c["studies"].update(table99={}), ["studies", "table99", "allowed keys"]),
    (lambda c: c["rl"].update(clip_hi=0.3), ["rl", "clip_hi", "allowed keys"]),
    (lambda c: c["rl"].update(overlong_cache=64), ["rl.overlong_cache", "64", "<= 16"]),
    (lambda c: c["training"].update(rollouts=1), ["training.rollouts", "['dapo', 'grpo', 'gspo']", ">= 2"]),
        (lambda c: c.pop("training"), ["training: required", "trained methods", "'ltopd'"]),
        (lambda c: c["efficiency"].update(backbones=["qwen35-huge"]),
         ["efficiency.backbones", "'qwen35-huge'", "defined backbones"]),
        (lambda c: c["efficiency"].update(benchmark="vqav2"), ["efficiency.benchmark", "'vqav2'", "allowed values"]),
        (lambda c: c["efficiency"].pop("methods"), ["efficiency", "'methods' is a required property"]),
        (lambda c: c["efficiency"]["methods"].append("downsample"),  # the latency protocol times selections
         ["efficiency.methods", "'downsample' is not a method Table 5 can time", "'hiprune'"]),
        # a release's gates are part of its recipe: their reduced setting is the profile's, not a default
        (lambda c: c["pretrain"]["gates"].pop("selector"), ["pretrain.gates", "'selector' is a required property"]),
        (lambda c: c["pretrain"].pop("gates"), ["pretrain.gates: required because backbones", "'qwen35-tiny'"]),
        (lambda c: c["pretrain"]["gates"].update(selector="cd-pruner"),
         ["pretrain.gates.selector", "'cd-pruner'", "allowed values"]),
        (lambda c: c["training"].update(distributed={"strategy": "zero3", "num_processes": 8}),
         ["training.distributed.strategy", "fsdp"]),
    (lambda c: c["pretrain"]["stages"][0].update(styles=["fancy"]),
     ["pretrain.stages.0.styles.0", "allowed values", "onethinker"]),
    (lambda c: c["learnable_merge"].update(prior="uniform"),
     ["learnable_merge.prior", "'uniform' is not allowed", "allowed values: ['similarity', 'equal']"]),
    (lambda c: c["learnable_merge"].update(input="sum"),
     ["learnable_merge.input", "'sum' is not allowed", "allowed values: ['difference', 'mean']"]),
    (lambda c: c["learnable_merge"].update(hidden=0), ["learnable_merge.hidden", "out of range", ">= 1"]),
    (lambda c: c["learnable_merge"].update(bound=0), ["learnable_merge.bound", "out of range", "> 0"]),
    (lambda c: c["learnable_merge"].update(width=3), ["learnable_merge", "unknown key(s) ['width']", "hidden"]),
])
def test_bad_profiles_name_file_key_and_allowed_values(tmp_path, mutate, expected):
    path = _broken(tmp_path, mutate)
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    msg = str(err.value)
    assert str(path) in msg
    for part in expected:
        assert part in msg, (part, msg)


def test_missing_and_unparsable_files(tmp_path):
    with pytest.raises(config.ConfigError, match="not found"):
        config.load(tmp_path / "nope.yaml")
    (tmp_path / "x.yaml").write_text("a: [1,\n")
    with pytest.raises(config.ConfigError, match="not valid YAML"):
        config.load(tmp_path / "x.yaml")


def test_grid_expansion_rules():
    cfg = config.load(ROOT / "config" / "default.yaml")
    cfg = copy.deepcopy(cfg)
    cfg["grid"].update(methods=["full", "cdpruner", "ltopd"], budgets=[0.2, 0.05], benchmarks=["pope"])
    for key in ("seeded_methods", "student_full_tokens"):  # the default's; their rules: the next test
        cfg["grid"].pop(key, None)
    studies = cfg.pop("studies")
    jobs = {(j.method, j.budget) for j in eval_jobs(cfg)}
    assert jobs == {("full", 1.0), ("cdpruner", 0.2), ("cdpruner", 0.05), ("ltopd", 0.05)}
    # a study adds its own methods at the smallest budget, on its backbones and benchmarks, once each
    cfg["studies"] = {"table4": studies["table4"], "table6": {"benchmarks": ["gqa"]}}
    jobs = list(eval_jobs(cfg))
    assert len(jobs) == len(set(jobs))
    extra = {(j.backbone, j.method, j.budget, j.benchmark) for j in jobs} - {
        ("qwen35-tiny", m, b, "pope")
        for m, b in [("full", 1.0), ("cdpruner", 0.2), ("cdpruner", 0.05), ("ltopd", 0.05)]}
    assert extra == {(bb, m, b, "pope") for bb in ("glm46v-tiny", "llava-ov-tiny")
                     for m, b in [("full", 1.0), ("cdpruner", 0.05), ("ltopd", 0.05)]} | {
        ("qwen35-tiny", m, b, "gqa") for m, b in [("full", 1.0), ("cdpruner", 0.05), ("grpo", 0.05), ("gspo", 0.05),
                                                  ("dapo", 0.05), ("ltopd", 0.05)]}
    assert all("grpo" not in f for f in table2_inputs(cfg))  # Table 2 reads the grid's evaluations only
    assert METHODS["ltopd"].kind == "trained" and METHODS["divprune"].kind == "selector"


def test_table2_leaves_the_ablation_variants_to_their_tables() -> None:
    from ltopd.catalog import TABLES, ablation_variants
    from ltopd.grid import ablation_inputs, ablation_tables, table2_methods

    cfg = config.load(ROOT / "config" / "default.yaml")
    variants = {"ltopd_no_plateau", "ltopd_forward_kl", "ltopd_reverse_kl", "ltopd_teacher_ema", "ltopd_trust_region"}
    assert ablation_variants() == variants and "ltopd" in table2_methods(cfg)
    assert table2_methods(cfg) == [m for m in cfg["grid"]["methods"] if m not in variants]
    assert not [f for f in table2_inputs(cfg) if any(f"/{v}/" in f for v in variants)]
    # each variant is read by the ablation tables, beside LT-OPD, full tokens and the blind twin (the gates)
    read = {t: {f.split("/")[3] for f in ablation_inputs(cfg, t)} for t in ablation_tables(cfg)}
    assert read == {t: {"full", "blind", *TABLES[t].methods} for t in ("table7", "table12", "appendix_h")}
    assert set().union(*read.values()) >= variants


def test_seeded_methods_and_student_full_tokens_shape_the_grid(smoke_cfg):
    cfg = copy.deepcopy(smoke_cfg)
    cfg["seeds"] = [0, 1, 2]
    cfg["grid"].update(seeded_methods=["full", "cdpruner", "ltopd"], student_full_tokens=True)
    cfg.pop("studies")
    jobs = {(j.method, j.budget, j.seed) for j in eval_jobs(config.validate(cfg, source="t"))
            if j.benchmark == "vstar"}
    assert {s for m, b, s in jobs if m == "ltopd"} == {0, 1, 2}
    assert {s for m, b, s in jobs if m == "ltopd_trust_region"} == {0}  # not seeded: first seed, labelled 1 seed
    assert {b for m, b, s in jobs if m == "ltopd"} == {0.05, 1.0}  # the student's full-token score too
    assert {b for m, b, s in jobs if m == "cdpruner"} == {0.05}
    bad = copy.deepcopy(cfg)
    bad["grid"]["seeded_methods"] = ["cdpruner", "sfft"]
    with pytest.raises(config.ConfigError) as e:
        config.validate(bad, source="t")
    assert "['sfft'] are not known methods" in str(e.value) and "must include 'full'" in str(e.value)
    narrow = copy.deepcopy(cfg)  # a known method outside the grid is ignored (a narrower grid keeps the list)
    narrow["grid"]["seeded_methods"] = ["full", "ltopd", "sft"]
    config.validate(narrow, source="t")


def test_reduction_defaults_are_read_from_the_profile(smoke_cfg):
    from ltopd.grid import ReductionDefaults, reduction_defaults

    for name, floor in (("default", 1), ("smoke", 1), ("paper", 32)):
        cfg = config.load(ROOT / "config" / f"{name}.yaml")
        assert reduction_defaults(cfg) == ReductionDefaults("cdpruner", 0.05, floor), name
    cfg = copy.deepcopy(smoke_cfg)
    cfg["training"]["selector"], cfg["grid"]["budgets"], cfg["reduction"]["floor"] = "divprune", [0.2, 0.1], 4
    assert reduction_defaults(config.validate(cfg, source="t")) == ReductionDefaults("divprune", 0.1, 4)
    # a job's spec holds the sections it depends on: the others are None, not a default
    assert reduction_defaults({"profile": "x", "reduction": {"floor": 2}}) == ReductionDefaults(None, None, 2)


def test_a_profile_training_with_divprune_compares_against_divprune(smoke_cfg):
    """The studies' untrained-student row (Tables 3, 4, 6, 14; Figure 4's S_pruned) is the
    profile's training.selector: its evaluations are DivPrune's, CDPruner is not asked for."""
    from ltopd.grid import study_inputs, study_jobs, study_scope

    cfg = copy.deepcopy(smoke_cfg)
    cfg["training"]["selector"] = "divprune"
    cfg["grid"]["methods"] = [m for m in cfg["grid"]["methods"] if m != "cdpruner"]
    cfg = config.validate(cfg, source="t")
    for study in cfg["studies"]:
        methods = {j.method for j in study_jobs(cfg, study)}
        assert "divprune" in methods and "cdpruner" not in methods, study
        assert study_scope(cfg, study)[2:] == (0.05, "divprune")
    assert {j.method for j in eval_jobs(cfg)} >= {"divprune"} and "cdpruner" not in {j.method for j in eval_jobs(cfg)}
    assert any("/divprune/0.05/" in f for f in study_inputs(cfg, "figure4"))


def test_efficiency_needs_the_students_selector(smoke_cfg):
    cfg = copy.deepcopy(smoke_cfg)
    cfg.pop("studies")
    cfg.pop("efficiency")
    cfg.pop("training")
    cfg["grid"]["methods"] = ["full", "blind", "cdpruner"]
    config.validate(copy.deepcopy(cfg), source="t")  # nothing trained: no training section needed
    cfg["efficiency"] = {"methods": ["full", "cdpruner"]}
    with pytest.raises(config.ConfigError, match="training: required because of efficiency"):
        config.validate(cfg, source="t")


def test_yaml_typed_reads_nested_strings_as_yaml_scalars():
    assert config.yaml_typed({"seeds": ["0", "1"], "grid": {"budgets": ["0.05"], "methods": ["full"]},
                              "flag": "true", "name": "cdpruner", "none": "null", "empty": ""}) == {
        "seeds": [0, 1], "grid": {"budgets": [0.05], "methods": ["full"]}, "flag": True, "name": "cdpruner",
        "none": None, "empty": ""}
    assert layers.merged({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": 3}, "d": [2]}) == {
        "a": {"b": 3, "c": 2}, "d": [2]}


def _snakemake_dry(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_snakemake_config_overrides_keep_their_types_on_every_profile(tmp_path):
    for profile in ("default", "smoke"):
        extra = [] if profile == "default" else ["--configfile", f"config/{profile}.yaml"]
        proc = _snakemake_dry(*extra, "--config", "seeds=[0,1]", "grid={budgets: [0.05], methods: [full, cdpruner]}",
                              "--", f"{'runs/smoke/' if profile == 'smoke' else ''}results/table2.csv")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        out = proc.stdout + proc.stderr
        assert "seed1/metrics.json" in out and "/cdpruner/0.05/" in out and "/divprune/" not in out


def test_snakemake_names_file_key_value_and_allowed_values_of_a_bad_profile(smoke_cfg, tmp_path):
    bad = dict(smoke_cfg, seedz=[0])
    bad["grid"] = dict(bad["grid"], budgets=[0.05, 1.5])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    proc = _snakemake_dry("--configfile", str(path))
    assert proc.returncode != 0
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) <= 6, lines
    text = "\n".join(lines)
    assert str(path) in text and "seedz" in text and "allowed keys" in text and "grid.budgets.1" in text
    assert "Failed validating" not in text and "Traceback" not in text


def test_posing_verdicts_are_read_back_from_their_file_until_the_drawing_code_changes(tmp_path, monkeypatch):
    """A parse reads a twin's posing verdict from the cache file instead of drawing 400 items
    again; a verdict (error or None) survives the round trip, and other drawing code draws anew."""
    import ltopd.bench.suites as suites

    monkeypatch.setenv("LTOPD_CACHE_DIR", str(tmp_path))
    draws = []
    real = suites.synthetic_records

    def counted(name, n, seed, world):
        draws.append(name)
        return real(name, n, seed, world)

    monkeypatch.setattr(suites, "synthetic_records", counted)
    narrow = json.dumps({"min_objects": 1, "max_objects": 1}, sort_keys=True)
    ask = config._posing_error.__wrapped__  # past the in-memory cache: as a new parse would
    first = [ask("pope", narrow), ask("vstar", "{}")]
    assert draws == ["pope", "vstar"] and first[0] is not None and first[1] is None
    assert [ask("pope", narrow), ask("vstar", "{}")] == first and draws == ["pope", "vstar"]
    assert config.posing_cache_file() == tmp_path / "posable.json"
    monkeypatch.setattr(config, "_drawing_code", lambda: {"bench/suites/pope.py": "edited"})
    assert ask("pope", narrow) == first[0] and draws == ["pope", "vstar", "pope"]
