"""Shared fixtures: tiny profiles and real-format fixture sources made on the fly."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tool_env(*also_drop: str, **extra_env: str) -> dict[str, str]:
    """This environment with its tools (snakemake, dvc, ltopd) first on PATH and no MLflow settings
    inherited (a command run with it logs to its profile's store), less ``also_drop``'s prefixes."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return {k: v for k, v in env.items() if not k.startswith(("LTOPD_MLFLOW_", "MLFLOW_", *also_drop))} | extra_env


def run_ok(cmd: list[str], cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    """Run ``cmd`` in ``cwd`` with ``tool_env``; fails the test with the output's tail on a non-zero exit."""
    proc = subprocess.run(cmd, cwd=cwd, env=tool_env(**extra_env), capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def clone_worktree(dest: Path) -> Path:
    """The working tree's tracked and untracked-not-ignored files, committed in a new repository at
    ``dest``: what a clean clone has, without touching the developer's data or MLflow store."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file() or (ROOT / f).is_symlink():  # links too: profiles -> workflow/profiles
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f, follow_symlinks=False)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot"]):
        run_ok(cmd, dest)
    return dest


def local_profile(tmp_path: Path, base: str = "smoke", **training) -> tuple[Path, dict]:
    """config/<base>.yaml with its outputs and MLflow store under tmp_path and ``training``
    changed, written to tmp_path/profile.yaml: (its path, the profile)."""
    cfg = yaml.safe_load((ROOT / "config" / f"{base}.yaml").read_text())
    cfg["training"].update(training)
    cfg["out_root"] = str(tmp_path / "run")
    cfg["mlflow"] = {"tracking_uri": f"sqlite:///{tmp_path / 'mlruns.db'}", "experiment": "t",
                     "artifact_root": str(tmp_path / "art")}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, cfg


def job_env(tmp_path: Path, monkeypatch):
    """The MLflow settings a job reads from its environment (as the Snakefile exports them), on a
    SQLite store under ``tmp_path``; undone with ``monkeypatch``. Returns the Settings."""
    from dataclasses import asdict

    from ltopd.tracking import ENV_PREFIX, Settings

    settings = Settings(f"sqlite:///{tmp_path}/m.db", "e", str(tmp_path / "a"), str(tmp_path / "parent.json"), "t")
    for key, value in asdict(settings).items():
        monkeypatch.setenv(f"{ENV_PREFIX}{key.upper()}", value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.tracking_uri)
    return settings


def exits_within(proc, timeout: float) -> bool:
    """Whether the psutil process `proc` exits within `timeout` seconds (a zombie, exited and not
    yet reaped, counts)."""
    import time

    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def smoke_cfg() -> dict:
    return yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())


@pytest.fixture
def tiny_lt(smoke_cfg) -> dict:
    """An LT-14K section small enough for unit tests: 14 questions (7, 3, 3, 1) in 7 batches of 2."""
    lt = copy.deepcopy(smoke_cfg["lt14k"])
    lt.update(scale=0.001, num_batches=7, batch_size=2)
    return lt


def _img(i: int) -> Image.Image:
    return Image.new("RGB", (32, 24), ((37 * i) % 256, (91 * i) % 256, (13 * i) % 256))


def make_jsonl_source(folder: Path, n: int = 12) -> Path:
    (folder / "imgs").mkdir(parents=True)
    lines = []
    for i in range(n):
        _img(i).save(folder / "imgs" / f"{i}.png")
        lines.append(json.dumps({"id": f"q{i}", "image": f"imgs/{i}.png", "question": f"what is {i}?",
                                 "answer": str(i)}))
    path = folder / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def make_hf_source(folder: Path, n: int = 12) -> Path:
    import datasets

    ds = datasets.Dataset.from_list(
        [{"qid": i, "img": _img(i), "prompt": f"colour {i}?", "label": f"c{i}"} for i in range(n)],
        features=datasets.Features({"qid": datasets.Value("int64"), "img": datasets.Image(),
                                    "prompt": datasets.Value("string"), "label": datasets.Value("string")}))
    ds.save_to_disk(str(folder))
    return folder


def make_imagefolder_source(folder: Path, n: int = 12) -> Path:
    folder.mkdir(parents=True)
    meta = []
    for i in range(n):
        _img(i).save(folder / f"{i}.png")
        meta.append(json.dumps({"file_name": f"{i}.png", "question": f"q{i}", "answer": f"a{i}"}))
    (folder / "metadata.jsonl").write_text("\n".join(meta) + "\n")
    return folder


def pytest_collection_modifyitems(config, items):
    """The `slow` files first. Under `-n 2 --dist loadfile` a worker takes whole files in collection
    order, so the smoke pipeline's file (about half the suite's time on one worker) collected in the
    middle would start late and finish alone; first, the other worker runs the rest beside it."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
