"""Write outputs so a killed job never leaves a half-written file or folder behind."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_dir(dest: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces `dest`, on error it is removed."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        yield tmp
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def atomic_file(dest: str | Path, mode: str = "w") -> Iterator[Any]:
    """Open a temporary sibling file for writing; rename it onto `dest` when the block succeeds."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.tmp-", dir=dest.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(dest: str | Path, obj: Any) -> None:
    with atomic_file(dest) as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")
