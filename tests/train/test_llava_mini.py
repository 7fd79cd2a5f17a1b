"""LLaVA-Mini on the reduction hook: the student is unchanged at init (zero gates), compression
is the written-out cross-attention, pre-fusion touches prompt text only (never image slots,
padding, response or generated tokens), and a trained student round-trips through save/load."""
from __future__ import annotations

import pytest
import torch
from test_trainer import CFG, backbone, records, tok  # noqa: F401  (fixtures)

from ltopd.models.llava_mini import LlavaMini, LlavaMiniConfig, adapter_of, attach
from ltopd.models.loading import load_backbone, save_backbone
from ltopd.train.families import make_trainer
from ltopd.train.methods import method_spec


def _open_gates(mini: LlavaMini) -> None:
    with torch.no_grad():
        mini.compress_gate.fill_(5.0)  # tanh ~ 1
        mini.fusion_gate.fill_(5.0)


def test_zero_gates_leave_the_pruned_student_unchanged(tok, records) -> None:
    plain, mini = backbone(tok), backbone(tok)
    attach(mini.model, LlavaMiniConfig())
    batch = plain.encode(records, ["red</answer>"] * len(records))
    sel = plain.select(batch, 0.25, "cdpruner", 1, 0)
    with torch.no_grad():
        torch.testing.assert_close(mini.forward(batch, sel)[0].logits, plain.forward(batch, sel)[0].logits)
        _open_gates(adapter_of(mini.model))
        assert not torch.allclose(mini.forward(batch, sel)[0].logits, plain.forward(batch, sel)[0].logits)


def test_compression_is_the_written_out_cross_attention() -> None:
    torch.manual_seed(0)
    mini = LlavaMini(8, LlavaMiniConfig(heads=2))
    _open_gates(mini)
    feats, kept = torch.randn(6, 8), torch.tensor([1, 4])
    (got,) = mini.compress([feats], [kept])
    g = torch.tanh(torch.tensor(5.0))
    for j, i in enumerate(kept.tolist()):
        q = mini.q_proj.weight @ (feats[i] + mini.query)
        w = torch.softmax(torch.stack([q @ (mini.k_proj.weight @ f) for f in feats]) / 8 ** 0.5, 0)
        want = feats[i] + g * (sum(wi * f for wi, f in zip(w, feats)) - feats[i])
        torch.testing.assert_close(got[j], want, atol=1e-5, rtol=1e-4)


def test_prefusion_touches_prompt_text_only(tok, records) -> None:
    bb = backbone(tok)
    mini = attach(bb.model, LlavaMiniConfig())
    _open_gates(mini)
    batch = bb.encode(records[:2], ["red</answer>", "a blue one</answer>"])
    ids = batch.inputs["input_ids"]
    emb = bb.model.get_input_embeddings()
    plain = emb.weight[ids]
    visual = [torch.randn(5, mini.hidden), torch.randn(3, mini.hidden)]
    skip = [bb.ops.image_token_id(bb.model), bb.ops.pad_token_id(bb.model)]
    responses = batch.response_mask.sum(1).tolist()
    with torch.no_grad(), mini.fusing(visual, responses, skip):
        fused = emb(ids)
    changed = (fused - plain).abs().amax(-1) > 0
    prompt_text = ~torch.isin(ids, torch.tensor(skip)) & ~batch.response_mask
    assert torch.equal(changed, prompt_text)
    with torch.no_grad():
        assert torch.equal(emb(ids), plain)  # one-shot: the next call (a decode step) is not fused
        with mini.fusing(visual, [0, 0], skip):
            emb(ids[:, :1])  # the armed call is consumed even when it is a single column
        # each row's fused text depends on its own visual tokens only
        other = [visual[0], torch.randn(3, mini.hidden)]
        with mini.fusing(other, responses, skip):
            again = emb(ids)
    assert torch.equal(again[0], fused[0]) and not torch.equal(again[1], fused[1])


def test_trained_student_saves_loads_and_generates_the_same(tok, records, tmp_path) -> None:
    t = make_trainer(backbone(tok), method_spec("llava_mini"), CFG, total_steps=2)
    logs = t.fit([records[:2], records[2:]])
    assert all(log.metrics["lr_llava_mini"] > 0 for log in logs)
    mini = adapter_of(t.student.model)
    assert float(mini.fusion_gate.detach()) != 0.0 and float(mini.compress_gate.detach()) != 0.0  # it trained
    save_backbone(t.student, tmp_path / "student")
    assert (tmp_path / "student" / "llava_mini.safetensors").is_file()
    again = load_backbone(tmp_path / "student")
    assert adapter_of(again.model) is not None
    t.student.model.eval()
    batch = again.encode(records)
    sel = again.select(batch, 0.25, "cdpruner", 1, 0)
    with torch.no_grad():
        torch.testing.assert_close(again.forward(batch, sel)[0].logits, t.student.forward(batch, sel)[0].logits)
        assert torch.equal(again.generate(batch, sel, max_new_tokens=4),
                           t.student.generate(batch, sel, max_new_tokens=4))


def test_config_rejects_unknown_keys_and_bad_heads() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        LlavaMiniConfig.from_section({"layers": 2})
    with pytest.raises(ValueError, match="must divide"):
        LlavaMini(10, LlavaMiniConfig(heads=4))
