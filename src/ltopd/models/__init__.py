"""Backbones: adapters over the three families, processor, loading, and the visual-token reduction hook.

The names below load their module on first use (PEP 562): importing a light submodule such as
`ltopd.models.manifest` (the Snakefile's release checks) then costs no torch or transformers import.
"""

import importlib
from typing import Any

_HOMES = {
    "ltopd.models.backbone": ("BACKBONE_FAMILIES", "Backbone", "EncodedBatch", "family_ops"),
    "ltopd.models.hook": ("PrunedSequence", "Selection", "check_ratio", "choose", "prune_sequence"),
    "ltopd.models.loading": ("load_backbone", "save_backbone"),
    "ltopd.models.processor": ("ImageSpan", "ImageTextProcessor", "TileProcessor", "build_image_processor"),
    "ltopd.models.prompt": ("build_messages", "build_target", "extract_answer", "render_prompt", "user_text"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME_OF[name]), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
