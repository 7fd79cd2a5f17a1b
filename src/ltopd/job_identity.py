"""Who wrote a resumable state: the job's resolved settings, its input files' content and its code.

A training or pretraining job resumes from the newest state in its folder. Resuming a state that
another job wrote (other settings, another LT-14K or start checkpoint, other code) would silently
continue that job's run and report its model as this one's. So every state folder carries
``identity.json``, and a job claims its folder before resuming: a folder of another identity is
set aside (renamed ``<folder>.set-aside``, replacing an older one), with one line that names what
differs, and the job starts anew.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ltopd import codegraph
from ltopd.atomic import write_json

IDENTITY_FILE = "identity.json"
SET_ASIDE = ".set-aside"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_files(folder: Path) -> list[Path]:
    """A folder's files in a fixed order, hidden files and folders left out (temp files of atomic
    writers, seals, caches): what its content hash covers."""
    return sorted(p for p in folder.rglob("*") if p.is_file()
                  and not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(folder).parts))


def folder_hash(folder: Path, file_hash: Callable[[Path], str] = sha256_file) -> str:
    """sha256 over ``content_files(folder)``: each relative name and ``file_hash`` of its bytes."""
    h = hashlib.sha256()
    for f in content_files(folder):
        h.update(f"{f.relative_to(folder).as_posix()}\0{file_hash(f)}\n".encode())
    return h.hexdigest()


def content_hash(path: str | Path) -> str:
    """sha256 of a file, or of a folder's files (``folder_hash``)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    if not path.is_dir():
        raise FileNotFoundError(f"input {path} does not exist")
    return folder_hash(path)


def code_hashes(modules: tuple[str, ...] | list[str]) -> dict[str, str]:
    """sha256 of each source file that importing ``modules`` can run, keyed by its path in the
    package (codegraph: lazy imports and registries included)."""
    root = codegraph.PACKAGE_ROOT
    return {str(p.relative_to(root)): sha256_file(p) for p in codegraph.code_files(modules)}


def identity(settings: Mapping[str, Any], inputs: Mapping[str, str | Path],
             code: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The identity of a job: ``settings`` (JSON-able, as resolved), the content hash of each
    input file or folder, and the hashes of the code ``code``'s modules run."""
    return {"settings": json.loads(json.dumps(settings, sort_keys=True, default=str)),
            "inputs": {k: content_hash(v) for k, v in sorted(inputs.items())},
            "code": code_hashes(code)}


def differences(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between two identities, in words: settings keys (dotted), inputs, code files."""
    out = []
    keys = _changed_keys(then.get("settings"), now.get("settings"))
    if keys:
        out.append(f"settings {', '.join(keys)}")
    inputs = sorted(k for k in set(then.get("inputs", {})) | set(now.get("inputs", {}))
                    if then.get("inputs", {}).get(k) != now.get("inputs", {}).get(k))
    if inputs:
        out.append(f"input {', '.join(inputs)}")
    code = sorted(k for k in set(then.get("code", {})) | set(now.get("code", {}))
                  if then.get("code", {}).get(k) != now.get("code", {}).get(k))
    if code:
        shown = ", ".join(code[:4]) + (f" and {len(code) - 4} more" if len(code) > 4 else "")
        out.append(f"code {shown}")
    return out


def _changed_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [k for key in sorted(set(a) | set(b)) for k in _changed_keys(a.get(key), b.get(key), f"{prefix}{key}.")]
    return [prefix.rstrip(".") or "(all)"] if a != b else []


def claim(state_dir: str | Path, ident: Mapping[str, Any]) -> bool:
    """Make ``state_dir`` this job's: True when it holds states of this identity (resume them);
    a folder written by another job (or by one that recorded none) is set aside with one line on
    stderr, and an empty folder is started with this identity. False: start from scratch."""
    state_dir = Path(state_dir)
    record = state_dir / IDENTITY_FILE
    held = state_dir.is_dir() and any(p.name != IDENTITY_FILE for p in state_dir.iterdir())
    if held:
        then = json.loads(record.read_text()) if record.is_file() else None
        if then == json.loads(json.dumps(ident)):
            return True
        why = "it records no job identity" if then is None else "saved by another job: " + \
            "; ".join(differences(then, ident) or ["its identity differs"])
        aside = state_dir.with_name(state_dir.name + SET_ASIDE)
        if aside.exists():
            shutil.rmtree(aside)
        state_dir.rename(aside)
        print(f"not resuming {state_dir} ({why}); set aside as {aside.name}, starting anew", file=sys.stderr)
    state_dir.mkdir(parents=True, exist_ok=True)
    write_json(record, ident)
    return False
