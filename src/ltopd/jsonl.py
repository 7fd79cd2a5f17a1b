"""JSON Lines: one reader for every file of records, predictions or sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class JsonlError(ValueError):
    """A line that is not valid JSON; the message names the file and the line."""


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The non-blank lines of `path`, each parsed as JSON."""
    rows = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise JsonlError(f"{path}:{n}: not valid JSON ({e})") from None
    return rows
