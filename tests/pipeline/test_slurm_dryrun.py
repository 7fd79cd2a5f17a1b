"""The paper profile on SLURM: `snakemake -n --profile workflow/profiles/slurm results/table2.csv
--configfile config/paper.yaml` plans the train and evaluate jobs with the profile's resources.

Runs in a temporary working directory that links the workflow and code and holds empty stand-ins
at every local path config/paper.yaml names (checkpoints, LT-14K sources, benchmark files), so
the plan is built without the real downloads. Nothing is submitted (dry run, no sbatch needed).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ltopd.catalog import METHODS
from ltopd.grid import eval_groups, grid_jobs, group_name, table2_methods

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"

pytest.importorskip("snakemake_executor_plugin_slurm", reason="needs snakemake-executor-plugin-slurm")


def _stand_in(path: Path) -> None:
    """An empty file for file-like paths (a suffix), an empty folder otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix:
        path.touch()
    else:
        path.mkdir(exist_ok=True)


def _local_paths(cfg: dict[str, Any]) -> list[str]:
    paths = [bb["checkpoint"] for bb in cfg["backbones"].values() if bb.get("checkpoint")]
    paths += [s["path"] for s in cfg["lt14k"]["sources"].values() if s.get("path")]
    paths += [b["path"] for b in cfg["evaluation"]["benchmarks"].values() if b.get("path")]
    return paths


def _jobs(output: str) -> list[dict[str, Any]]:
    """Each planned job of a dry run: its rule, wildcards and resources."""
    jobs = []
    for block in re.split(r"\n(?=rule \w+:)", output):
        m = re.match(r"rule (\w+):", block)
        if not m:
            continue
        res = re.search(r"^\s*resources: (.*)$", block, re.M)
        wc = re.search(r"^\s*wildcards: (.*)$", block, re.M)
        pairs = [kv.split("=", 1) for kv in res.group(1).split(", ")] if res else []
        rule = "evaluate" if m.group(1).startswith("evaluate_") else m.group(1)  # one rule per model's group
        jobs.append({"rule": rule, "name": m.group(1), "resources": {k: v for k, v in pairs},
                     "wildcards": dict(kv.split("=", 1) for kv in wc.group(1).split(", ")) if wc else {}})
    return jobs


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[str, dict[str, Any]]:
    work = tmp_path_factory.mktemp("paper-slurm")
    for name in ("Snakefile", "workflow", "src", "config", "envs"):
        (work / name).symlink_to(ROOT / name)
    cfg = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    for p in _local_paths(cfg):
        _stand_in(work / p)
    exe = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")
    # Targets first, then --configfile (it takes several values), as in docs/cluster.md.
    cmd = [exe, "-n", "--profile", "workflow/profiles/slurm", str(Path(cfg["out_root"]) / "results" / "table2.csv"),
           "--configfile", "config/paper.yaml"]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out, cfg


def test_dry_run_plans_training_and_evaluation(dry_run) -> None:
    out, cfg = dry_run
    jobs = _jobs(out)
    rules = {j["rule"] for j in jobs}
    assert {"lt14k", "bench_records", "evaluate", "table2"} <= rules, sorted(rules)
    trained = [m for m in table2_methods(cfg) if METHODS[m].kind == "trained"]  # not the ablation variants
    assert trained, "config/paper.yaml's grid lists no trained method (Table 2's LT-OPD row needs one)"
    assert "train" in rules
    first = cfg["grid"]["backbones"][0]
    assert {(j["wildcards"]["backbone"], j["wildcards"]["method"]) for j in jobs if j["rule"] == "train"} == \
        {(first, m) for m in trained}
    table2 = set(table2_methods(cfg))
    groups = {group_name(*key) for key, settings in eval_groups(cfg).items()
              if any(j.method in table2 and j in set(grid_jobs(cfg)) and j.backbone == first for j in settings)}
    assert {j["name"] for j in jobs if j["rule"] == "evaluate"} == groups


@pytest.mark.parametrize("rule", ["train", "evaluate"])
def test_gpu_jobs_carry_the_profiles_resources(dry_run, rule) -> None:
    out, _ = dry_run
    profile = yaml.safe_load(PROFILE.read_text())
    want = {**profile["default-resources"], **profile["set-resources"][rule]}
    assert "gpu" in str(want.get("gres", "")) or want.get("gpu")
    for job in (j for j in _jobs(out) if j["rule"] == rule):
        got = job["resources"]
        for key, value in want.items():
            assert got.get(key) == str(value), f"{rule}: {key}={got.get(key)!r}, profile says {value!r}"


def test_cpu_jobs_get_the_default_partition(dry_run) -> None:
    out, _ = dry_run
    profile = yaml.safe_load(PROFILE.read_text())
    default = profile["default-resources"]["slurm_partition"]
    for job in _jobs(out):
        if (job["rule"] not in profile["set-resources"]
                or "slurm_partition" not in profile["set-resources"][job["rule"]]):
            assert job["resources"].get("slurm_partition") == default, job
