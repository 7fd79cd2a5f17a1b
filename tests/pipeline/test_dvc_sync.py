"""dvc.yaml files are generated from the experiment grid; a stale one fails here."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ltopd import config
from ltopd.dvcgen import dvc_file, render
from ltopd.grid import targets

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "config").glob("*.yaml"))


@pytest.mark.parametrize("profile", PROFILES)
def test_dvc_yaml_is_up_to_date(profile, monkeypatch):
    monkeypatch.chdir(ROOT)
    committed = ROOT / dvc_file(profile)
    assert committed.is_file(), f"{committed} missing: run `ltopd dvc-yaml --config {profile}`"
    assert committed.read_text() == render(profile), f"{committed} is stale: run `ltopd dvc-yaml --config {profile}`"


@pytest.mark.parametrize("profile", PROFILES)
def test_dvc_stages_cover_every_snakemake_target(profile, monkeypatch):
    monkeypatch.chdir(ROOT)
    stages = yaml.safe_load(render(profile))["stages"]
    outs = {next(iter(o)) for s in stages.values() for k in ("outs", "metrics", "plots") for o in s.get(k, [])}
    uncovered = [t for t in targets(config.load(profile))
                 if not any(t == o or Path(t).is_relative_to(o) for o in outs)]
    assert not uncovered, f"Snakemake targets no DVC stage tracks: {uncovered[:5]}"
    for s in stages.values():  # DVC must never delete what Snakemake manages
        assert all(next(iter(o.values()))["persist"] for k in ("outs", "metrics", "plots") for o in s.get(k, []))


@pytest.mark.parametrize("profile", PROFILES)
def test_dvc_plots_are_images(profile, monkeypatch):
    """Only image plots: `dvc plots show` then writes a page with no script, which renders with no
    network (a Vega plot's page loads its library from the internet)."""
    monkeypatch.chdir(ROOT)
    stages = yaml.safe_load(render(profile))["stages"]
    plots = [next(iter(p)) for s in stages.values() for p in s.get("plots", [])]
    if config.load(profile)["out_root"] != ".":  # shown by name only (dvcgen.shown_files): see below
        return
    assert plots and all(Path(p).suffix == ".png" for p in plots), plots
    assert all(set(next(iter(p.values()))) == {"persist"} for s in stages.values() for p in s.get("plots", []))


def test_dvc_hashes_no_bytecode_or_parse_cache_in_its_code_folders(monkeypatch):
    """Folder deps (src/ltopd/data, ...) hold __pycache__ once a job ran (.pyc files, codegraph's
    cache); .dvcignore keeps them out of the stages' hashes."""
    import subprocess

    monkeypatch.chdir(ROOT)
    paths = ["src/ltopd/data/__pycache__/rows.cpython-311.pyc", "src/ltopd/__pycache__/codegraph-facts.json"]
    proc = subprocess.run(["dvc", "check-ignore", *paths], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.split() == paths, proc.stdout + proc.stderr
    code = subprocess.run(["dvc", "check-ignore", "src/ltopd/data/rows.py"], capture_output=True, text=True)
    assert code.returncode == 1  # the code itself stays hashed


@pytest.mark.parametrize("profile", PROFILES)
def test_only_the_files_under_the_root_are_declared_metrics_and_plots(profile, monkeypatch):
    """`dvc metrics show` / `dvc plots show` after the README's (default) run load every declared
    file with no "failed to load": a profile writing under runs/ declares its files as outputs."""
    monkeypatch.chdir(ROOT)
    stages = yaml.safe_load(render(profile))["stages"]
    declared = [next(iter(m)) for s in stages.values() for k in ("metrics", "plots") for m in s.get(k, [])]
    root = config.load(profile)["out_root"]
    assert bool(declared) == (root == "."), declared
    assert all(not Path(f).is_relative_to("runs") for f in declared)
