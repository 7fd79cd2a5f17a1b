"""The import graph the rules' code inputs, the DVC deps and the release code hash come from:
on a hand-made package (every kind of import), and on the modules the jobs were found to miss
when their code inputs were listed by hand."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ltopd import codegraph, grid


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "ltopd"
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(textwrap.dedent(text))
    return pkg


@pytest.fixture
def toy(tmp_path) -> Path:
    return _package(tmp_path, {
        "__init__.py": "",
        "catalog.py": 'DECL = "alpha:make"\nOTHER = "not a ref: at all"\n',
        "job.py": """
            from ltopd.lib import top
            def run():
                from ltopd.lib.lazy import f  # lazy: inside the function
                from . import helpers
                return f, helpers
        """,
        "helpers.py": "import ltopd.reg\n",
        "lib/__init__.py": "",
        "lib/top.py": "",
        "lib/lazy.py": "from .deep import x\n",
        "lib/deep.py": "",
        "reg/__init__.py": "from ltopd.catalog import DECL\nREG = resolve(__name__, DECL)\n",
        "reg/alpha.py": 'DATA = "table.yaml"\n',
        "reg/table.yaml": "a: 1\n",
        "reg/beta.py": "",  # in the registry's package but named by no declaration
        "unused.py": "import ltopd.lib.top\n",
    })


def test_closure_follows_lazy_relative_registry_and_package_imports(toy):
    found = codegraph.closure(["ltopd.job"], toy)
    assert found == {"ltopd", "ltopd.job", "ltopd.lib", "ltopd.lib.top", "ltopd.lib.lazy", "ltopd.lib.deep",
                     "ltopd.helpers", "ltopd.reg", "ltopd.reg.alpha", "ltopd.catalog"}
    files = {str(p.relative_to(toy)) for p in codegraph.code_files(["ltopd.job"], toy)}
    assert "reg/table.yaml" in files and "reg/beta.py" not in files and "unused.py" not in files
    with pytest.raises(ValueError, match="no module"):
        codegraph.closure(["ltopd.nope"], toy)


def test_code_deps_name_a_folder_once_only_when_all_its_files_are_deps(toy):
    repo = toy.parent
    src = repo / "src"
    src.mkdir()
    toy.rename(src / "ltopd")
    job = src / "ltopd" / "pipeline" / "thejob.py"
    job.parent.mkdir()
    (job.parent / "__init__.py").write_text("")
    job.write_text("from ltopd import job\n")
    out = grid.code_deps(["thejob"], repo)
    # lib/ is wholly a dep; reg/ is not (beta.py), so its files are named one by one
    assert "src/ltopd/lib" in out and "src/ltopd/lib/top.py" not in out
    assert "src/ltopd/reg/alpha.py" in out and "src/ltopd/reg" not in out and "src/ltopd/reg/table.yaml" in out
    assert "src/ltopd/pipeline" in out and "src/ltopd/unused.py" not in out


@pytest.mark.parametrize("job, module", [
    ("train_job", "bench/scoring/options.py"),   # imported by train/reward.py
    ("train_job", "bench/scoring/vqa_norm.py"),
    ("train_job", "data/lt14k.py"),
    ("twin_jobs", "bench/evidence.py"),           # the pretraining job's stages
    ("twin_jobs", "bench/suites/instruct.py"),
    ("twin_jobs", "data/sources.py"),
    ("evaluate", "grid.py"),                      # eval_setting: each setting's ratio and selector
])
def test_the_jobs_code_inputs_hold_what_the_hand_lists_missed(job, module):
    assert f"src/ltopd/{module}" in grid.job_code(job)


def test_the_release_code_is_the_release_builds_imports():
    from ltopd.twins.release import code_hashes

    files = set(code_hashes())
    assert {"twins/pretrain.py", "bench/evidence.py", "bench/suites/instruct.py", "data/sources.py",
            "twins/build.py"} <= files
    assert "report/grid_tables.py" not in files and "pipeline/train_job.py" not in files


def _fresh() -> None:
    for f in (codegraph._sources, codegraph._catalog_refs, codegraph.import_graph, codegraph.data_files):
        f.cache_clear()


@pytest.fixture
def fresh():
    """The in-process caches cleared before and after (the file cache is the toy's own)."""
    _fresh()
    yield _fresh
    _fresh()


def test_the_facts_cache_is_read_back_and_an_edited_file_is_parsed_again(toy, fresh, monkeypatch):
    first = codegraph.closure(["ltopd.job"], toy), codegraph.code_files(["ltopd.job"], toy)
    assert (toy / "__pycache__" / codegraph.CACHE_NAME).is_file()
    parsed = []
    real = codegraph._facts
    monkeypatch.setattr(codegraph, "_facts", lambda text, name: parsed.append(name) or real(text, name))
    fresh()
    assert (codegraph.closure(["ltopd.job"], toy), codegraph.code_files(["ltopd.job"], toy)) == first
    assert parsed == []  # every file's facts came from the cache
    (toy / "lib" / "top.py").write_text("import ltopd.unused\n")  # an edit: a new edge
    fresh()
    assert codegraph.closure(["ltopd.job"], toy) == first[0] | {"ltopd.unused"}
    assert [Path(p).name for p in parsed] == ["top.py"]  # only the edited file parsed again


@pytest.mark.parametrize("broken", ["{not json", "[]", '{"reader": READER, "facts": []}',
                                    '{"reader": READER, "facts": {"x": {"imports": []}}}'])
def test_a_broken_cache_gives_the_same_graph(toy, fresh, broken):
    want = codegraph.import_graph(toy), codegraph.data_files(toy)
    cache = toy / "__pycache__" / codegraph.CACHE_NAME
    cache.write_text(broken.replace("READER", json.dumps(codegraph._READER)))
    fresh()
    assert (codegraph.import_graph(toy), codegraph.data_files(toy)) == want
    assert json.loads(cache.read_text())["reader"] == codegraph._READER  # rewritten whole


def test_an_unwritable_cache_gives_the_same_graph_and_leaves_nothing(toy, fresh, monkeypatch):
    want = codegraph.import_graph(toy), codegraph.data_files(toy)
    (toy / "__pycache__" / codegraph.CACHE_NAME).unlink()

    def refuse(src, dst):
        raise PermissionError(f"read-only: {dst}")

    monkeypatch.setattr(codegraph.os, "replace", refuse)
    fresh()
    assert (codegraph.import_graph(toy), codegraph.data_files(toy)) == want
    assert list((toy / "__pycache__").iterdir()) == []  # no cache, no temp file left


def test_facts_read_by_another_version_of_the_reader_are_not_reused(toy, fresh, monkeypatch):
    want = codegraph.import_graph(toy)
    cache = toy / "__pycache__" / codegraph.CACHE_NAME
    stale = json.loads(cache.read_text())
    for facts in stale["facts"].values():
        facts["imports"] = []  # what an older reader might have kept
    cache.write_text(json.dumps(stale))
    fresh()
    assert codegraph.import_graph(toy) != want  # the same reader trusts what it kept
    cache.write_text(json.dumps(stale))
    monkeypatch.setattr(codegraph, "_READER", "another reader")
    fresh()
    assert codegraph.import_graph(toy) == want
