"""A profile's external students (issue 56): validated, expanded by the grid into one evaluation
group each (every Table 2 benchmark at every seed, at its own budget), read by Table 2 and
tracked by DVC; the paper profile's commented entry for the authors' student validates once
uncommented."""
from __future__ import annotations

import re

import pytest
import yaml

from conftest import ROOT
from ltopd import config, grid
from ltopd.catalog import eval_setting, external_method, method

ENTRY = {"path": "external/tiny", "backbone": "qwen35-tiny", "selector": "divprune", "budget": 0.1, "floor": 4}


@pytest.fixture
def cfg() -> dict:
    return config.validate({**config.read(ROOT / "config" / "smoke.yaml"), "external_students": {"tiny": ENTRY}})


def test_its_row_is_a_student_of_its_own_evaluated_with_its_own_selector():
    row = external_method("tiny")
    assert (row, method(row).label, method(row).kind) == ("external-tiny", "tiny (external)", "trained")
    assert eval_setting(row, 0.1, "divprune") == (0.1, "divprune")
    assert grid.group_student(row) == row


def test_the_grid_evaluates_it_on_every_table2_benchmark_and_seed_at_its_budget(cfg):
    jobs = list(grid.external_jobs(cfg))
    assert {(j.backbone, j.method, j.budget, j.benchmark, j.seed) for j in jobs} == {
        ("qwen35-tiny", "external-tiny", 0.1, b, s) for b in cfg["grid"]["benchmarks"] for s in cfg["seeds"]}
    assert set(jobs) <= set(grid.eval_jobs(cfg))  # built by rule all / all_evaluations
    assert grid.eval_groups(cfg)[("qwen35-tiny", "external-tiny", 0)] == jobs  # one model: one job
    assert grid.group_name("qwen35-tiny", "external-tiny", 0) == "evaluate_qwen35_tiny_external_tiny_s0"
    assert grid.external_inputs(cfg) == [f"runs/smoke/results/eval/qwen35-tiny/external-tiny/0.1/{b}/seed0/metrics.json"
                                         for b in cfg["grid"]["benchmarks"]]
    assert not set(grid.external_inputs(cfg)) & set(grid.table2_inputs(cfg))  # a row of its own
    base = {**cfg, "external_students": {}}
    assert list(grid.eval_jobs(base)) == [j for j in grid.eval_jobs(cfg) if j.method != "external-tiny"]


def test_dvc_tracks_its_folder_and_entry_in_table2s_stage_only(cfg):
    stages = grid.dvc_stages(cfg, "config/smoke.yaml")
    assert "external/tiny" in stages["table2"]["deps"]
    assert "external_students" in stages["table2"]["params"][0]["config/smoke.yaml"]
    assert "external/tiny" not in stages["table5"]["deps"]


@pytest.mark.parametrize("change, message", [
    ({"backbone": "glm46v-tiny"}, "external_students.tiny.backbone: 'glm46v-tiny' is not Table 2's backbone; "
                                  "allowed values: ['qwen35-tiny']"),
    ({"selector": "nope"}, "external_students.tiny.selector: 'nope' is not allowed; allowed values: ["),
    ({"budget": 0}, "external_students.tiny.budget: 0 is out of range; allowed: > 0 and <= 1"),
    ({"floor": None}, "external_students.tiny.floor: None is not of type 'integer'"),
    ({"colour": "red"}, "external_students.tiny: unknown key(s) ['colour']; allowed keys: ['backbone', 'budget', "
                        "'floor', 'path', 'selector']"),
])
def test_a_bad_entry_names_the_file_the_field_and_the_allowed_values(change, message):
    cfg = {**config.read(ROOT / "config" / "smoke.yaml"), "external_students": {"tiny": {**ENTRY, **change}}}
    with pytest.raises(config.ConfigError) as err:
        config.validate(cfg, "config/smoke.yaml")
    assert str(err.value).startswith("config/smoke.yaml: invalid configuration") and message in str(err.value)


def test_the_paper_profile_names_the_authors_student_commented_with_its_hub_id():
    text = (ROOT / "config" / "paper.yaml").read_text()
    assert "external_students" not in config.read(ROOT / "config" / "paper.yaml")  # commented: never required
    assert "yyy051007/LT-OPD" in text
    block = re.search(r"^# external_students:\n((?:#   .*\n)+)", text, re.M).group(1)
    entry = yaml.safe_load("".join(line[2:] + "\n" for line in block.splitlines()))
    assert entry == {"authors-ltopd": {"path": "checkpoints/LT-OPD", "backbone": "qwen35-4b", "selector": "cdpruner",
                                       "budget": 0.05, "floor": 32}}
    paper = config.load(ROOT / "config" / "paper.yaml")
    config.validate({**paper, "external_students": entry}, "config/paper.yaml")  # valid once uncommented


def test_ltopd_validate_names_a_mismatched_folder(tmp_path, capsys):
    import shutil

    from ltopd.cli import main

    folder = shutil.copytree(ROOT / "releases" / "llava-ov-tiny", tmp_path / "student")
    profile = {**config.read(ROOT / "config" / "smoke.yaml"),
               "external_students": {"tiny": {**ENTRY, "path": str(folder), "selector": "cdpruner"}}}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile))
    assert main(["validate", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"external_students.tiny: {folder}: wrong architecture: model_type 'llava_onevision'" in err
