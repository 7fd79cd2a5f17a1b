"""Issue 54: every fault a cluster run meets, injected, and one table of what the user saw.

    python benchmarks/faults.py [--workdir /tmp/faults-clone] [--keep]

Clones the working tree's committed files into --workdir (a clean clone: `git clone` of HEAD),
runs the fault tests there with the clone's own source first on the path (`pytest -p
no:cacheprovider --junitxml`), and prints one row per fault: the fault, the line the user saw
(each test records it with `record_property("line", ...)`), whether the job survived (resumed to
the same result) or refused with one line, whether the rerun is identical, and the files lost.

A row is only printed as "identical" / "refused with one line" and "0" files lost when its test
passed: each test asserts exactly that (bit-identical weights or byte-identical predictions and
metrics after the rerun; no output, temporary or partial file left where a later job reads; a
single `ltopd: ...` line). A failed test prints FAILED in its row and the script exits 1.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (test node id, fault, outcome when it passes: "survived" or "refused")
FAULTS = (
    ("tests/train/test_trainer.py::test_a_sigterm_mid_update_saves_that_update_and_the_rerun_is_bit_identical[ltopd]",
     "1 preemption: SIGTERM mid-update, training (LT-OPD)", "survived"),
    ("tests/twins/test_pretrain.py::test_a_sigterm_mid_update_saves_the_build_state_and_the_rerun_is_bit_identical",
     "1 preemption: SIGTERM mid-update, release build", "survived"),
    ("tests/pipeline/test_faults.py::test_a_preempted_evaluation_group_reruns_only_the_settings_it_had_not_finished",
     "1 preemption: SIGTERM, evaluation group", "survived"),
    ("tests/pipeline/test_faults.py::test_a_full_disk_saving_a_checkpoint_leaves_no_state",
     "2 full disk: training checkpoint", "refused"),
    ("tests/pipeline/test_faults.py::"
     "test_a_full_disk_writing_a_prediction_file_leaves_no_file_and_the_rerun_is_identical",
     "2 full disk: predictions.jsonl", "refused"),
    ("tests/pipeline/test_faults.py::test_a_full_disk_copying_an_mlflow_artifact_names_it_and_keeps_no_half_copy",
     "2 full disk: MLflow artifact", "refused"),
    ("tests/pipeline/test_faults.py::test_a_cut_short_record_set_is_refused_with_one_line",
     "3 truncated: benchmark record set", "refused"),
    ("tests/pipeline/test_faults.py::test_cut_short_predictions_and_metrics_are_refused_before_scoring",
     "3 truncated: predictions.jsonl / metrics.json", "refused"),
    ("tests/pipeline/test_faults.py::test_a_cut_short_student_is_refused_with_one_line",
     "3 truncated: student weights", "refused"),
    ("tests/train/test_trainer.py::test_a_cut_short_checkpoint_is_set_aside_with_one_line_and_the_run_starts_over",
     "3 truncated: train_state checkpoint", "survived"),
    ("tests/twins/test_pretrain.py::test_a_cut_short_build_state_is_not_resumed",
     "3 truncated: release build state", "survived"),
    ("tests/pipeline/test_unlock.py::test_a_second_run_in_the_same_folder_is_refused_with_the_lock_message",
     "4 two runs at once in one working dir", "refused"),
    ("tests/pipeline/test_faults.py::test_two_working_directories_share_one_sqlite_store_without_losing_a_run",
     "4 two working dirs, one SQLite store", "survived"),
    ("tests/bench/test_broken_real_data.py::test_an_image_that_does_not_decode",
     "5 real data: image does not decode", "refused"),
    ("tests/bench/test_broken_real_data.py::test_a_missing_field", "5 real data: missing field", "refused"),
    ("tests/bench/test_broken_real_data.py::test_a_wrong_answer_type", "5 real data: wrong answer type", "refused"),
    ("tests/bench/test_broken_real_data.py::test_an_empty_split", "5 real data: empty split", "refused"),
    ("tests/bench/test_broken_real_data.py::test_a_duplicated_question_id", "5 real data: duplicated id", "refused"),
    ("tests/data/test_lt14k.py::test_source_smaller_than_quota", "5 LT-14K: source short of its quota", "refused"),
    ("tests/pipeline/test_faults.py::test_an_unreachable_mlflow_server_stops_the_job_in_seconds_with_one_line",
     "6 MLflow server refuses connections", "refused"),
)


def clone(dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    return dest


def run(workdir: Path) -> tuple[dict[str, dict[str, str]], float]:
    report = workdir / "faults-junit.xml"
    env = {**os.environ, "PYTHONPATH": f"{workdir / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env = {k: v for k, v in env.items() if not k.startswith(("LTOPD_MLFLOW_", "MLFLOW_"))}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                    f"--junitxml={report}", *[f for f, _, _ in FAULTS]], cwd=workdir, env=env)
    wall = time.perf_counter() - start
    results: dict[str, dict[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        file = case.get("file") or ""
        name = case.get("name") or ""
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        failed = any(case.find(tag) is not None for tag in ("failure", "error", "skipped"))
        results[f"{file}::{name}"] = {"ok": "no" if failed else "yes", **props}
    return results, wall


def table(results: dict[str, dict[str, str]]) -> tuple[list[str], bool]:
    rows = ["| fault | what the user saw | outcome | rerun identical | files lost |", "|---|---|---|---|---|"]
    ok = True
    for node, fault, outcome in FAULTS:
        r = results.get(node)
        if r is None or r["ok"] != "yes":
            ok = False
            rows.append(f"| {fault} | FAILED ({'not run' if r is None else 'test failed'}) | | | |")
            continue
        line = re.sub(r"/tmp/pytest-of-[^/]+/pytest-\d+/[^/ ]+/", ".../", r.get("line") or "").replace("|", "\\|")
        verdict = "survived: identical" if outcome == "survived" else "refused with one line"
        identical = "yes" if outcome == "survived" or r.get("rerun") == "identical" else "n/a (refused)"
        rows.append(f"| {fault} | `{line}` | {verdict} | {identical} | 0 |")
    return rows, ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, help="where to clone (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the clone")
    args = p.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ltopd-faults-"))
    if workdir.exists() and any(workdir.iterdir()):
        raise SystemExit(f"{workdir} is not empty: give an empty or new --workdir")
    clone(workdir)
    try:
        results, wall = run(workdir)
        rows, ok = table(results)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    print(f"faults of issue 54 on commit {head.strip()} ({len(FAULTS)} injected, {wall:.0f} s):\n")
    print("\n".join(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
