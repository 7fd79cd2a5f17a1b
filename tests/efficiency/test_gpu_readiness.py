"""benchmarks/gpu_readiness.py: the paper backbones' real configurations build the families'
classes at their published sizes, with the placeholders the lent tokenizer writes; the projection
adds Table 2's settings as counted by hand; `--tiny` prints its table on the CPU, and without an
accelerator the paper run refuses in one line."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

spec = importlib.util.spec_from_file_location("gpu_readiness", ROOT / "benchmarks" / "gpu_readiness.py")
readiness = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readiness)

# Parameters (billions) of the four checkpoints, from their model cards' sizes: Qwen3.5-4B and
# LLaVA-OV-1.5-4B about 4.5-5, Qwen3.5-9B about 9.5, GLM-4.6V-Flash (GLM-4.1V-9B) about 10.3.
SIZES = {"qwen35-4b": (4.2, 5.2), "qwen35-9b": (9.0, 10.0), "glm46v-9b": (9.8, 10.8), "llava-ov15-4b": (4.3, 5.3)}


def test_every_paper_backbone_has_a_real_configuration():
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    assert set(readiness.ARCHITECTURES) == set(paper["backbones"]) == set(SIZES)


@pytest.mark.parametrize("name", sorted(SIZES))
def test_a_real_configuration_builds_its_family_at_its_size_with_the_tokenizers_placeholders(name):
    import torch

    bb = readiness.paper_backbone(readiness.ARCHITECTURES[name], "meta", torch.bfloat16)  # no memory, no weights
    params = sum(p.numel() for p in bb.model.parameters()) / 1e9
    lo, hi = SIZES[name]
    assert lo <= params <= hi, params
    config = bb.model.config
    placeholder = getattr(config, "image_token_id", None) or config.image_token_index
    assert placeholder == bb.processor.image_token_id  # the prompt's image tokens are the model's
    assert bb.processor.tokenizer.convert_ids_to_tokens(placeholder) == bb.processor.span.token


def test_table2_hours_count_every_setting_table2_reads():
    from ltopd import config

    cfg = config.load(ROOT / "config" / "smoke.yaml")
    # smoke: Table 2 reads full and blind at 1, CDPruner, the downsampling control, LLaVA-Mini,
    # LT-OPD and LT-OPD + merge at 5% (not Table 7's teachers), on V*Bench (8 items) and POPE (12),
    # seed 0; both caps 16
    by_hand = ((8 + 12) * 2 * 1.0 + (8 + 12) * 5 * 2.0) / 3600
    assert readiness.table2_hours(cfg, full_s=1.0, reduced_s=2.0, cap=16) == pytest.approx(by_hand)
    assert readiness.table2_hours(cfg, full_s=1.0, reduced_s=2.0, cap=32) == pytest.approx(by_hand / 2)


def _run(*args):
    return subprocess.run([sys.executable, "benchmarks/gpu_readiness.py", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})


def test_without_an_accelerator_it_refuses_in_one_line():
    proc = _run()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: no accelerator visible")


def test_tiny_prints_its_table_on_the_cpu():
    proc = _run("--tiny")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| backbone |"))
    rows = [line.split(" | ") for line in lines[head + 2:] if line.startswith("| ")]
    assert [r[0].strip("| ") for r in rows] == ["qwen35-tiny", "glm46v-tiny", "llava-ov-tiny"]
    for r in rows:
        cells = [c.strip(" |") for c in r[1:]]
        assert len(cells) == len(readiness.COLUMNS) and all(float(c) >= 0 for c in cells), r
    assert lines[0].startswith("profile smoke on cpu: 4 questions x 2 rollouts")
