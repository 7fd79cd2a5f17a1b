"""A finished Snakemake run exits at once: the scheduler's pending re-evaluation timers (one per
pass, of the rate limit's timespan) are cancelled by the Snakefile's onsuccess / onerror."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from ltopd.pipeline.scheduler_timers import cancel_scheduler_timers

SNAKEFILE = """
from ltopd.pipeline.scheduler_timers import cancel_scheduler_timers

onsuccess:
    {hook}

rule done:
    output: "done.txt"
    shell: "echo done > {{output}}"
"""


def test_only_the_schedulers_timers_are_cancelled() -> None:
    fake = compile("lambda: None", "/x/site-packages/snakemake/scheduling/job_scheduler.py", "eval")
    ours, other = threading.Timer(600, eval(fake)), threading.Timer(600, lambda: None)
    ours.start(), other.start()
    try:
        assert cancel_scheduler_timers() == 1
        ours.join(5)
        assert not ours.is_alive() and other.is_alive()
    finally:
        other.cancel()


def _run(tmp: Path, hook: str) -> float:
    tmp.mkdir()
    (tmp / "Snakefile").write_text(SNAKEFILE.format(hook=hook))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--max-jobs-per-timespan", "1000/10s",
                           "--workflow-profile", "none"], cwd=tmp, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return time.monotonic() - start


def test_a_finished_run_exits_without_waiting_out_the_timespan(tmp_path: Path) -> None:
    # the same one-job workflow: without the hook the process outlives its 10 s timer, with it not
    assert _run(tmp_path / "without", "pass") > 10
    assert _run(tmp_path / "with", "cancel_scheduler_timers()") < 8
