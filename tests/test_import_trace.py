"""The run-time record of a job's imports (the check on the rules' computed code inputs)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ltopd import grid
from ltopd.import_trace import reached

ROOT = Path(__file__).resolve().parents[1]


def test_reached_follows_edges_and_packages():
    edges = [("a.job", "a.lib.x"), ("a.lib.x", "a.util"), ("a.other", "a.never")]
    assert reached("a.job", edges) == {"a.job", "a", "a.lib.x", "a.lib", "a.util"}


def test_a_traced_job_reaches_only_its_rules_code_inputs(tmp_path):
    env = {**os.environ, "LTOPD_TRACE_IMPORTS": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "ltopd.cli", "validate", "--config", "config/smoke.yaml"], cwd=ROOT,
                   env=env, check=True, capture_output=True)
    (trace,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert trace["module"] == "ltopd.pipeline.tools" and trace["command"] == "validate"
    used = reached(trace["module"], trace["edges"])
    assert {"ltopd.config", "ltopd.grid", "ltopd.catalog"} <= used  # lazy imports of the job were recorded
    declared = {f.removeprefix("src/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                for f in grid.job_code("tools")}
    assert used <= declared, used - declared
