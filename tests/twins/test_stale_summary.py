"""The released twins' staleness as one line per run (issue 55: twelve warnings on every call)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ltopd.twins.release import REASONS, stale_summary

ROOT = Path(__file__).resolve().parents[2]


def test_one_line_groups_the_releases_by_their_reasons():
    reasons = {"a": [("code", "code changed since the release: x.py"), ("libraries", "libraries changed: t 1 -> 2")],
               "b": [], "c": [("code", "code changed since the release: y.py"), ("libraries", "...")],
               "d": [("recipe", "recipe changed since the release: ['pretrain']")]}
    line = stale_summary(reasons, "logs/release-staleness.txt")
    assert "\n" not in line
    assert line.startswith("WARNING: 3 released twins differ from what would build them now: "
                           "a, c (code changed, libraries changed); d (recipe changed). ")
    assert "details: logs/release-staleness.txt" in line and "--forcerun release_twin" in line
    assert stale_summary({"a": [], "b": []}) is None
    one = stale_summary({"a": [("unrecorded", "...")]})
    assert one.startswith("WARNING: 1 released twin differs from what would build it now: a (code not recorded).")
    assert set(REASONS) == {"code", "unrecorded", "dropped", "libraries", "recipe"}


def test_a_dry_run_prints_no_staleness():
    """-n: the warning is for runs (Snakemake's onstart), not for plans."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "results/table2.csv"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "released twin" not in proc.stdout + proc.stderr
