"""`snakemake --logger ltopd`: one line per finished job with what it was, its time, the run's
elapsed time and an ETA, instead of Snakemake's blocks of input and output paths.

Errors and warnings are printed as Snakemake's own formatter prints them; the full log is still
written to .snakemake/log/.
"""
from __future__ import annotations

import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from logging import WARNING, LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from ltopd.pipeline.eta import Eta, describe_job, duration


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    pass


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import DefaultFormatter

        self.eta = Eta()
        self.started: dict[int, tuple[str, str, float]] = {}
        self.failed: dict[str, int] = defaultdict(int)
        self.fallback = DefaultFormatter(self.common_settings.quiet, self.common_settings.show_failed_logs)
        self.stream = sys.stderr

    def emit(self, record: LogRecord) -> None:
        event = getattr(record, "event", None)
        now = time.monotonic()
        if event == LogEvent.RUN_INFO and isinstance(getattr(record, "stats", None), dict):
            self.eta.plan({k: int(v) for k, v in record.stats.items() if k != "total"}, now)
            self._print(f"ltopd: {sum(self.eta.planned.values())} jobs to run")
        elif event == LogEvent.JOB_INFO:
            label = describe_job(record.rule_name, record.wildcards or {}, record.rule_msg,
                                 getattr(record, "output", None) or ())
            self.started[record.jobid] = (record.rule_name, label, now)
        elif event == LogEvent.JOB_FINISHED and record.job_id in self.started:
            rule, label, start = self.started.pop(record.job_id)
            self.eta.finished(rule, now - start, now)
            done, total = self.eta.done, self.eta.total
            left = self.eta.remaining_s(now)
            eta = f"ETA {duration(left)}" if left is not None else "ETA ?"
            self._print(f"[{done}/{total}] {label} in {duration(now - start)} "
                        f"| elapsed {duration(self.eta.elapsed(now))}, {eta}")
        elif event in (LogEvent.JOB_ERROR, LogEvent.ERROR) or record.levelno >= WARNING:
            self._print(self.fallback.format(record))

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
