"""Let Snakemake exit when its last job is done.

Snakemake's scheduler arms a `threading.Timer` of the rate limit's timespan on each pass, to look
again once the limit allows more jobs (snakemake 9.27, `JobScheduler._schedule_reevalutation`).
The timers are not daemon threads, so the interpreter waits for every pending one before the
process ends: with the profile's 5-minute span (workflow/profiles/default), a finished run sat up to
five minutes in `threading._shutdown`. The Snakefile's onsuccess / onerror handlers cancel them: the
scheduler they would wake has finished.
"""
from __future__ import annotations

import threading
from pathlib import PurePath

SCHEDULER = ("snakemake", "scheduling", "job_scheduler.py")


def _armed_by_scheduler(timer: threading.Timer) -> bool:
    code = getattr(timer.function, "__code__", None)
    return code is not None and PurePath(code.co_filename).parts[-3:] == SCHEDULER


def cancel_scheduler_timers() -> int:
    """Cancel the pending re-evaluation timers of Snakemake's scheduler (no other timer); the
    number cancelled."""
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer) and _armed_by_scheduler(t)]
    for t in timers:
        t.cancel()
    return len(timers)
