"""`snakemake --unlock` (what a user types after a killed run) works without --cores.

A rule whose `threads` reads `workflow.cores` at parse time made every command without --cores
fail before doing anything, --unlock included; the timed efficiency rules read it lazily.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("snakemake") is None and not (Path(sys.executable).parent / "snakemake").exists(),
                    reason="needs the snakemake command")
def test_unlock_needs_no_cores(tmp_path: Path) -> None:
    for name in ("Snakefile", "workflow", "config", "releases", "src"):
        (tmp_path / name).symlink_to(ROOT / name)
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    done = subprocess.run([snakemake, "--unlock"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Unlocked working directory" in done.stdout + done.stderr
