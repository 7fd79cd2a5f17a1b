"""A job stops when the Snakemake process that started it is gone.

A `kill -9` of Snakemake (the out-of-memory killer, a hard kill of a session) kills Snakemake
alone: the shells of its running jobs keep going, write their outputs after nobody is left to
record them, and hold the cores the rerun needs. So the Snakefile names its own process in the
environment (`export`, at parse time: the pid, the process's start time, which tells a reused
pid apart, and the host), and every `ltopd` job started with that variable watches it from a
daemon thread (`start`, called by `ltopd.cli`): once that process is gone it prints one line and
exits. Its outputs are written atomically (`ltopd.atomic`), so nothing half-written is left;
training resumes from its last checkpoint. tracking.start_pipeline uses the same record to close
the MLflow runs a killed Snakemake left RUNNING.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
from dataclasses import dataclass

ENV = "LTOPD_SNAKEMAKE"
EXIT_CODE = 75  # EX_TEMPFAIL: nobody reads it (Snakemake is gone); the rerun does the job again
POLL_S = 1.0


@dataclass(frozen=True)
class Owner:
    """A process on one host: pid, start time (psutil's create_time) and host name."""

    pid: int
    created: float
    host: str

    @classmethod
    def current(cls) -> Owner:
        import psutil

        return cls(os.getpid(), psutil.Process().create_time(), socket.gethostname())

    def encode(self) -> str:
        return f"{self.pid}:{self.created!r}:{self.host}"

    @classmethod
    def decode(cls, text: str) -> Owner | None:
        """The owner a value of `encode` names; None for anything else (never an error: a job
        must not fail on a malformed variable)."""
        try:
            pid, created, host = text.split(":", 2)
            return cls(int(pid), float(created), host)
        except ValueError:
            return None

    def local(self) -> bool:
        return self.host == socket.gethostname()

    def alive(self) -> bool:
        """Whether this process still runs (a zombie, killed but not yet reaped, does not)."""
        import psutil

        try:
            proc = psutil.Process(self.pid)
            return abs(proc.create_time() - self.created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return False
        except psutil.AccessDenied:  # cannot tell: never stop a job (nor close a run) on a guess
            return True


def export() -> Owner:
    """Name the current process (Snakemake, parsing the Snakefile) to the jobs it starts."""
    owner = Owner.current()
    os.environ[ENV] = owner.encode()
    return owner


def owner_from_env() -> Owner | None:
    """The Snakemake process this job was started by, if it runs on this host."""
    owner = Owner.decode(os.environ.get(ENV, ""))
    return owner if owner is not None and owner.local() and owner.pid != os.getpid() else None


def _stop(owner: Owner) -> None:
    print(f"ltopd: snakemake (pid {owner.pid}) is gone; stopping: the rerun resumes from the last checkpoint",
          file=sys.stderr, flush=True)
    try:  # processes this job started (data loader workers, a launcher's workers) go with it
        import psutil

        for child in psutil.Process().children(recursive=True):
            child.kill()
    except Exception:  # the exit below matters more than the children
        pass
    os._exit(EXIT_CODE)


def _watch(owner: Owner, poll_s: float) -> None:
    event = threading.Event()
    while owner.alive():
        event.wait(poll_s)
    _stop(owner)


def start(poll_s: float = POLL_S) -> threading.Thread | None:
    """Watch the Snakemake process named in the environment (none: a job run by hand) from a
    daemon thread; exit the whole process once it is gone."""
    owner = owner_from_env()
    if owner is None:
        return None
    thread = threading.Thread(target=_watch, args=(owner, poll_s), name="ltopd-watchdog", daemon=True)
    thread.start()
    return thread
