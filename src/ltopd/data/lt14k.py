"""Build LT-14K: sources -> seeded quota sampling -> a `datasets` dataset on disk + manifest."""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ltopd.atomic import atomic_dir, write_json
from ltopd.data.records import FEATURES, encode_images, hash_record
from ltopd.data.sampler import batch_mix, interleave, pick, scaled_quotas
from ltopd.data.sources import open_pool
from ltopd.progress import bar as progress_bar


def plan(lt: dict[str, Any]) -> tuple[dict[str, int], list[dict[str, int]]]:
    """(per-source quota after scaling, per-batch source counts). Sources in name order, so the
    result never depends on how a YAML file or a JSON spec happened to order them."""
    quotas = scaled_quotas({k: lt["sources"][k]["quota"] for k in sorted(lt["sources"])}, lt["scale"],
                           lt["num_batches"] * lt["batch_size"])
    return quotas, batch_mix(quotas, lt["num_batches"], lt["batch_size"])


SHARD_ROWS = 256


def _spill(rows: list[dict[str, Any]], path: Path):
    """Encode a shard to disk and reopen it memory-mapped, so images never pile up in RAM."""
    import datasets

    datasets.Dataset.from_list(rows, features=FEATURES).save_to_disk(str(path))  # quiet: see build()
    return datasets.load_from_disk(str(path))


def _sampled(mix: list[dict[str, int]], pools: dict[str, Any], picks: dict[str, list[int]]) -> Iterator[dict[str, Any]]:
    """Records in batch order: batch b holds mix[b][s] items of source s, interleaved."""
    cursor = dict.fromkeys(pools, 0)
    for b, counts in enumerate(mix):
        for pos, (name, j) in enumerate(interleave(counts)):
            rec = pools[name].get(picks[name][cursor[name] + j])
            rec.update(batch=b, position=pos)
            yield rec
        for name, c in counts.items():
            cursor[name] += c


def build(lt: dict[str, Any], world: dict[str, Any], out_dir: str | Path, progress: bool = True) -> dict[str, Any]:
    """Sample LT-14K as configured (`lt14k` and `world` sections) into `out_dir`; return the manifest."""
    import datasets

    t0 = time.perf_counter()
    datasets.disable_progress_bars()  # our own bar counts questions; theirs would interleave with it
    quotas, mix = plan(lt)
    pools = {k: open_pool(k, lt["sources"][k], quotas[k], lt["pool_factor"], world) for k in quotas}
    short = [k for k in pools if pools[k].size < quotas[k]]
    if short:  # before any row is read: name each source that cannot fill its quota
        from ltopd.data.sources import SourceError

        raise SourceError("LT-14K: " + "; ".join(
            f"source {k} ({lt['sources'][k].get('path') or 'synthetic'}) has {pools[k].size} records, short of its "
            f"quota of {quotas[k]}" for k in short) + "; add records or lower lt14k.scale")
    picks = {k: pick(pools[k].size, quotas[k], lt["sources"][k]["seed"]) for k in pools}
    digest = hashlib.sha256()
    shards, rows = [], []
    with atomic_dir(out_dir) as tmp:
        with progress_bar(sum(quotas.values()), "LT-14K", "q", progress) as bar:
            for rec in _sampled(mix, pools, picks):
                digest.update(hash_record(rec))
                rows.append(encode_images(rec))
                bar.update()
                if len(rows) == SHARD_ROWS:
                    shards.append(_spill(rows, tmp / ".shards" / str(len(shards))))
                    rows = []
        if rows:
            shards.append(_spill(rows, tmp / ".shards" / str(len(shards))))
        ds = datasets.concatenate_datasets(shards)
        ds.save_to_disk(str(tmp / "dataset"))
        del ds, shards
        shutil.rmtree(tmp / ".shards")
        ds = datasets.load_from_disk(str(tmp / "dataset"))
        elapsed = time.perf_counter() - t0
        manifest = {
            "num_questions": len(ds),
            "per_source": quotas,
            "per_batch": [dict(c) for c in mix],
            "num_batches": lt["num_batches"],
            "batch_size": lt["batch_size"],
            "seeds": {k: s["seed"] for k, s in lt["sources"].items()},
            "content_sha256": digest.hexdigest(),
            "build_seconds": round(elapsed, 3),
            "questions_per_second": round(len(ds) / elapsed, 1),
        }
        write_json(tmp / "manifest.json", manifest)
    return manifest


def load(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """Load a built LT-14K (the `datasets` dataset) and its manifest."""
    import datasets

    path = Path(path)
    return datasets.load_from_disk(str(path / "dataset")), json.loads((path / "manifest.json").read_text())
