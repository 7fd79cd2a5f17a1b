"""A student trained elsewhere, checked against the backbone it claims to be a student of.

A profile's ``external_students`` entry names a local Hugging Face folder and its backbone;
before any job, :func:`check_student` reads the folder's files (no weights are loaded) and
raises one line for the first problem: the wrong architecture for the backbone's family,
weights the architecture needs that no file holds, or a vocabulary or processor other than the
backbone's (another tokenizer gives the same question other token ids; another image processor
gives the same image other visual tokens, so no row of the table would compare like with like).
:func:`folder_sha256` is the folder's content hash, the evaluation's input and its logged model's
digest: one changed byte of a weight file is another student.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# A profile's backbone ``family`` -> the config.json model_type its checkpoints carry (the
# registry ltopd.models.backbone.BACKBONE_FAMILIES is keyed by model_type).
FAMILY_MODEL_TYPES: dict[str, str] = {"qwen35": "qwen3_5", "glm46v": "glm46v", "llava_ov": "llava_onevision"}

# Files whose content decides how a question and an image become token ids (tokenizer.json is
# compared by its vocabulary, the others whole).
PROCESSOR_FILES = ("preprocessor_config.json", "ltopd_processor.json")


class ExternalError(ValueError):
    """A folder that cannot stand for a student of its backbone; the message is one line."""


def check_student(folder: str | Path, family: str, reference: str | Path | None = None) -> None:
    """Raise ExternalError (one line, naming the folder) unless ``folder`` is a Hugging Face model
    of ``family`` whose weight files hold every tensor its architecture needs, with the tokenizer
    and processor of ``reference`` (the backbone's own folder; None or absent: the folder's own
    consistency is checked instead: every special token of the prompt in its vocabulary)."""
    folder = Path(folder)
    config = _config(folder)
    _check_architecture(folder, config, family)
    _check_weights(folder, config)
    ref = Path(reference) if reference is not None else None
    ref = ref if ref is not None and (ref / "tokenizer.json").is_file() else None
    _check_vocabulary(folder, config, ref)
    _check_processor(folder, ref)


def _config(folder: Path) -> dict[str, Any]:
    if not folder.is_dir():
        raise ExternalError(f"{folder}: no such folder")
    try:
        return json.loads((folder / "config.json").read_text())
    except FileNotFoundError:
        raise ExternalError(f"{folder}: missing config.json (a Hugging Face folder: save_pretrained)") from None
    except ValueError as e:
        raise ExternalError(f"{folder}/config.json: not JSON ({e})") from None


def _check_architecture(folder: Path, config: dict[str, Any], family: str) -> None:
    from ltopd.models.backbone import family_ops

    expected = FAMILY_MODEL_TYPES[family]
    cls = family_ops(expected).model_class.__name__
    found, archs = config.get("model_type"), config.get("architectures") or [cls]
    if found != expected or cls not in archs:
        raise ExternalError(f"{folder}: wrong architecture: model_type {found!r}, architectures {archs}; its "
                            f"backbone's family {family!r} needs model_type {expected!r} and {cls}")


def weight_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor name -> shape the folder's safetensors files hold (their headers only)."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        if absent := [f for f in files if not (folder / f).is_file()]:
            raise ExternalError(f"{folder}: missing weights: {len(absent)} shard(s) its index names are absent "
                                f"(first: {absent[0]})")
    else:
        files = sorted(p.name for p in folder.glob("*.safetensors"))
    if not files:
        raise ExternalError(f"{folder}: missing weights: no *.safetensors file")
    shapes: dict[str, tuple[int, ...]] = {}
    for name in files:
        with safe_open(str(folder / name), framework="numpy") as fh:
            shapes.update({k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()})
    return shapes


def _check_weights(folder: Path, config: dict[str, Any]) -> None:
    """Every tensor the architecture of config.json needs (built on the meta device: no memory,
    no weights read; tied weights excepted) is in the files, with its shape."""
    import torch

    from ltopd.models.backbone import family_ops

    ops = family_ops(config["model_type"])
    hf_config = ops.config_class.from_pretrained(folder, local_files_only=True)
    with torch.device("meta"):
        model = ops.model_class(hf_config)
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    needed = {k: tuple(v.shape) for k, v in model.state_dict().items() if k not in tied}
    held = weight_shapes(folder)
    if missing := sorted(set(needed) - set(held)):
        raise ExternalError(f"{folder}: missing weights: {len(missing)} of the {len(needed)} tensors its "
                            f"{type(model).__name__} needs are in no weight file (first: {missing[0]})")
    if wrong := sorted(k for k in needed if held[k] != needed[k]):
        raise ExternalError(f"{folder}: missing weights: {len(wrong)} tensors have another shape than its config.json "
                            f"gives (first: {wrong[0]} {list(held[wrong[0]])}, expected {list(needed[wrong[0]])})")


def _vocabulary(folder: Path) -> dict[str, int]:
    """token -> id of the folder's tokenizer.json (its model's vocabulary and its added tokens)."""
    try:
        data = json.loads((folder / "tokenizer.json").read_text())
    except FileNotFoundError:
        raise ExternalError(f"{folder}: vocabulary mismatch: no tokenizer.json") from None
    vocab = dict(data.get("model", {}).get("vocab") or {})
    vocab.update({t["content"]: t["id"] for t in data.get("added_tokens") or []})
    return vocab


def _check_vocabulary(folder: Path, config: dict[str, Any], reference: Path | None) -> None:
    vocab = _vocabulary(folder)
    text = config.get("text_config") or config
    if vocab and max(vocab.values()) >= int(text.get("vocab_size", 0)):
        raise ExternalError(f"{folder}: vocabulary mismatch: token id {max(vocab.values())} of tokenizer.json is "
                            f"beyond the embedding's {text.get('vocab_size')} rows (config.json)")
    if reference is None:
        return
    ref = _vocabulary(reference)
    if vocab != ref:
        differ = sorted(set(vocab.items()) ^ set(ref.items()))
        raise ExternalError(f"{folder}: vocabulary mismatch: its tokenizer ({len(vocab)} tokens) is not its backbone's "
                            f"({reference}, {len(ref)} tokens; first difference: {differ[0][0]!r})")


def _check_processor(folder: Path, reference: Path | None) -> None:
    for name in PROCESSOR_FILES:
        if not (folder / name).is_file():
            raise ExternalError(f"{folder}: processor mismatch: no {name} (the pipeline's processor: save it with "
                                "ltopd.models.loading.save_backbone, or copy the backbone's)")
        if reference is None or not (reference / name).is_file():
            continue
        mine, theirs = (json.loads((f / name).read_text()) for f in (folder, reference))
        if mine != theirs:
            keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            raise ExternalError(f"{folder}: processor mismatch: {name} differs from its backbone's ({reference}) "
                                f"in {keys}")


def folder_sha256(folder: str | Path, cache: str | Path | None = None) -> str:
    """sha256 over the folder's files (relative names and contents; hidden files left out, as
    ltopd.job_identity.content_hash). With ``cache`` (a JSON file), a file whose path, size,
    mtime and inode are unchanged is not read again: a checkpoint of several GB is hashed once,
    not at every Snakemake parse."""
    from ltopd.job_identity import folder_hash, sha256_file

    folder = Path(folder).resolve()
    known: dict[str, str] = {}
    if cache is not None:
        try:
            known = json.loads(Path(cache).read_text())
        except (OSError, ValueError):
            known = {}
    seen: dict[str, str] = {}

    def cached(f: Path) -> str:
        st = f.stat()
        key = f"{f}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
        seen[key] = known.get(key) or sha256_file(f)
        return seen[key]

    digest = folder_hash(folder, cached)
    if cache is not None and any(k not in known for k in seen):
        from ltopd.atomic import write_json

        others = {k: v for k, v in known.items() if not k.startswith(f"{folder}/")}  # this folder's stale ones go
        try:
            write_json(cache, {**others, **seen})  # a concurrent writer may drop an entry: hashed again later
        except OSError:
            pass  # an unwritable cache: the next parse hashes again
    return digest

