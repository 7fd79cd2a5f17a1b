"""Two training processes on one CPU machine (torchrun, gloo) against one process at the same
global batch: each rank takes every second question of an update and the gradients are averaged
over the ranks, so deterministic methods (SFT, fixed-prefix KD) end with the same weights and
losses to float32 rounding; on-policy LT-OPD samples per rank (seed + rank) and is checked to run,
write one student and train it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(shutil.which("torchrun", path=str(BIN)) is None, reason="needs torchrun")
TOL = 1e-5  # float32: the ranks' mean of means vs one mean over the batch


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from ltopd.data import lt14k
    from ltopd.models.loading import save_backbone
    from ltopd.twins.architectures import twin_backbone
    from ltopd.twins.tokenizer import build_tokenizer

    tmp = tmp_path_factory.mktemp("dist")
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    cfg["out_root"] = str(tmp)
    cfg["mlflow"] = {"tracking_uri": f"sqlite:///{tmp}/m.db", "experiment": "dist", "artifact_root": str(tmp / "a")}
    profile = tmp / "profile.yaml"
    profile.write_text(yaml.safe_dump(cfg))
    manifest = lt14k.build(cfg["lt14k"], cfg["world"], tmp / "lt14k", progress=False)
    from ltopd.twins.corpus import corpus

    tok = build_tokenizer(list(corpus(cfg["world"], 8)), 600)
    save_backbone(twin_backbone("qwen35-tiny", tok, seed=0), tmp / "model")
    assert manifest["num_questions"] > 0
    return tmp, profile


def _train(setup, method: str, procs: int) -> tuple[dict, dict]:
    tmp, profile = setup
    out = tmp / f"{method}-{procs}"
    args = ["train", "--config", str(profile), "--rule", "dist", "--backbone", "qwen35-tiny",
            "--model", str(tmp / "model"), "--data", str(tmp / "lt14k"), "--method", method, "--budget", "0.05",
            "--seed", "0", "--checkpoints", str(out / "ck"), "--out", str(out / "student"),
            "--metrics", str(out / "metrics.json"), "--keep-checkpoints"]  # kept: the test reads who wrote them
    launch = [str(BIN / "torchrun"), "--nproc_per_node", str(procs), "-m", "ltopd.cli"] if procs > 1 \
        else [str(BIN / "ltopd")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(launch + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    weights = load_file(str(next((out / "student").glob("*.safetensors"))))
    return weights, json.loads((out / "metrics.json").read_text())


@pytest.mark.parametrize("method", ["sft", "kd_fixed_prefix"])
def test_two_processes_equal_one(setup, method):
    one, m1 = _train(setup, method, 1)
    two, m2 = _train(setup, method, 2)
    assert one.keys() == two.keys()
    assert max((one[k] - two[k]).abs().max().item() for k in one) < TOL
    assert m1["updates"] == m2["updates"] == 2
    assert m1["last_loss"] == pytest.approx(m2["last_loss"], abs=TOL)


def test_ltopd_trains_in_two_processes(setup):
    tmp, _ = setup
    start = load_file(str(next((tmp / "model").glob("*.safetensors"))))
    two, metrics = _train(setup, "ltopd", 2)
    assert metrics["updates"] == 2 and metrics["last_loss"] >= 0
    assert any(not torch.equal(start[k], two[k]) for k in start)  # the student moved
    assert sorted(p.name for p in (tmp / "ltopd-2" / "ck").iterdir()) == ["identity.json", "step-000002"]  # one writer
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp}/m.db")
    exp = client.get_experiment_by_name("dist")
    runs = client.search_runs([exp.experiment_id], "params.method = 'ltopd'")
    assert len(runs) == 1  # rank 0 logs the run
