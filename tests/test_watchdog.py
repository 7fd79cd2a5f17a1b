"""A job stops once the Snakemake process that started it is gone (a `kill -9` of Snakemake
leaves no stray job writing outputs behind the rerun's back)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from conftest import exits_within
from ltopd import watchdog
from ltopd.watchdog import ENV, EXIT_CODE, Owner

# A job: watches its owner, then "works" for a minute and writes its output at the end.
JOB = textwrap.dedent("""
    import sys, time
    from ltopd import watchdog
    assert watchdog.start(poll_s=0.2) is not None
    print("ready", flush=True)
    time.sleep(60)
    open(sys.argv[1], "w").write("written after snakemake died")
""")


def _owner(proc: subprocess.Popen) -> Owner:
    return Owner(proc.pid, psutil.Process(proc.pid).create_time(), socket.gethostname())


def test_a_job_exits_once_its_snakemake_is_killed(tmp_path):
    snakemake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        env = {**os.environ, ENV: _owner(snakemake).encode()}
        job = subprocess.Popen([sys.executable, "-c", JOB, str(tmp_path / "out")], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert job.stdout.readline() == "ready\n"
        time.sleep(0.5)
        assert job.poll() is None  # its snakemake is alive: the job works on
        os.kill(snakemake.pid, signal.SIGKILL)  # not reaped yet: a zombie counts as gone
        start = time.monotonic()
        assert job.wait(timeout=10) == EXIT_CODE
        assert time.monotonic() - start < 3
        err = job.stderr.read()
        assert f"snakemake (pid {snakemake.pid}) is gone; stopping" in err and len(err.splitlines()) == 1
        assert not (tmp_path / "out").exists()
    finally:
        snakemake.kill()
        snakemake.wait()


def test_the_job_stops_its_own_children_too(tmp_path):
    """A launcher's workers or data loader processes go with the job."""
    pid_file = tmp_path / "worker.pid"
    job_code = textwrap.dedent(f"""
        import subprocess, sys, time
        from ltopd import watchdog
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r}, "w").write(str(p.pid))
        watchdog.start(poll_s=0.2)
        time.sleep(60)
    """)
    snakemake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        env = {**os.environ, ENV: _owner(snakemake).encode()}
        job = subprocess.Popen([sys.executable, "-c", job_code], env=env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = psutil.Process(int(pid_file.read_text()))
        snakemake.kill()
        assert job.wait(timeout=10) == EXIT_CODE
        assert exits_within(worker, 5.0)
    finally:
        snakemake.kill()
        snakemake.wait()


def test_a_job_already_orphaned_at_start_exits_at_once(tmp_path):
    """Snakemake killed between the job's start and its watchdog's: the first check stops it."""
    snakemake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    owner = _owner(snakemake)
    snakemake.kill()
    snakemake.wait()
    job = subprocess.run([sys.executable, "-c", JOB, str(tmp_path / "out")], capture_output=True, text=True,
                         env={**os.environ, ENV: owner.encode()}, timeout=60)
    assert job.returncode == EXIT_CODE and "is gone; stopping" in job.stderr
    assert not (tmp_path / "out").exists()


def test_export_names_this_process_and_jobs_read_it(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    me = watchdog.export()
    assert Owner.decode(os.environ[ENV]) == me == Owner.current() and me.alive()
    assert watchdog.owner_from_env() is None  # a process never watches itself
    assert not Owner(me.pid, me.created + 5, me.host).alive()  # a reused pid is another process


@pytest.mark.parametrize("value", ["", "garbage", "12:x:host", f"1:0.0:not-{socket.gethostname()}"])
def test_no_watchdog_by_hand_on_garbage_or_for_another_host(monkeypatch, value):
    """`ltopd` run by hand has no variable; a value naming another host (a cluster job's copied
    environment) cannot be checked from here."""
    monkeypatch.setenv(ENV, value)
    assert watchdog.owner_from_env() is None and watchdog.start() is None


def test_every_ltopd_command_starts_the_watchdog(monkeypatch):
    from ltopd import cli

    calls = []
    monkeypatch.setattr(watchdog, "start", lambda: calls.append(True))
    with pytest.raises(SystemExit):
        cli.main(["--no-such-option"])
    assert calls == [True]
