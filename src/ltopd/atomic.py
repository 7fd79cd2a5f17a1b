"""Write outputs so a killed job never leaves a half-written file or folder behind, with the
permissions a plain `open()` / `mkdir()` would give them (the user's umask), not tempfile's
owner-only 0600 / 0700: colleagues on a shared cluster and an `mlflow server` under another user
read them."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class DiskFull(OSError):
    """No space left while writing an output: nothing was left at its path (the temporary file or
    folder is removed); the message names the path and what to do."""

    one_line = True  # ltopd.cli prints it as it is

    def __init__(self, dest: str | Path) -> None:
        super().__init__(errno.ENOSPC, "no space left on device", str(dest))

    def __str__(self) -> str:
        return (f"no space left on device writing {self.filename} (nothing was left there); free space on "
                f"{Path(self.filename).parent} and rerun the same command")


def disk_full(e: BaseException) -> bool:
    """Whether `e` says the disk (or the quota) is full: an OSError's errno, or the messages of
    libraries that wrap it (torch.save: "file write failed"; SQLite: "database or disk is full")."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(e).lower()
    return "no space left" in text or "file write failed" in text or "disk is full" in text


def _raise_disk_full(e: BaseException, dest: Path) -> None:
    if disk_full(e) and not isinstance(e, DiskFull):
        raise DiskFull(dest) from e


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc/self/status),
    else by setting and restoring it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def honour_umask(path: str | Path) -> None:
    """Give `path`, and a folder's contents, the modes `open()` / `mkdir()` would have given them
    (0666 / 0777 less the umask): what an output staged with tempfile.mkstemp / mkdtemp (0600 /
    0700) needs before its rename, and a folder that libraries wrote into (safetensors writes
    its files 0600). Symbolic links are left alone."""
    mask = current_umask()
    path = Path(path)
    todo = [path, *path.rglob("*")] if path.is_dir() and not path.is_symlink() else [path]
    for p in todo:
        if not p.is_symlink():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


@contextlib.contextmanager
def atomic_dir(dest: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces `dest` (an old `dest` is moved
    aside first and removed after, so a reader never finds `dest` missing), on error it is removed."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        yield tmp
        honour_umask(tmp)  # the folder and what libraries wrote in it (safetensors: 0600)
        if dest.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            dest.rename(retired / dest.name)
            os.replace(tmp, dest)
            shutil.rmtree(retired)
        else:
            os.replace(tmp, dest)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        _raise_disk_full(e, dest)
        raise


@contextlib.contextmanager
def atomic_file(dest: str | Path, mode: str = "w") -> Iterator[Any]:
    """Open a temporary sibling file for writing; rename it onto `dest` when the block succeeds."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.tmp-", dir=dest.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            honour_umask(tmp)
            yield fh
        os.replace(tmp, dest)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        _raise_disk_full(e, dest)
        raise


def write_json(dest: str | Path, obj: Any) -> None:
    with atomic_file(dest) as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")
