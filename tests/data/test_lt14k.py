"""Building LT-14K end to end (library level): quotas, order, determinism, atomicity."""
from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from conftest import make_jsonl_source
from ltopd.data import lt14k
from ltopd.data.sources import SourceError

WORLD = {"image_size": 64}


def test_build_realises_quotas_and_batches(tmp_path, tiny_lt):
    manifest = lt14k.build(tiny_lt, WORLD, tmp_path / "lt", progress=False)
    ds, saved = lt14k.load(tmp_path / "lt")
    assert saved == manifest and len(ds) == 14
    assert manifest["per_source"] == {"llava": 3, "onethinker": 7, "pixmo": 3, "vision_opd": 1}
    assert Counter(ds["source"]) == Counter(manifest["per_source"])
    by_batch = Counter(zip(ds["batch"], ds["source"]))
    for b, mix in enumerate(manifest["per_batch"]):
        assert sum(mix.values()) == 2
        assert {s: by_batch[(b, s)] for s in mix} == mix
    assert ds["batch"] == sorted(ds["batch"])
    assert len(set(ds["id"])) == 14
    row = ds[0]
    assert row["images"][0].size == (64, 64) and row["question"] and row["answer"]


def test_same_config_same_hash_and_seed_changes_it(tmp_path, tiny_lt):
    a = lt14k.build(tiny_lt, WORLD, tmp_path / "a", progress=False)["content_sha256"]
    b = lt14k.build(tiny_lt, WORLD, tmp_path / "b", progress=False)["content_sha256"]
    other = copy.deepcopy(tiny_lt)
    other["sources"]["vision_opd"]["seed"] += 1
    c = lt14k.build(other, WORLD, tmp_path / "c", progress=False)["content_sha256"]
    assert a == b != c
    # key order of the sources (YAML vs JSON spec) does not matter
    shuffled = copy.deepcopy(tiny_lt)
    shuffled["sources"] = dict(reversed(list(tiny_lt["sources"].items())))
    assert lt14k.build(shuffled, WORLD, tmp_path / "d", progress=False)["content_sha256"] == a


def test_real_source_mixed_with_synthetic(tmp_path, tiny_lt):
    lt = copy.deepcopy(tiny_lt)
    lt["sources"]["llava"] = {"quota": 2800, "seed": 20260824, "kind": "jsonl",
                              "path": str(make_jsonl_source(tmp_path / "llava"))}
    lt14k.build(lt, WORLD, tmp_path / "lt", progress=False)
    ds, _ = lt14k.load(tmp_path / "lt")
    llava = [r for r in ds if r["source"] == "llava"]
    assert len(llava) == 3 and all(r["id"].startswith("llava-q") for r in llava)


def test_failure_leaves_nothing_behind(tmp_path, tiny_lt):
    lt = copy.deepcopy(tiny_lt)
    folder = tmp_path / "src"
    path = make_jsonl_source(folder, n=12)
    for f in (folder / "imgs").glob("*.png"):
        f.unlink()  # the file opens, images fail while sampling
    lt["sources"]["pixmo"] = {"quota": 3000, "seed": 1, "kind": "jsonl", "path": str(path)}
    with pytest.raises(SourceError):
        lt14k.build(lt, WORLD, tmp_path / "out" / "lt", progress=False)
    assert list((tmp_path / "out").iterdir()) == []  # no half-written dataset, no temp folder


def test_source_smaller_than_quota(tmp_path, tiny_lt, record_property):
    lt = copy.deepcopy(tiny_lt)
    lt["sources"]["onethinker"] = {"quota": 7200, "seed": 1, "kind": "jsonl",
                                   "path": str(make_jsonl_source(tmp_path / "s", n=3))}
    # issue 54: one line naming the source that is short, its path, what it has and its quota
    with pytest.raises(SourceError, match=r"^LT-14K: source onethinker \(.*/s.*\) has 3 records, short of its "
                                          r"quota of 7; add records or lower lt14k.scale$") as e:
        lt14k.build(lt, WORLD, tmp_path / "lt", progress=False)
    record_property("line", f"ltopd: {e.value}")  # benchmarks/faults.py prints it
    assert not (tmp_path / "lt").exists()
    json.dumps(lt)  # the section stays JSON-serialisable (it travels as --spec)


def test_committed_fingerprint_is_what_the_default_profile_builds(tmp_path):
    """metrics/lt14k.json is committed (DVC's table2 stage depends on it, so a changed LT-14K
    reruns evaluation and `dvc repro --dry` works on a fresh clone); it must match a build."""
    import json
    from pathlib import Path

    from ltopd import config

    root = Path(__file__).resolve().parents[2]
    cfg = config.load(root / "config" / "default.yaml")
    committed = json.loads((root / "metrics" / "lt14k.json").read_text())
    built = lt14k.build(cfg["lt14k"], cfg["world"], tmp_path / "lt14k", progress=False)
    assert committed["content_sha256"] == built["content_sha256"], \
        "stale metrics/lt14k.json: rebuild it with `snakemake --cores 1 metrics/lt14k.json --forcerun lt14k`"
    assert committed["num_questions"] == built["num_questions"]
