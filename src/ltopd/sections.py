"""A profile section as a config dataclass, with unknown keys named (a leaf module: library
packages use it without importing ltopd.config and its profile machinery)."""
from __future__ import annotations

from typing import Any


def from_section(cls: type, name: str, section: dict[str, Any] | None, **converted: Any) -> Any:
    """Dataclass ``cls`` from a profile's ``name`` section (None: the defaults); unknown keys are
    named with the allowed ones. ``converted`` overrides values after the check (e.g. tuples)."""
    import dataclasses

    s = dict(section or {})
    allowed = sorted(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(s) - set(allowed))
    if unknown:
        raise ValueError(f"{name}: unknown key(s) {unknown}; allowed: {allowed}")
    return cls(**{**s, **{k: v for k, v in converted.items() if k in s}})
