"""DVC on a fresh clone, nothing built: the DAG and a dry run of every pipeline, and an
experiment that varies a parameter. Apart from test_pipeline_smoke.py (they need no smoke run),
so that `--dist loadfile` runs them beside it."""
from __future__ import annotations

from conftest import clone_worktree, run_ok


def test_dvc_graph_and_dry_run_on_a_fresh_clone(tmp_path):
    """LT-14K feeds evaluation in every pipeline's DAG; the default pipeline's dry run works on a
    fresh clone (nothing built yet)."""
    fresh = clone_worktree(tmp_path / "fresh")
    for dvc_yaml in ("dvc.yaml", "pipelines/smoke/dvc.yaml", "pipelines/paper/dvc.yaml"):
        dot = run_ok(["dvc", "dag", "--dot", dvc_yaml], fresh).stdout
        prefix = "" if dvc_yaml == "dvc.yaml" else f"{dvc_yaml}:"
        assert f'"{prefix}lt14k" -> "{prefix}table2"' in dot, dot
    proc = run_ok(["dvc", "repro", "--dry"], fresh)
    assert "Running stage 'lt14k'" in proc.stdout and "Running stage 'table2'" in proc.stdout


def test_dvc_exp_run_varies_a_parameter(tmp_path):
    import csv
    import io

    fresh = clone_worktree(tmp_path / "exp")
    run_ok(["dvc", "exp", "run", "pipelines/smoke/dvc.yaml:lt14k", "-S", "config/smoke.yaml:lt14k.pool_factor=3.0",
          "-n", "pool3"], fresh)
    rows = list(csv.DictReader(io.StringIO(run_ok(["dvc", "exp", "show", "--csv"], fresh).stdout)))
    exp = [r for r in rows if r["Experiment"] == "pool3"]
    assert exp and exp[0]["config/smoke.yaml:lt14k.pool_factor"] == "3.0", rows
