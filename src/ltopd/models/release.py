"""Released twins: a pretrained tiny twin frozen in a folder with a manifest, as the paper's
released checkpoints are.

A release folder holds what `save_backbone` writes (config, safetensors weights, tokenizer and
processor files) plus ``manifest.json``: the recipe that built it (the profile's pretrain and
world sections and the backbone entry), sha256 hashes of the source files that determine the
weights, the library versions, the weights' sha256, the pretraining cost and the gate results.
Loading checks the weights against the manifest (a corrupted or edited release is an error);
`staleness` names what changed since the release was built (code, recipe, libraries), which the
pipeline reports as a warning with the command that rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # src/ltopd
# Source files whose behaviour determines a twin's weights: the world and the benchmark twins
# (the items), the models and processors, the pretraining loop and the tokenizer's corpus.
RELEASE_CODE = ("data/world/*.py", "data/sources.py", "bench/suites/*.py", "bench/evidence.py", "models/*.py",
                "selectors/*.py")
# Files under those patterns that cannot change a twin's weights (loading, inference, methods).
NOT_RELEASE_CODE = ("models/loading.py", "models/inference.py", "models/llava_mini.py", "models/release.py")
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "pillow")
REBUILD = "snakemake --cores all release_twins"


class ReleaseError(RuntimeError):
    """A release folder that is missing, incomplete, or whose weights do not match its manifest."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def code_hashes(root: Path = PACKAGE_ROOT) -> dict[str, str]:
    """sha256 of every release-relevant source file, keyed by its path under the package."""
    files = {p for pattern in RELEASE_CODE for p in root.glob(pattern)}
    return {str(p.relative_to(root)): sha256_file(p) for p in sorted(files)
            if str(p.relative_to(root)) not in NOT_RELEASE_CODE}


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = "absent"
    return out


def weight_hashes(folder: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(folder.glob("*.safetensors"))}


def twin_spec(spec: Mapping[str, Any], backbone: str) -> dict[str, Any]:
    """`spec` as `backbone`'s twin is built: the entry's own `pretrain_stages`, when it has them,
    replace the profile's pretrain.stages (twins of one profile can have different recipes)."""
    entry = spec["backbones"][backbone]
    if not entry.get("pretrain_stages"):
        return dict(spec)
    own = {k: v for k, v in entry.items() if k != "pretrain_stages"}
    return {**spec, "pretrain": {**spec["pretrain"], "stages": entry["pretrain_stages"]},
            "backbones": {**spec["backbones"], backbone: own}}


def recipe(spec: Mapping[str, Any], backbone: str) -> dict[str, Any]:
    """The part of a profile that determines a twin's weights."""
    spec = twin_spec(spec, backbone)
    entry = {k: v for k, v in spec["backbones"][backbone].items() if k != "release"}
    return {"backbone": backbone, "entry": entry, "pretrain": spec["pretrain"], "world": spec["world"]}


def build_manifest(folder: Path, spec: Mapping[str, Any], backbone: str, cost: Mapping[str, Any],
                   gates: Mapping[str, Any]) -> dict[str, Any]:
    return {"twin": spec["backbones"][backbone]["twin"], "recipe": recipe(spec, backbone),
            "code_sha256": code_hashes(), "libraries": library_versions(),
            "weights_sha256": weight_hashes(folder), "pretraining": dict(cost), "gates": dict(gates),
            "rebuild": f"{REBUILD}  (profile {spec.get('profile', '?')})"}


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


def staleness(folder: str | Path, spec: Mapping[str, Any] | None = None, backbone: str | None = None) -> list[str]:
    """What differs between the release and the code, libraries and (with `spec`) the recipe now;
    empty when it is current."""
    manifest = read_manifest(folder)
    out = []
    then, now = manifest["code_sha256"], code_hashes()
    changed = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
    if changed:
        out.append(f"code changed since the release: {', '.join(changed)}")
    libs_then, libs_now = manifest["libraries"], library_versions()
    libs = [f"{k} {libs_then.get(k)} -> {libs_now.get(k)}" for k in sorted(libs_now)
            if k != "python" and libs_then.get(k) != libs_now.get(k)]
    if libs:
        out.append(f"libraries changed: {'; '.join(libs)}")
    if spec is not None and backbone is not None:
        then_r, now_r = manifest["recipe"], recipe(spec, backbone)
        keys = sorted(k for k in set(then_r) | set(now_r) if then_r.get(k) != now_r.get(k))
        if keys:
            out.append(f"recipe changed since the release: {keys}")
    return out
