"""The pipeline's progress line: the ETA over job kinds (hand-worked) and the logger plugin on a
real two-job Snakemake run."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ltopd.pipeline import job_costs
from ltopd.pipeline.eta import Eta, describe_job, duration, kind
from ltopd.pipeline.job_costs import JobCost, Prior


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


PRIORS = {"evaluate": Prior(5.0, 0.01), "train": Prior(5.0, 0.1)}
COSTS = [JobCost("A", "evaluate", 1000), JobCost("B", "evaluate", 100), JobCost("T", "train", 200)]


def test_eta_weighs_each_job_by_its_units():
    """Worked by hand. Priors: A 5 + 1000 x 0.01 = 15 s, B 5 + 100 x 0.01 = 6 s, T 5 + 200 x 0.1 = 25 s."""
    eta = Eta(PRIORS)
    eta.plan({"evaluate_a": 1, "evaluate_b": 1, "train": 1}, now=0.0)
    eta.plan_costs(COSTS, cores=2)
    assert eta.planned == {"evaluate": 2, "train": 1}
    # 46 s of work on 2 cores is 23 s, but T alone takes 25 s
    assert eta.remaining_s(0.0) == pytest.approx(25.0)
    eta.started("T", 0.0)
    eta.finished("train", 50.0, now=50.0, key="T")  # twice its prior
    assert eta.factor("train") == pytest.approx(2.0)
    # the evaluations, unseen: this run's pooled factor shrunk by 60 prior-seconds towards 1,
    # (50 + 60) / (25 + 60); A + B = 21 s of priors at the observed parallelism 50 / 50 = 1
    assert eta.speed() == pytest.approx(110 / 85)
    assert eta.remaining_s(50.0) == pytest.approx(21 * 110 / 85)
    eta.started("B", 50.0)
    eta.finished("evaluate_b", 10.0, now=60.0, key="B")
    # this run's evaluate factor: 10 s over B's 6 s prior, so A is 15 x 10 / 6 = 25 s
    assert eta.expected_of("A") == pytest.approx(25.0)
    assert eta.remaining_s(60.0) == pytest.approx(25.0)
    eta.started("A", 60.0)
    assert eta.remaining_s(80.0) == pytest.approx(5.0)  # 20 s of its 25 run
    assert eta.records() == {"train": (50.0, 25.0), "evaluate": (10.0, 6.0)}


def test_the_last_runs_records_scale_the_priors():
    """Last run: evaluations took twice their priors (20 s for 10), so A = 30 s and B = 12 s; the
    training, without a record, takes the last run's pooled factor (2): T = 50 s."""
    eta = Eta(PRIORS, records={"evaluate": (20.0, 10.0)})
    eta.plan_costs(COSTS, cores=2)
    assert eta.expected_of("A") == pytest.approx(30.0)
    assert eta.expected_of("B") == pytest.approx(12.0)
    assert eta.expected_of("T") == pytest.approx(50.0)
    assert eta.remaining_s(0.0) == pytest.approx(50.0)  # (30 + 12 + 50) / 2 = 46, but T alone is 50


def test_job_units_on_the_smoke_profile(tmp_path):
    """Settings x items, questions answered per update: smoke's vstar 8, pope 12, muirbench 4
    items; 2 updates of 4 questions, 2 rollouts each on-policy."""
    from ltopd import config

    cfg = config.load("config/smoke.yaml")
    costs = {c.key: c for c in job_costs.plan(cfg, [
        ("evaluate_qwen35_tiny_ltopd_s0", {}),           # ltopd on vstar, pope and (Table 14) muirbench
        ("evaluate_qwen35_tiny_epic_s0", {}),            # muirbench only
        ("train", {"backbone": "qwen35-tiny", "method": "ltopd", "seed": "0"}),
        ("train", {"backbone": "qwen35-tiny", "method": "sft", "seed": "0"}),
        ("train", {"backbone": "qwen35-tiny", "method": "grpo", "seed": "0"}),
        ("bench_records", {"benchmark": "pope", "seed": "0"}), ("table2", {})])}
    units = {k: c.units for k, c in costs.items()}
    assert units == {"evaluate_qwen35_tiny_ltopd_s0": 24, "evaluate_qwen35_tiny_epic_s0": 4,
                     "train backbone=qwen35-tiny method=ltopd seed=0": 16,
                     "train backbone=qwen35-tiny method=sft seed=0": 8,
                     "train backbone=qwen35-tiny method=grpo seed=0": 16,
                     "bench_records benchmark=pope seed=0": 12, "table2": 0}
    records = tmp_path / "costs.json"
    job_costs.write_records("smoke", {"evaluate": (1.0, 2.0)}, records)
    job_costs.write_records("default", {"train": (3.0, 4.0)}, records)
    assert job_costs.read_records("smoke", records) == {"evaluate": (1.0, 2.0)}
    assert job_costs.read_records("paper", records) == {}


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


def test_a_long_job_prints_its_progress_while_it_runs(tmp_path):
    """A job running past LTOPD_PROGRESS_EVERY (60 s in a real run, 1 s here) gets a line per
    interval with how long it has run and the last line of its log."""
    (tmp_path / "Snakefile").write_text(textwrap.dedent('''
        rule slow:
            output: "s.txt"
            log: "slow.log"
            shell: "for i in 1 2 3 4; do echo step $i of 4 >> {log}; sleep 1; done; touch {output}"
    '''))
    import os

    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--logger", "ltopd"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "LTOPD_PROGRESS_EVERY": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    ticks = [ln for ln in proc.stderr.splitlines() if ln.startswith("  ... slow: running ")]
    assert len(ticks) >= 2, proc.stderr
    assert any("| step " in ln and " of 4" in ln for ln in ticks), ticks
