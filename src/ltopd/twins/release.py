"""Released twins: a pretrained tiny twin frozen in a folder with a manifest, as the paper's
released checkpoints are.

A release folder holds what `save_backbone` writes (config, safetensors weights, tokenizer and
processor files) plus ``manifest.json`` (its format: ltopd.models.manifest): the recipe that
built it (the profile's pretrain and world sections and the backbone entry), sha256 hashes of
the source files that determine the weights, the library versions, the weights' sha256, the
pretraining cost and the gate results. `staleness` names what changed since the release was
built (code, recipe, libraries), which the pipeline reports as a warning with the command that
rebuilds it.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from ltopd import job_identity
from ltopd.models.manifest import REBUILD, read_manifest, weight_hashes

# The modules that build a release (its tokenizer, then its weights, gates and manifest): the
# release's code is every source file they can run (ltopd.codegraph), computed, not listed.
RELEASE_MODULES = ("ltopd.twins.corpus", "ltopd.twins.tokenizer", "ltopd.twins.build")
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "pillow")


def code_hashes() -> dict[str, str]:
    """sha256 of every source file a release build runs, keyed by its path under the package."""
    return job_identity.code_hashes(RELEASE_MODULES)


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = "absent"
    return out


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


# Why a release is stale, each reason's key (the one-line summary's words) and its detail.
REASONS = {"code": "code changed", "unrecorded": "code not recorded", "dropped": "code no longer run",
           "libraries": "libraries changed", "recipe": "recipe changed"}


def stale_reasons(folder: str | Path, spec: Mapping[str, Any] | None = None,
                  backbone: str | None = None) -> list[tuple[str, str]]:
    """(reason, detail) for each way the release differs from the code, libraries and (with
    `spec`) the recipe now, the reason a key of REASONS; empty when it is current."""
    manifest = read_manifest(folder)
    out = []
    then, now = manifest["code_sha256"], code_hashes()
    changed = sorted(k for k in set(then) & set(now) if then[k] != now[k])
    if changed:
        out.append(("code", f"code changed since the release: {', '.join(changed)}"))
    unrecorded, dropped = sorted(set(now) - set(then)), sorted(set(then) - set(now))
    # A file moved with its content unchanged is the same code: not a reason to rebuild.
    moved = {old: new for old in dropped for new in unrecorded if then[old] == now[new]}
    unrecorded = [k for k in unrecorded if k not in moved.values()]
    dropped = [k for k in dropped if k not in moved]
    if unrecorded:
        out.append(("unrecorded", f"code the build now runs that the release does not record ({len(unrecorded)} "
                    f"files: {', '.join(unrecorded[:3])}{', ...' if len(unrecorded) > 3 else ''})"))
    if dropped:
        out.append(("dropped", f"code the release records that the build no longer runs: {', '.join(dropped)}"))
    libs_then, libs_now = manifest["libraries"], library_versions()
    libs = [f"{k} {libs_then.get(k)} -> {libs_now.get(k)}" for k in sorted(libs_now)
            if k != "python" and libs_then.get(k) != libs_now.get(k)]
    if libs:
        out.append(("libraries", f"libraries changed: {'; '.join(libs)}"))
    if spec is not None and backbone is not None:
        then_r, now_r = manifest["recipe"], recipe(spec, backbone)
        keys = sorted(k for k in set(then_r) | set(now_r) if then_r.get(k) != now_r.get(k))
        if keys:
            out.append(("recipe", f"recipe changed since the release: {keys}"))
    return out


def staleness(folder: str | Path, spec: Mapping[str, Any] | None = None, backbone: str | None = None) -> list[str]:
    """What differs between the release and the code, libraries and (with `spec`) the recipe now;
    empty when it is current."""
    return [detail for _, detail in stale_reasons(folder, spec, backbone)]


def stale_summary(reasons: Mapping[str, list[tuple[str, str]]], details: str | None = None) -> str | None:
    """One line for every stale release of a run (``reasons``: release -> stale_reasons), releases
    grouped by the same reasons; None when none is stale. ``details``: where the full list is."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, found in reasons.items():
        if found:
            groups.setdefault(tuple(dict.fromkeys(r for r, _ in found)), []).append(name)
    if not groups:
        return None
    parts = [f"{', '.join(names)} ({', '.join(REASONS[r] for r in why)})" for why, names in groups.items()]
    count = sum(len(v) for v in groups.values())
    return (f"WARNING: {count} released twin{'s' * (count > 1)} differ{'s' * (count == 1)} from what would build "
            f"{'them' if count > 1 else 'it'} now: {'; '.join(parts)}. Weights and gates are the releases'"
            + (f"; details: {details}" if details else "") + f"; rebuild: `{REBUILD} --forcerun release_twin`")
