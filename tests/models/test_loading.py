"""Saved models (students, pretrained twins, releases) get the user's umask, not mkdtemp's 0700."""
from __future__ import annotations

import os
import stat


def test_a_saved_backbone_is_readable_by_the_group_with_umask_022(tmp_path):
    from ltopd.models.loading import load_backbone, save_backbone
    from ltopd.twins.architectures import twin_backbone
    from ltopd.twins.tokenizer import build_tokenizer

    tok = build_tokenizer(["what colour is the square?", "is there a red circle?"] * 20, 300)
    old = os.umask(0o022)
    try:
        save_backbone(twin_backbone("qwen35-tiny", tok, seed=0), tmp_path / "students" / "s0")
        save_backbone(twin_backbone("qwen35-tiny", tok, seed=1), tmp_path / "students" / "s0")  # replaces it
    finally:
        os.umask(old)
    folder = tmp_path / "students" / "s0"
    assert stat.filemode(folder.stat().st_mode) == "drwxr-xr-x"
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".safetensors" for p in files)
    assert {stat.filemode(p.stat().st_mode) for p in files} == {"-rw-r--r--"}
    assert [p.name for p in (tmp_path / "students").iterdir()] == ["s0"]  # no staging folder left
    load_backbone(folder)
