"""The code is clean under the project's ruff configuration ([tool.ruff] in pyproject.toml).
Skipped where ruff is not installed (`pip install -e .[test]` brings it)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str] | None:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    exe = shutil.which("ruff")
    return [exe] if exe else None


def test_ruff_check_passes():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed")
    proc = subprocess.run([*ruff, "check", "--no-cache", "src", "tests", "benchmarks", "probes"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
