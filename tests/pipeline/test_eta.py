"""The pipeline's progress line: the ETA over job kinds (hand-worked) and the logger plugin on a
real two-job Snakemake run."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ltopd.pipeline.eta import Eta, describe_job, duration, kind


def test_eta_weighs_jobs_by_kind_and_parallelism():
    eta = Eta()
    eta.plan({"a": 2, "evaluate_x_full_s0": 1, "evaluate_x_cdpruner_s0": 1}, now=0.0)
    assert eta.planned == {"a": 2, "evaluate": 2} and eta.total == 4
    assert eta.remaining_s(0.0) is None  # nothing finished: no estimate
    eta.finished("a", 10.0, now=10.0)
    # a: 1 left x 10 s; evaluate: 2 left x the overall mean (10 s); parallelism 10/10 = 1
    assert eta.remaining_s(10.0) == pytest.approx(30.0)
    eta.finished("evaluate_x_full_s0", 30.0, now=30.0)  # ran beside the first: busy 40 s in 30 s
    # a: 1 x 10 + evaluate: 1 x 30 = 40 job-seconds at parallelism 40/30
    assert eta.remaining_s(30.0) == pytest.approx(30.0)
    assert eta.done == 2 and eta.elapsed(30.0) == 30.0


def test_labels_and_durations():
    assert kind("evaluate_qwen35_tiny_ltopd_s0") == "evaluate" and kind("train") == "train"
    assert describe_job("train", {"backbone": "b", "method": "ltopd", "seed": "0"}) == "train b ltopd seed=0"
    assert describe_job("evaluate_b_full_s0", {}, "evaluate b full seed 0") == "evaluate b full seed 0"
    assert [duration(s) for s in (7, 185, 3720)] == ["7s", "3m05s", "1h02m"]
    outputs = [f"results/eval/qwen35-tiny/dart/{b}/{bench}/seed0/{f}" for b in ("0.05", "0.1")
               for bench in ("gqa", "mme", "pope") for f in ("metrics.json", "predictions.jsonl")]
    assert describe_job("evaluate_qwen35_tiny_dart_s0", {}, None, outputs) == (
        "evaluate qwen35-tiny dart seed 0: 2 budgets x 3 benchmarks (6 settings)")
    mixed = [f"results/eval/qwen35-tiny/{m}/{b}/vstar/seed1/metrics.json" for m, b in
             (("full", "1"), ("cdpruner", "0.05"), ("cdpruner", "0.1"), ("blind", "1"))]
    assert describe_job("evaluate_qwen35_tiny_s1", {}, None, mixed) == (
        "evaluate qwen35-tiny blind, cdpruner, full seed 1: 3 budgets x 1 benchmarks (4 settings)")
    assert describe_job("evaluate_x", {}, None, ["results/table2.csv"]) == "evaluate_x"


def test_snakemake_logger_plugin_prints_one_line_per_job(tmp_path):
    (tmp_path / "Snakefile").write_text(textwrap.dedent('''
        rule all:
            input: "b.txt"
        rule first:
            output: "a.txt"
            shell: "echo a > {output}"
        rule second:
            input: "a.txt"
            output: "{name}.txt"
            wildcard_constraints: name="b"
            shell: "cat {input} > {output}"
    '''))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--logger", "ltopd"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("[")]
    assert lines[0].startswith("[1/3] first in ") and "ETA" in lines[0], lines
    assert lines[1].startswith("[2/3] second b in "), lines
    assert "rule first:" not in proc.stderr and "output:" not in proc.stderr  # no blocks of paths
