"""Content hashes written by the job that makes an intermediate and checked by the job that reads it.

A file or folder cut short (a full disk under another writer, a copy stopped halfway, a bad
block) must never be read as if whole: a truncated predictions.jsonl would be scored on fewer
items and give another table without a word. So the producer seals what it wrote: a file gets a
hidden sidecar `.<name>.sha256` beside it, a folder a hidden `.content.sha256` inside it (hidden:
the digests of `job_identity.content_hash` and `tracking.path_digest` leave them out, so sealing
changes no job's identity), each holding the sha256 and size of every byte written. The consumer
calls `check` before it reads: a mismatch is `Corrupt`, one line that names the file, its size
then and now, and what to do. Files without a seal (written by hand, or before seals) are read as
before. The released twins carry the same check in their manifests (`models.manifest`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltopd.job_identity import content_files, sha256_file

DIR_SEAL = ".content.sha256"
REBUILD = "delete it and rerun the same command (Snakemake rebuilds it)"


class Corrupt(RuntimeError):
    """An intermediate whose bytes are not those its producer sealed: `file`, what is wrong with it
    (`detail`) and what to do (`remedy`), said in one line."""

    one_line = True

    def __init__(self, file: str | Path, detail: str, remedy: str = REBUILD) -> None:
        self.file, self.detail, self.remedy = Path(file), detail, remedy
        super().__init__(f"{file}: {detail}; {remedy}")


def sidecar(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.sha256")


def _fingerprint(f: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(f), "bytes": f.stat().st_size}


def _write(dest: Path, obj: dict[str, Any]) -> None:
    from ltopd.atomic import write_json

    write_json(dest, obj)


def seal_file(path: str | Path) -> None:
    """Record `path`'s sha256 and size beside it."""
    path = Path(path)
    _write(sidecar(path), _fingerprint(path))


def seal_dir(folder: str | Path) -> None:
    """Record each file's sha256 and size in `folder/.content.sha256` (hidden files left out)."""
    folder = Path(folder)
    files = {f.relative_to(folder).as_posix(): _fingerprint(f) for f in content_files(folder)}
    _write(folder / DIR_SEAL, {"files": files})


def _mismatch(f: Path, then: dict[str, Any]) -> str:
    now = f"now {f.stat().st_size} bytes" if f.is_file() else "now missing"
    what = "truncated or corrupted" if f.is_file() else "missing"
    return f"{what} (its producer wrote {then['bytes']} bytes, sha256 {then['sha256'][:12]}; {now})"


def check(path: str | Path) -> bool:
    """Raise `Corrupt` (one line) when `path` (a file or folder) differs from its seal; True when it
    was sealed and matches, False when it carries no seal."""
    path = Path(path)
    if path.is_dir():
        record = path / DIR_SEAL
        if not record.is_file():
            return False
        sealed = json.loads(record.read_text())["files"]
        remedy = f"delete {path} and rerun the same command (Snakemake rebuilds it)"
        for rel, then in sorted(sealed.items()):
            f = path / rel
            if not f.is_file() or f.stat().st_size != then["bytes"] or sha256_file(f) != then["sha256"]:
                raise Corrupt(f, _mismatch(f, then), remedy)
        extra = sorted({f.relative_to(path).as_posix() for f in content_files(path)} - set(sealed))
        if extra:
            raise Corrupt(path / extra[0], "not among the files its producer wrote", remedy)
        return True
    record = sidecar(path)
    if not record.is_file():
        return False
    then = json.loads(record.read_text())
    if not path.is_file() or path.stat().st_size != then["bytes"] or sha256_file(path) != then["sha256"]:
        raise Corrupt(path, _mismatch(path, then))
    return True
