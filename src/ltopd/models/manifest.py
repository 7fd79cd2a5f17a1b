"""A released twin's folder format: what `save_backbone` writes plus ``manifest.json``.

The manifest records the recipe that built the twin, sha256 hashes of the source files that
determine the weights, the library versions, the weights' sha256, the pretraining cost and the
gate results (ltopd.twins.release builds it). Loading checks the weights against the manifest
(a corrupted or edited release is an error); reading it needs nothing of the factory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ltopd.job_identity import sha256_file

MANIFEST = "manifest.json"
REBUILD = "snakemake --cores all release_twins"


class ReleaseError(RuntimeError):
    """A release folder that is missing, incomplete, or whose weights do not match its manifest."""

    one_line = True


def weight_hashes(folder: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(folder.glob("*.safetensors"))}


def reduced_key(settings: Mapping[str, Any]) -> str:
    """The key a manifest's gates record the reduced score under, e.g. "cdpruner_0.05"."""
    return f"{settings['selector']}_{settings['ratio']:g}"


def read_manifest(folder: str | Path) -> dict[str, Any]:
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ReleaseError(f"{folder}: no {MANIFEST}; not a released twin. Build it with `{REBUILD}`")
    return json.loads(path.read_text())


def verify_weights(folder: str | Path) -> dict[str, Any]:
    """The manifest, after checking every weight file's sha256 against it."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    expected, actual = manifest["weights_sha256"], weight_hashes(folder)
    if not expected or expected != actual:
        bad = sorted(set(expected) ^ set(actual) | {k for k in expected if actual.get(k) != expected[k]})
        raise ReleaseError(f"{folder}: weight files {bad} do not match {MANIFEST} (corrupted or edited); "
                           f"restore them from git or rebuild with `{REBUILD}`")
    return manifest
