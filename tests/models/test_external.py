"""An external student's folder checked against its backbone (ltopd.models.external): each kind
of mismatch is refused with one line naming it; a folder the pipeline saved passes; its content
hash tells one changed byte."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ltopd.models.external import ExternalError, check_student, folder_sha256

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "releases" / "qwen35-tiny"


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    """A tiny student folder as the pipeline writes one (save_backbone of the released twin)."""
    from ltopd.models.loading import load_backbone, save_backbone

    return save_backbone(load_backbone(RELEASE), tmp_path_factory.mktemp("ext") / "student")


def _copy(student: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(student, tmp_path / "copy"))


def _refusal(folder: Path, family: str = "qwen35", reference: Path | None = RELEASE) -> str:
    with pytest.raises(ExternalError) as err:
        check_student(folder, family, reference)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(folder))
    return message


def test_a_saved_student_of_the_backbone_passes(student):
    check_student(student, "qwen35", RELEASE)
    check_student(student, "qwen35", None)  # the backbone not built yet: its own consistency only


def test_another_family_is_the_wrong_architecture(tmp_path):
    glm = Path(shutil.copytree(ROOT / "releases" / "glm46v-tiny", tmp_path / "glm"))
    assert "wrong architecture: model_type 'glm46v'" in _refusal(glm)
    assert "needs model_type 'qwen3_5'" in _refusal(glm)


def test_no_weight_file_or_a_missing_tensor_is_missing_weights(student, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = _copy(student, tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    gone = sorted(tensors)[5]
    save_file({k: v for k, v in tensors.items() if k != gone}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    assert f"missing weights: 1 of the {len(tensors)} tensors" in _refusal(folder) and gone in _refusal(folder)
    (folder / "model.safetensors").unlink()
    assert "missing weights: no *.safetensors file" in _refusal(folder)


def test_a_tensor_of_another_shape_is_refused(student, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = _copy(student, tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    name = next(k for k, v in sorted(tensors.items()) if v.dim() == 2)
    tensors[name] = tensors[name][:-1]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    assert "have another shape" in _refusal(folder) and name in _refusal(folder)


def test_another_vocabulary_is_refused(student, tmp_path):
    folder = _copy(student, tmp_path)
    data = json.loads((folder / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[200:202]  # two ordinary tokens swap ids: same size, other ids
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (folder / "tokenizer.json").write_text(json.dumps(data))
    assert "vocabulary mismatch: its tokenizer (" in _refusal(folder)
    check_student(folder, "qwen35", None)  # alone it is consistent: only the backbone tells


def test_a_token_beyond_the_embedding_is_refused_without_the_backbone(student, tmp_path):
    folder = _copy(student, tmp_path)
    data = json.loads((folder / "tokenizer.json").read_text())
    data["added_tokens"].append({**data["added_tokens"][-1], "id": 10**6, "content": "<|extra|>"})
    (folder / "tokenizer.json").write_text(json.dumps(data))
    assert "vocabulary mismatch: token id 1000000" in _refusal(folder, reference=None)


def test_another_processor_is_refused(student, tmp_path):
    folder = _copy(student, tmp_path)
    pre = json.loads((folder / "preprocessor_config.json").read_text())
    (folder / "preprocessor_config.json").write_text(json.dumps({**pre, "patch_size": 14}))
    assert "processor mismatch: preprocessor_config.json differs from its backbone's" in _refusal(folder)
    (folder / "ltopd_processor.json").unlink()
    assert "processor mismatch: no ltopd_processor.json" in _refusal(folder, reference=None)


def test_the_content_hash_tells_one_changed_byte_and_its_cache_follows(student, tmp_path):
    from ltopd.job_identity import content_hash

    folder, cache = _copy(student, tmp_path), tmp_path / "cache.json"
    before = folder_sha256(folder, cache)
    assert before == content_hash(folder)  # the same hash as a resumable state's inputs
    assert folder_sha256(folder, cache) == before and json.loads(cache.read_text())  # read from the cache
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one byte of the last tensor: same size, same names
    weights.write_bytes(bytes(data))
    after = folder_sha256(folder, cache)
    assert after != before and after == content_hash(folder)
