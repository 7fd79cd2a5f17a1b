"""Layered profiles: override files on a profile, and errors that name the layer they came from."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ltopd import config
from ltopd.layers import Origins, layered, load_layers

ROOT = Path(__file__).resolve().parents[1]
BASE = ("base.yaml", {"profile": "p", "seeds": [0, 1], "training": {"lr": {"lm": 1.0, "vision": 2.0}, "steps": 5},
                      "grid": {"budgets": [0.05, 0.1]}})


def test_an_override_file_deep_merges_onto_the_profile_before_it():
    over = ("over.yaml", {"training": {"lr": {"lm": 3.0}}, "seeds": [7]})
    cfg, origins = layered([BASE, over], {"grid": {"budgets": [0.2]}})
    # written out by hand: the override's keys replace, everything else is the profile's
    assert cfg == {"profile": "p", "seeds": [7], "training": {"lr": {"lm": 3.0, "vision": 2.0}, "steps": 5},
                   "grid": {"budgets": [0.2]}}
    assert origins.layers == ["base.yaml", "over.yaml", "--config"]
    assert origins.of(["training", "lr", "lm"]) == "over.yaml"
    assert origins.of(["training", "lr", "vision"]) == "base.yaml"
    assert origins.of(["training", "steps"]) == "base.yaml"
    assert origins.of(["seeds", 0]) == "over.yaml"  # inside a replaced list: the list's layer
    assert origins.of(["grid", "budgets", 0]) == "--config"
    assert origins.of(["training"], created=True) == "base.yaml"  # the mapping's maker owns its missing keys


def test_without_a_profile_file_the_default_is_the_base_and_a_later_profile_replaces_an_earlier_one():
    cfg, origins = layered([("over.yaml", {"seeds": [3]})], default=BASE)
    assert cfg["seeds"] == [3] and cfg["training"]["steps"] == 5 and origins.layers == ["base.yaml", "over.yaml"]
    other = ("other.yaml", {"profile": "q", "seeds": [9]})
    cfg, origins = layered([BASE, other])
    assert cfg == {"profile": "q", "seeds": [9]} and origins.layers == ["other.yaml"]
    with pytest.raises(config.ConfigError, match="over.yaml: an override file .* before the profile other.yaml"):
        layered([("over.yaml", {"seeds": [3]}), other])


def test_labels_name_the_file_or_the_command_line_key():
    origins = Origins(["a.yaml", "b.yaml", "--config"], {("seeds",): "--config", ("training", "lr"): "b.yaml"},
                      {("training",): "a.yaml"})
    bad = "seeds: 'abc' is not of type 'array'"
    assert origins.label(["seeds"], bad) == f"--config {bad}"
    assert origins.label(["training", "lr", "lm"], "training.lr.lm: x") == "b.yaml: training.lr.lm: x"
    missing = "training: 'steps' is a required property"
    assert origins.label(["training"], missing, created=True) == f"a.yaml: {missing}"
    assert Origins(["a.yaml"]).label(["seeds"], "seeds: x") == "seeds: x"  # one layer: as before


def test_a_real_override_file_validates_and_a_bad_value_is_blamed_on_its_layer(tmp_path):
    over = tmp_path / "override.yaml"
    over.write_text("training:\n  steps: 3\nseeds: [0]\n")
    cfg, origins = load_layers([ROOT / "config" / "smoke.yaml", over])
    assert cfg["training"]["steps"] == 3 and cfg["profile"] == "smoke" and cfg["seeds"] == [0]
    # no profile file: onto config/default.yaml
    cfg, _ = load_layers([over], default=ROOT / "config" / "default.yaml")
    assert cfg["profile"] == "default" and cfg["training"]["steps"] == 3
    with pytest.raises(config.ConfigError) as e:
        load_layers([ROOT / "config" / "smoke.yaml", over], {"seeds": "abc"})
    lines = str(e.value).splitlines()
    assert lines[0].endswith("smoke.yaml + " + str(over) + " + --config: invalid configuration:")
    assert lines[1:] == ["  - --config seeds: 'abc' is not of type 'array'"]
    over.write_text("training:\n  steps: -1\n  stepz: 2\n")
    with pytest.raises(config.ConfigError) as e:
        load_layers([ROOT / "config" / "smoke.yaml", over])
    problems = str(e.value).splitlines()[1:]
    assert problems and all(p.startswith(f"  - {over}: training") for p in problems), problems


def _dry(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", *args], cwd=ROOT,
                          capture_output=True, text=True)


def test_snakemake_takes_an_override_file_and_names_the_command_line_key(tmp_path):
    over = tmp_path / "override.yaml"
    over.write_text(yaml.safe_dump({"grid": {"budgets": [0.05], "methods": ["full", "cdpruner"]}}))
    proc = _dry("--configfile", "config/smoke.yaml", str(over), "--", "runs/smoke/results/table2.csv")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "/cdpruner/0.05/" in out and "/divprune/" not in out and "required property" not in out
    proc = _dry("--configfile", "config/smoke.yaml", "--config", "seeds=abc")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "--config seeds: 'abc' is not of type 'array'" in out, out[-3000:]
