"""The conda environments install the ltopd package from the repository root wherever Snakemake
copies them: no relative path in the env file (Snakemake creates the env from its copy under
<conda-prefix>/<hash>.yaml), and a post-deploy script, run from Snakemake's working directory
(the repository root), that installs the package from there."""
from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ENVS = sorted((ROOT / "envs").glob("*.yaml"))


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_file_names_no_local_path(env):
    spec = yaml.safe_load(env.read_text())
    pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
    local = [line for line in pip if re.match(r"(-e\s+)?\.|(-e\s+)?/|file:", line)]
    assert not local, f"{env.name}: {local} would resolve against Snakemake's copy of the file"
    assert "torch==2.13.0" in pip


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_post_deploy_installs_the_repository(env):
    script = env.with_suffix(".post-deploy.sh")  # the name Snakemake looks for beside the env file
    assert script.is_file(), f"{script.name} missing"
    install = next(line for line in script.read_text().splitlines() if line.startswith("pip install"))
    args = shlex.split(install)
    target = args[args.index("-e") + 1]
    path, _, extras = target.partition("[")
    project = tomllib.loads((ROOT / path / "pyproject.toml").read_text())["project"]
    assert project["name"] == "ltopd"
    assert extras.rstrip("]") in project["optional-dependencies"]
    # every rule's conda directive points at an env that exists (paths relative to the rule file)
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for rel in re.findall(r'"(\.\./\.\./envs/[^"]+)"', smk.read_text()):
            assert (smk.parent / rel).resolve().is_file(), (smk.name, rel)
