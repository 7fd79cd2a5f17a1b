"""`snakemake --logger ltopd`: one line per finished job with what it was, its time, the run's
elapsed time and an ETA weighted by each job's expected cost (ltopd.pipeline.eta), instead of
Snakemake's blocks of input and output paths; a line a minute for each job still running after a
minute, with the last line of its log (a progress bar, the setting it finished); Table 2's
headline when it is written.

Errors and warnings are printed as Snakemake's own formatter prints them; the full log is still
written to .snakemake/log/.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from logging import WARNING, LogRecord
from pathlib import Path

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from ltopd.pipeline import job_costs
from ltopd.pipeline.eta import Eta, describe_job, duration

# Seconds between the progress lines of a running job (LTOPD_PROGRESS_EVERY: tests shorten it).
PROGRESS_EVERY = float(os.environ.get("LTOPD_PROGRESS_EVERY", "60"))


def log_tail(path: str | Path, width: int = 110) -> str:
    """The last non-empty line of a job's log (progress bars redraw with \\r), cut to ``width``."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return last if len(last) <= width else last[: width - 3] + "..."


@dataclass
class Running:
    rule: str
    label: str
    start: float
    key: str
    logs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    pass


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import DefaultFormatter

        self.eta = Eta()
        self.profile: str | None = None
        self.started: dict[int, Running] = {}
        self.failed: dict[str, int] = defaultdict(int)
        self.fallback = DefaultFormatter(self.common_settings.quiet, self.common_settings.show_failed_logs)
        self.stream = sys.stderr
        self.guard = threading.Lock()  # not `lock`: logging.Handler holds its own while it emits
        self.stop = threading.Event()
        self.ticker: threading.Thread | None = None

    def emit(self, record: LogRecord) -> None:
        event = getattr(record, "event", None)
        now = time.monotonic()
        if event == LogEvent.RUN_INFO and isinstance(getattr(record, "stats", None), dict):
            with self.guard:
                self.eta.plan({k: int(v) for k, v in record.stats.items() if k != "total"}, now)
            self._print(f"ltopd: {sum(self.eta.planned.values())} jobs to run")
        elif event == LogEvent.JOB_INFO:
            self._adopt_plan(now)
            wildcards = record.wildcards or {}
            outputs = tuple(getattr(record, "output", None) or ())
            label = describe_job(record.rule_name, wildcards, record.rule_msg, outputs)
            key = job_costs.job_key(record.rule_name, wildcards)
            with self.guard:
                self.started[record.jobid] = Running(record.rule_name, label, now, key,
                                                     tuple(getattr(record, "log", None) or ()), outputs)
                self.eta.started(key, now)
            self._start_ticker()
        elif event == LogEvent.JOB_FINISHED and record.job_id in self.started:
            with self.guard:
                job = self.started.pop(record.job_id)
                self.eta.finished(job.rule, now - job.start, now, job.key)
                done, total = self.eta.done, self.eta.total
                left = self.eta.remaining_s(now)
                records = self.eta.records()
            eta = f"ETA {duration(left)}" if left is not None else "ETA ?"
            self._print(f"[{done}/{total}] {job.label} in {duration(now - job.start)} "
                        f"| elapsed {duration(self.eta.elapsed(now))}, {eta}")
            if self.profile is not None:  # the next run's calibration, kept as jobs finish
                old = job_costs.read_records(self.profile)
                job_costs.write_records(self.profile, {**old, **records})
            if job.rule == "table2":
                self._headline(job.outputs)
        elif event in (LogEvent.JOB_ERROR, LogEvent.ERROR) or record.levelno >= WARNING:
            self._print(self.fallback.format(record))

    def _adopt_plan(self, now: float) -> None:
        """The run's per-job costs, published by the Snakefile's onstart (after the job stats)."""
        plan = job_costs.PUBLISHED
        if self.profile is not None or not plan.get("costs"):
            return
        with self.guard:
            self.profile = plan["profile"]
            records = job_costs.read_records(self.profile)
            self.eta.set_records(records)
            self.eta.plan_costs(plan["costs"], plan.get("cores"))
            left = self.eta.remaining_s(now)
        basis = "the last run's times" if records else "the default run's times on 2 cores"
        if left is not None:
            self._print(f"ltopd: expected about {duration(left)} (each job weighed by its questions; {basis})")

    def _start_ticker(self) -> None:
        if self.ticker is None:
            self.ticker = threading.Thread(target=self._tick, name="ltopd-progress", daemon=True)
            self.ticker.start()

    def _tick(self) -> None:
        while not self.stop.wait(PROGRESS_EVERY):
            now = time.monotonic()
            with self.guard:
                long = [j for j in self.started.values() if now - j.start >= PROGRESS_EVERY]
                expected = {j.key: self.eta.expected_of(j.key) for j in long}
            for j in long:
                exp = expected[j.key]
                tail = next((t for t in (log_tail(f) for f in j.logs) if t), "")
                self._print(f"  ... {j.label}: running {duration(now - j.start)}"
                            + (f" of ~{duration(exp)}" if exp else "") + (f" | {tail}" if tail else ""))

    def _headline(self, outputs: tuple[str, ...]) -> None:
        from ltopd.report.headline import summary_lines

        found = [o for o in outputs if o.endswith(".json")]
        if found:
            lines = summary_lines(found[0])
            if lines:
                self._print("\n".join(lines))

    def close(self) -> None:
        self.stop.set()
        super().close()

    def _print(self, text: str) -> None:
        if text:
            print(text, file=self.stream, flush=True)

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
