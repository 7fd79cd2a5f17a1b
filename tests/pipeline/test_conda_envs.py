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
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
ENVS = sorted((ROOT / "envs").glob("*.yaml"))


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _pip(env: Path) -> list[str]:
    spec = yaml.safe_load(env.read_text())
    return next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)


def _requirements(env: Path) -> dict[str, Requirement]:
    return {(r := Requirement(line)).name: r for line in _pip(env) if not line.startswith("-")}


def _indexes(env: Path) -> list[tuple[str, str]]:
    """(option, address) of the pip section's index lines."""
    return [tuple(line.split(None, 1)) for line in _pip(env) if line.startswith("--") and "index-url" in line]


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_file_names_no_local_path(env):
    local = [line for line in _pip(env) if re.match(r"(-e\s+)?\.|(-e\s+)?/|file:", line)]
    assert not local, f"{env.name}: {local} would resolve against Snakemake's copy of the file"


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_env_pins_what_pyproject_requires(env):
    """Each env pins torch (its build is the env's choice) exactly as pyproject does, names no
    package at another version than pyproject's, and its Python satisfies requires-python."""
    project = {(r := Requirement(line)).name: r for line in PYPROJECT["dependencies"]}
    reqs = _requirements(env)
    assert "torch" in reqs, f"{env.name}: torch not pinned"
    for name, req in reqs.items():
        assert name in project, f"{env.name}: {name} is not a dependency in pyproject.toml"
        assert req.specifier == project[name].specifier, (env.name, str(req), str(project[name]))
    spec = yaml.safe_load(env.read_text())
    python = next(d for d in spec["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert SpecifierSet(PYPROJECT["requires-python"]).contains(python.split("=", 1)[1]), (env.name, python)


def test_cpu_env_takes_torch_from_the_cpu_index():
    """On Linux PyPI's torch is the CUDA build: the CPU env replaces the index by PyTorch's CPU
    one (--index-url, so PyPI cannot offer its build beside it)."""
    assert _indexes(ROOT / "envs" / "ltopd.yaml") == [("--index-url", CPU_INDEX)]


def test_cuda_env_takes_torch_from_a_cuda_index():
    (option, address), = _indexes(ROOT / "envs" / "ltopd-cuda.yaml")
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/cu\d+", address), address


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.name)
def test_post_deploy_installs_the_repository(env):
    script = env.with_suffix(".post-deploy.sh")  # the name Snakemake looks for beside the env file
    assert script.is_file(), f"{script.name} missing"
    install = next(line for line in script.read_text().splitlines() if line.startswith("pip install"))
    args = shlex.split(install)
    target = args[args.index("-e") + 1]
    path, _, extras = target.partition("[")
    project = tomllib.loads((ROOT / path / "pyproject.toml").read_text())["project"]  # the target's own
    assert project["name"] == "ltopd"
    assert extras.rstrip("]") in project["optional-dependencies"]
    # every rule's conda directive points at an env that exists (paths relative to the rule file)
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for rel in re.findall(r'"(\.\./\.\./envs/[^"]+)"', smk.read_text()):
            assert (smk.parent / rel).resolve().is_file(), (smk.name, rel)
