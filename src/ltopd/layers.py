"""Layered profiles: a profile, then override files with a few keys, then `--config` values.

`snakemake --configfile config/default.yaml override.yaml --config seeds=[0]`: a file with a
`profile` key is a whole profile; a file without one is an overlay, deep-merged onto the profile
before it (onto config/default.yaml when no profile file is given); the command line's values
come last. Each key remembers which layer set it, so a validation error names the file or the
command-line key it came from instead of blaming the profile.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PROFILE = "config/default.yaml"
COMMAND_LINE = "--config"

Path_ = tuple[str, ...]


@dataclass
class Origins:
    """Which layer set each key (``setter``: the last one; ``creator``: the first, for a mapping's
    missing keys) and the layers in order."""

    layers: list[str] = field(default_factory=list)
    setter: dict[Path_, str] = field(default_factory=dict)
    creator: dict[Path_, str] = field(default_factory=dict)

    def of(self, path: Sequence[Any], created: bool = False) -> str | None:
        """The layer behind ``path`` (its longest recorded prefix); ``created``: the layer that made
        the mapping at ``path`` (a required key it lacks is that layer's omission)."""
        book = self.creator if created else self.setter
        key = tuple(str(p) for p in path)
        for n in range(len(key), -1, -1):
            if key[:n] in book:
                return book[key[:n]]
        return None

    def label(self, path: Sequence[Any], text: str, created: bool = False) -> str:
        """``text`` (a problem line that starts with its dotted key) prefixed by its layer:
        "--config seeds: ..." or "override.yaml: training.lr: ..."; unprefixed with one layer."""
        if len(self.layers) < 2:
            return text
        layer = self.of(path, created) or self.layers[0]
        return f"{layer} {text}" if layer == COMMAND_LINE else f"{layer}: {text}"

    @property
    def source(self) -> str:
        return " + ".join(self.layers) or "<config>"


def _merge(base: dict[str, Any], layer: Mapping[str, Any], name: str, at: Path_, origins: Origins) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        path = (*at, str(key))
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            origins.setter[path] = name
            out[key] = _merge(out[key], value, name, path, origins)
            continue
        for known in [p for p in origins.setter if p[:len(path)] == path and len(p) > len(path)]:
            del origins.setter[known]  # a value replaced whole: its old parts have no layer now
            origins.creator.pop(known, None)
        out[key] = value
        origins.setter[path] = name
        origins.creator[path] = name
        if isinstance(value, dict):
            _record(value, name, path, origins)
    return out


def merged(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``layer`` merged in, mappings key by key (`--config grid={...}` changes only
    the keys it names), any other value replaced; without origins."""
    return _merge(base, layer, "", (), Origins())


def _record(tree: Mapping[str, Any], name: str, at: Path_, origins: Origins) -> None:
    for key, value in tree.items():
        path = (*at, str(key))
        origins.setter[path] = origins.creator[path] = name
        if isinstance(value, dict):
            _record(value, name, path, origins)


def is_profile(layer: Mapping[str, Any]) -> bool:
    return "profile" in layer


def layered(files: Sequence[tuple[str, dict[str, Any]]], overrides: Mapping[str, Any] | None = None,
            default: tuple[str, dict[str, Any]] | None = None) -> tuple[dict[str, Any], Origins]:
    """(config, origins) from ``files`` (name, content) in command-line order, then ``overrides``
    (the command line's `--config`). The last profile file starts the stack (an earlier one is
    replaced whole, as before); ``default`` (name, content) starts it when no file is a profile.
    An overlay before the last profile would be dropped silently: a ConfigError names it."""
    from ltopd.config import ConfigError

    starts = [i for i, (_, content) in enumerate(files) if is_profile(content)]
    if starts:
        dropped = [name for name, content in files[:starts[-1]] if not is_profile(content)]
        if dropped:
            raise ConfigError(f"{', '.join(dropped)}: an override file (no `profile` key) before the profile "
                              f"{files[starts[-1]][0]} would be replaced by it; give the profile first, then "
                              "the override files")
        stack = list(files[starts[-1]:])
    else:
        if default is None:
            raise ConfigError(f"{', '.join(n for n, _ in files)}: override files without a profile to apply to")
        stack = [default, *files]
    cfg: dict[str, Any] = {}
    origins = Origins()
    for name, content in stack:
        cfg = _merge(cfg, content, name, (), origins)
        origins.layers.append(name)
    if overrides:
        cfg = _merge(cfg, overrides, COMMAND_LINE, (), origins)
        origins.layers.append(COMMAND_LINE)
    return cfg, origins


def load_layers(files: Sequence[str | Path], overrides: Mapping[str, Any] | None = None,
                default: str | Path = DEFAULT_PROFILE) -> tuple[dict[str, Any], Origins]:
    """:func:`layered` over profile files on disk, then validated: every problem line names the
    file or the `--config` key it came from (ltopd.config.validate)."""
    from ltopd.config import read, validate

    contents = [(str(f), read(f)) for f in files]
    base = None if any(is_profile(c) for _, c in contents) else (str(default), read(default))
    cfg, origins = layered(contents, overrides, base)
    return validate(cfg, source=origins.source, origins=origins), origins
