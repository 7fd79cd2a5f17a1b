"""What every Snakemake parse and every job runs first (profile validation, the grid, the release
checks) imports neither torch nor transformers: they cost ~4 CPU-s per process, and a run
starts hundreds of processes (docs/measured/pipeline-time.md). Checked in a fresh interpreter."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "datasets")


def test_validating_every_profile_and_the_snakefiles_imports_load_no_heavy_package():
    code = f"""
import json, sys
from pathlib import Path
from ltopd import config, grid
from ltopd.models.manifest import read_manifest
from ltopd.twins.release import staleness
for p in sorted(Path({str(ROOT / 'config')!r}).glob('*.yaml')):
    cfg = config.load(p)
    grid.eval_groups(cfg)
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == []


def test_the_models_package_names_load_their_module_on_first_use():
    import ltopd.models as models
    from ltopd.models import backbone, loading, prompt

    assert models.load_backbone is loading.load_backbone and models.Backbone is backbone.Backbone
    assert models.extract_answer is prompt.extract_answer
    assert set(models.__all__) <= set(dir(models))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        models.nope  # noqa: B018


def test_the_twin_names_validation_reads_are_the_built_twins():
    from ltopd.twins import architectures, specs

    assert architectures.TWINS is specs.TWINS and set(specs.TWINS) == {"qwen35-tiny", "qwen35-small",
                                                                          "glm46v-tiny", "llava-ov-tiny"}
