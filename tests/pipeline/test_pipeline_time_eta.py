"""benchmarks/pipeline_time.py's ETA check: the logger's durations read back, and each issue
point's error worked by hand."""
from __future__ import annotations

import importlib.util

import pytest

from conftest import ROOT
from ltopd.pipeline.eta import duration

spec = importlib.util.spec_from_file_location("pipeline_time", ROOT / "benchmarks" / "pipeline_time.py")
pipeline_time = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pipeline_time)


@pytest.mark.parametrize(("text", "s"), [("7s", 7), ("3m05s", 185), ("1h02m", 3720), ("0s", 0)])
def test_durations_read_back(text: str, s: int) -> None:
    assert pipeline_time.seconds(text) == s
    assert pipeline_time.seconds(duration(s)) == s


def test_eta_error_at_the_issue_points() -> None:
    # 100 jobs, one every 10 s: the run ends at 1000 s. The ETA says 200 s at job 60 (400 s remained:
    # -50%), the truth elsewhere, and "?" at job 5.
    lines = ["ltopd: 100 jobs to run"]
    for k in range(1, 101):
        eta = "?" if k == 5 else duration(200 if k == 61 else 1000 - 10 * k)
        lines.append(f"[{k}/100] evaluate x in 9s | elapsed {10 * k // 60}m{10 * k % 60:02d}s, ETA {eta}")
    table = pipeline_time.eta_table(lines)
    rows = [r for r in table.splitlines() if r.startswith("| [")]
    assert rows[0] == "| [61/100] | 3m20s | 390 s | -49% |"  # 60/99 of 100 jobs: the first line at or past 60.6
    assert rows[1] == "| [63/100] | 6m10s | 370 s | +0% |"
    assert [r.split(" | ")[0] for r in rows[2:]] == ["| [73/100]", "| [85/100]"]
    assert "worst ETA error after the first tenth of the jobs: -49% at [61/100]" in table


def test_no_progress_lines_says_so() -> None:
    assert "no progress lines" in pipeline_time.eta_table(["Building DAG of jobs..."])
