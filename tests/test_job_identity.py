"""A resumable state is resumed only by the job that wrote it: its identity (settings, inputs'
content, code) and what claiming a folder does with another job's state."""
from __future__ import annotations

import hashlib
import json

import pytest

from ltopd.job_identity import IDENTITY_FILE, SET_ASIDE, claim, content_hash, differences, identity


def test_content_hash_of_a_folder_by_hand(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.txt").write_bytes(b"one")
    (tmp_path / "d" / "sub" / "b.bin").write_bytes(b"two")
    (tmp_path / "d" / ".a.txt.tmp-x").write_bytes(b"half-written")  # an atomic writer's temp: not content
    sha = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
    expected = sha(f"a.txt\0{sha(b'one')}\nsub/b.bin\0{sha(b'two')}\n".encode())
    assert content_hash(tmp_path / "d") == expected
    assert content_hash(tmp_path / "d" / "a.txt") == sha(b"one")
    with pytest.raises(FileNotFoundError, match="missing"):
        content_hash(tmp_path / "missing")


def _ident(tmp_path, lr=1e-4, data=b"lt14k"):
    (tmp_path / "data.bin").write_bytes(data)
    return identity({"training": {"lr": {"lm": lr}, "steps": 2}, "seed": 0}, {"lt14k": tmp_path / "data.bin"},
                    code=("ltopd.job_identity",))


def test_identity_names_what_differs(tmp_path):
    base = _ident(tmp_path)
    assert set(base["code"]) == {"__init__.py", "job_identity.py", "codegraph.py", "atomic.py"}
    assert differences(base, base) == []
    assert differences(base, _ident(tmp_path, lr=5e-3)) == ["settings training.lr.lm"]
    assert differences(base, _ident(tmp_path, data=b"other")) == ["input lt14k"]
    edited = json.loads(json.dumps(base))
    edited["code"]["codegraph.py"] = "0" * 64
    assert differences(base, edited) == ["code codegraph.py"]


def test_claim_resumes_the_same_job_and_sets_another_aside(tmp_path, capsys):
    state = tmp_path / "state"
    mine = _ident(tmp_path)
    assert claim(state, mine) is False  # nothing to resume
    assert json.loads((state / IDENTITY_FILE).read_text()) == mine
    assert claim(state, mine) is False  # an identity alone is no state
    (state / "step-000001").mkdir()
    assert claim(state, mine) is True  # same job: resume
    assert (state / "step-000001").is_dir()

    other = _ident(tmp_path, lr=5e-3)
    assert claim(state, other) is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "settings training.lr.lm" in err and "set aside" in err
    assert not (state / "step-000001").exists()
    assert (tmp_path / f"state{SET_ASIDE}" / "step-000001").is_dir()
    assert json.loads((state / IDENTITY_FILE).read_text()) == other


def test_a_state_without_identity_is_not_resumed(tmp_path, capsys):
    state = tmp_path / "state"
    (state / "step-000002").mkdir(parents=True)  # written before states carried an identity
    assert claim(state, _ident(tmp_path)) is False
    assert "records no job identity" in capsys.readouterr().err
    assert [p.name for p in state.iterdir()] == [IDENTITY_FILE]
