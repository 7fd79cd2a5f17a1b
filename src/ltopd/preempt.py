"""A job told to stop (SLURM's preemption or time limit, a plain `kill`) saves its state and exits.

SLURM preempts a job by sending SIGTERM to its processes, then SIGKILL once the partition's grace
period (`GraceTime`, `KillWait`) has passed; `sbatch --signal=TERM@<s>` sends the same before a
time limit. `ltopd.cli` installs `install`'s handler for every job: the signal only sets a flag,
so the update, setting or write in progress is finished, never cut (no half-written state). The
resumable loops read the flag where their state is whole (a training or pretraining update, an
evaluation group's vision pass), save their state and raise `Preempted`; the CLI prints its one
line and exits with `EXIT_CODE`. Snakemake counts that as a failed job and resubmits it
(`retries` in the profile; with `slurm-requeue`, SLURM requeues it itself): the rerun resumes from
the saved state and ends with the same result as an uninterrupted run.
"""
from __future__ import annotations

import signal
from collections.abc import Callable

EXIT_CODE = 75  # EX_TEMPFAIL: try again (the watchdog's code too): the rerun resumes
SIGNALS = (signal.SIGTERM, signal.SIGUSR1)  # SIGUSR1: `sbatch --signal=USR1@<s>`, the other usual choice

_received: list[str] = []


class Preempted(Exception):
    """Raised where a job stopped on request after saving its state; the message says where."""


def _handler(signum: int, frame: object) -> None:
    _received.append(signal.Signals(signum).name)  # said once, by the CLI, when the state is saved


def install() -> Callable[[], None]:
    """Catch the stop signals (main thread only); returns a function that restores the old handlers."""
    try:
        old = {s: signal.signal(s, _handler) for s in SIGNALS}
    except ValueError:  # not the main thread: leave the signals alone
        return lambda: None

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, h)
        _received.clear()

    return restore


def requested() -> bool:
    """Whether a stop signal came since `install`."""
    return bool(_received)


def request(name: str = "SIGTERM") -> None:
    """Ask for a stop as the signal would (tests)."""
    _received.append(name)


def stop(saved: str) -> None:
    """Raise `Preempted` when a stop was requested; `saved` says where the state is."""
    if _received:
        raise Preempted(f"{_received[0]}: {saved}; exiting {EXIT_CODE} (Snakemake / SLURM resubmit the job, and "
                        "the rerun resumes from that state)")
