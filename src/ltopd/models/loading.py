"""Load and save backbones from local directories only (config.json + weights + processor files)."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import PreTrainedTokenizerFast

from ltopd import integrity
from ltopd.atomic import atomic_dir
from ltopd.models import addons, fast_paths
from ltopd.models.backbone import Backbone, family_ops
from ltopd.models.processor import ImageTextProcessor


def load_backbone(path: str | Path) -> Backbone:
    """Backbone from a saved directory, offline; clear errors for missing or unsupported checkpoints.
    A released twin (a folder with a manifest) is loaded only if its weights match the manifest."""
    from ltopd.models.manifest import MANIFEST, verify_weights

    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(f"backbone directory {directory} does not exist")
    if (directory / MANIFEST).is_file():
        verify_weights(directory)  # ReleaseError naming the file: a corrupted or edited release
    integrity.check(directory)  # a sealed folder (a trained student): Corrupt naming a cut-short file
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{directory} has no config.json: not a saved model")
    model_type = json.loads(config_file.read_text()).get("model_type")
    ops = family_ops(model_type)  # ValueError naming the value and the supported ones
    config = ops.config_class.from_pretrained(directory, local_files_only=True)
    architectures = config.architectures or [ops.model_class.__name__]
    if ops.model_class.__name__ not in architectures:
        raise ValueError(
            f"architecture {architectures} is not supported for model_type {model_type!r}; "
            f"supported: {ops.model_class.__name__}"
        )
    model = ops.model_class.from_pretrained(directory, config=config, local_files_only=True).eval()
    fast_paths.install(model)  # same weights: patch convolutions as a matmul, the DeltaNet CPU kernels
    addons.load_into(model, directory)  # a trained student with a module of its own carries it
    return Backbone(model=model, processor=ImageTextProcessor.from_pretrained(directory))


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """The tokenizer a twin was trained with: its tokenizer.json as saved. (AutoTokenizer on a folder
    that also holds a config.json takes the model type's class instead, e.g. Qwen3_5Tokenizer, whose
    own pre-tokenizer splits numbers into digits: "25" becomes two tokens the twin never saw.)"""
    return PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)


def save_backbone(backbone: Backbone, path: str | Path) -> Path:
    """Write model and processor into a temp dir beside `path`, then rename it into place."""
    with atomic_dir(path) as staging:
        with addons.detached(backbone.model):
            backbone.model.save_pretrained(staging)
        addons.save(backbone.model, staging)  # a student module's weights and manifest beside the model's
        backbone.processor.save_pretrained(staging)
    return Path(path)
