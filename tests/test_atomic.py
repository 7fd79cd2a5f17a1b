"""Atomic writers: outputs get the user's umask (not tempfile's owner-only 0600 / 0700), and a
failed write leaves nothing behind."""
from __future__ import annotations

import contextlib
import os
import stat

import pytest

from ltopd.atomic import atomic_dir, atomic_file, current_umask, honour_umask, write_json


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_outputs_get_the_mode_the_umask_gives(tmp_path, mask):
    with umask(mask):
        assert current_umask() == mask
        with atomic_file(tmp_path / "table.csv") as fh:
            fh.write("a,b\n")
        write_json(tmp_path / "metrics.json", {"x": 1})
        with atomic_file(tmp_path / "figure.png", "wb") as fh:
            fh.write(b"\x89PNG")
        with atomic_dir(tmp_path / "dataset") as tmp:
            (tmp / "part.arrow").write_bytes(b"x")
            write_json(tmp / "manifest.json", {})
            (tmp / "sub").mkdir(mode=0o700)
            (tmp / "sub" / "model.safetensors").write_bytes(b"w")
            os.chmod(tmp / "sub" / "model.safetensors", 0o600)  # as safetensors' save_file writes it
        plain = tmp_path / "plain"
        plain.write_text("")  # what open() gives, the reference
        (tmp_path / "plain_dir").mkdir()
    assert mode(plain) == 0o666 & ~mask and mode(tmp_path / "plain_dir") == 0o777 & ~mask
    for f in ("table.csv", "metrics.json", "figure.png", "dataset/part.arrow", "dataset/manifest.json",
              "dataset/sub/model.safetensors"):
        assert mode(tmp_path / f) == 0o666 & ~mask, f
    assert mode(tmp_path / "dataset") == mode(tmp_path / "dataset" / "sub") == 0o777 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dataset", "figure.png", "metrics.json", "plain", "plain_dir", "table.csv"]  # no temp left


def test_umask_022_gives_group_and_other_read(tmp_path):
    """The issue's check: `ls -l results/` shows -rw-r--r-- and drwxr-xr-x with umask 022."""
    with umask(0o022):
        with atomic_file(tmp_path / "results" / "table2.csv") as fh:
            fh.write("x\n")
        with atomic_dir(tmp_path / "results" / "eval") as tmp:
            (tmp / "metrics.json").write_text("{}")
    assert stat.filemode(os.stat(tmp_path / "results" / "table2.csv").st_mode) == "-rw-r--r--"
    assert stat.filemode(os.stat(tmp_path / "results" / "eval").st_mode) == "drwxr-xr-x"


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_file(tmp_path / "t.csv") as fh:
        fh.write("half")
        raise RuntimeError
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "d") as tmp:
        (tmp / "f").write_text("half")
        raise RuntimeError
    assert list(tmp_path.iterdir()) == []


def test_honour_umask_resets_an_owner_only_path(tmp_path):
    f, d = tmp_path / "f", tmp_path / "d"
    f.write_text("")
    d.mkdir()
    os.chmod(f, 0o600)
    os.chmod(d, 0o700)
    with umask(0o027):
        honour_umask(f)
        honour_umask(d)
    assert (mode(f), mode(d)) == (0o640, 0o750)
