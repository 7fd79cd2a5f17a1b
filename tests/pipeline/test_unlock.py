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

from conftest import tool_env

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


@pytest.mark.skipif(shutil.which("snakemake") is None and not (Path(sys.executable).parent / "snakemake").exists(),
                    reason="needs the snakemake command")
def test_a_second_run_in_the_same_folder_is_refused_with_the_lock_message(tmp_path: Path, record_property) -> None:
    """Issue 54, fault 4: two runs at once in one working directory. While the first holds the
    folder (paused with SIGSTOP once its lock is written, so the test does not race its jobs), the
    second stops before any job with Snakemake's LockException, whose remedy the README's "After a
    crash" gives; the first then finishes as if alone."""
    import signal
    import time

    for name in ("Snakefile", "workflow", "config", "releases", "src"):
        (tmp_path / name).symlink_to(ROOT / name)
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    env = tool_env()
    # the target before --configfile, which takes several values
    cmd = [snakemake, "runs/smoke/models/tokenizer", "--cores", "1", "--configfile", "config/smoke.yaml"]
    first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        locks = tmp_path / ".snakemake" / "locks"
        deadline = time.monotonic() + 300
        while not (locks.is_dir() and any(locks.iterdir())) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first.poll() is None, "the first run ended before it was seen holding the lock"
        first.send_signal(signal.SIGSTOP)
        second = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        out = second.stdout + second.stderr
        assert second.returncode != 0 and "LockException" in out and "Directory cannot be locked" in out, out[-3000:]
        assert "--unlock" in out
        line = next(x for x in out.splitlines() if "Directory cannot be locked" in x)
        record_property("line", line.strip())
        first.send_signal(signal.SIGCONT)
        assert first.wait(timeout=600) == 0  # the first run was not disturbed
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGCONT)
            first.kill()
            first.wait()
