"""A benchmark's records on disk: built once per (benchmark, seed) as a `datasets` dataset,
read by every evaluation job of that benchmark (so 25 settings never regenerate the images)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets

from ltopd import integrity
from ltopd.atomic import atomic_dir
from ltopd.data.records import FEATURES, encode_images
from ltopd.data.rows import rows

# The LT-14K record schema without the sampler's batch/position columns.
BENCH_FEATURES = datasets.Features({k: v for k, v in FEATURES.items() if k not in ("batch", "position")})


def build_records(name: str, entry: dict[str, Any], seed: int, world: dict[str, Any]) -> list[dict]:
    """Records of benchmark ``name`` as the profile's ``evaluation.benchmarks`` entry says:
    ``{n: ...}`` draws the synthetic twin at evaluation ``seed``; ``{path: ...}`` loads the real
    benchmark from a local file or folder (seed-independent)."""
    from ltopd.bench.suites import load_records, synthetic_records

    if entry.get("path"):
        return load_records(name, entry["path"])
    return synthetic_records(name, int(entry["n"]), seed, world)


def save_records(records: list[dict], out: str | Path) -> Path:
    """Write ``records`` to ``out`` (temp folder, then rename: nothing half-written on failure)."""
    encoded: dict = {}  # an image object several records show is encoded once
    rows = [encode_images({k: r[k] for k in BENCH_FEATURES}, encoded) for r in records]
    with atomic_dir(out) as tmp:
        datasets.Dataset.from_list(rows, features=BENCH_FEATURES).save_to_disk(str(tmp))
        integrity.seal_dir(tmp)  # load_saved checks it: a cut-short record set is never evaluated
    return Path(out)


def load_saved(path: str | Path) -> list[dict]:
    """The records written by :func:`save_records` (images decoded to PIL; ``ltopd.data.rows``:
    the table read at once, not row by row)."""
    path = Path(path)
    if not (path / "dataset_info.json").is_file():
        raise FileNotFoundError(f"{path}: not a saved benchmark (no dataset_info.json); "
                                f"build it with `ltopd build-bench`")
    integrity.check(path)  # Corrupt, one line naming the cut-short file
    return rows(datasets.load_from_disk(str(path)))
