"""One vision pass per model and update (ltopd.train.features): the shared features equal a tower
pass over every row, and an update that shares them equals one that does not, loss and
gradients (the reference: the same trainer with sharing switched off)."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from test_trainer import WORLD, backbone, tok  # noqa: F401  (fixtures)

from ltopd.bench.suites.instruct import instruct_stream
from ltopd.data.sources import world_config
from ltopd.data.world import generate_task_item
from ltopd.train.families import make_trainer
from ltopd.train.features import ImageFeatures, StudentFeatures, repeated
from ltopd.train.methods import method_spec
from ltopd.train.rollout import rollout, visual_token_ids
from ltopd.train.trainer import TrainConfig


@pytest.fixture(scope="module")
def records():
    """Two single-image questions and a multi-image one (a MuirBench twin's instruction item)."""
    cfg = world_config({**WORLD, "min_objects": 1, "max_objects": 3})
    multi = next(instruct_stream(["muirbench"], 7, WORLD, 0))
    assert len(multi["images"]) > 1
    return [generate_task_item("color", 0, 5, cfg), multi, generate_task_item("exists", 1, 5, cfg)]


def count_tower_passes(bb) -> list[int]:
    """Images per vision-tower call of ``bb`` (a forward hook on its get_image_features)."""
    calls: list[int] = []
    inner = bb.model.model
    original = inner.get_image_features

    def counted(pixel_values, grid_thw, *args, **kwargs):
        calls.append(int(grid_thw.shape[0]))
        return original(pixel_values, grid_thw, *args, **kwargs)

    inner.get_image_features = counted
    return calls


def test_rows_equal_a_tower_pass_over_the_repeated_rows(tok, records) -> None:
    bb = backbone(tok)
    with torch.no_grad():
        shared = ImageFeatures.of(bb, records)
        reps = [r for r in records for _ in range(3)]
        direct = bb.image_features(bb.encode(reps))
    got = shared.rows(repeated(len(records), 3))
    assert len(got) == len(direct) == 3 * sum(len(r["images"]) for r in records)
    for a, b in zip(got, direct):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert shared.subset([2, 0]).per_record == (shared.per_record[2], shared.per_record[0])


def test_student_features_backward_equals_backprop_through_every_row(tok, records) -> None:
    """Two microbatches read the detached leaves; one backward through the tower afterwards gives
    the gradient of backpropagating each microbatch's loss through the tower itself."""
    weights = [torch.randn(1) for _ in range(2)]

    def grads(share: bool) -> dict[str, torch.Tensor]:
        bb = backbone(tok)
        student = StudentFeatures.of(bb, records) if share else None
        for w, rows in zip(weights, ([0, 0, 1], [2, 1])):
            feats = (student.leaves.rows(rows) if share
                     else bb.image_features(bb.encode([records[i] for i in rows])))
            (w * sum((f ** 2).sum() for f in feats)).backward()
        if share:
            student.backward()
        return {n: p.grad.clone() for n, p in bb.model.named_parameters() if p.grad is not None}

    shared, direct = grads(True), grads(False)
    assert shared.keys() == direct.keys() and any("visual" in n for n in shared)
    for name in shared:
        torch.testing.assert_close(shared[name], direct[name], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("method", ["ltopd", "kd_fixed_prefix"])
def test_an_update_shares_one_pass_per_model_and_equals_the_unshared_update(tok, records, method) -> None:
    cfg = TrainConfig(budget=0.25, selector="cdpruner", floor=1, rollouts=3, max_new_tokens=5, top_k=20,
                      lrs={"lm": 1e-3, "merger": 1e-3, "vision": 1e-3}, student_microbatch=4, seed=3)

    def update(share: bool):  # share=False: every pass runs its own tower (the path before sharing)
        trainer = make_trainer(backbone(tok), method_spec(method), replace(cfg, share_features=share), total_steps=4)
        student_calls, teacher_calls = count_tower_passes(trainer.student), count_tower_passes(trainer.teacher)
        trainer.optimizer.zero_grad(set_to_none=True)
        loss, metrics = trainer.step_loss(records, 0.25, 0)
        grads = {n: p.grad.clone() for n, p in trainer.student.model.named_parameters() if p.grad is not None}
        return float(loss), grads, student_calls, teacher_calls

    loss, grads, student_calls, teacher_calls = update(True)
    ref_loss, ref_grads, ref_student_calls, ref_teacher_calls = update(False)
    images = sum(len(r["images"]) for r in records)
    assert student_calls == [images] and teacher_calls == [images]  # the distinct images, once per model
    rows = images * (cfg.rollouts if method == "ltopd" else 1)
    assert sum(ref_student_calls) >= 2 * rows and sum(ref_teacher_calls) == rows
    assert loss == pytest.approx(ref_loss, rel=1e-4, abs=1e-6)
    assert grads.keys() == ref_grads.keys() and any("visual" in n for n in grads)
    for name in grads:
        torch.testing.assert_close(grads[name], ref_grads[name], atol=1e-4, rtol=1e-3)


def test_rollouts_never_sample_a_visual_placeholder(tok, records) -> None:
    """A model that prefers the image/video placeholders still samples none: scoring re-reads the
    response as input, where a placeholder would ask for pixels that do not exist."""
    bb = backbone(tok)
    visual = visual_token_ids(bb)
    assert {bb.model.config.image_token_id, bb.model.config.video_token_id} <= set(visual)

    def favour(_module, _inputs, logits):
        logits[..., visual] += 50.0
        return logits

    bb.model.lm_head.register_forward_hook(favour)
    ro = rollout(bb, records, 2, 0.5, "cdpruner", 1, max_new_tokens=4, seed=0)
    assert not any(t in visual for r in ro.responses for t in r)


@pytest.mark.parametrize("method", ["ltopd", "kd_fixed_prefix"])
def test_the_teacher_reads_the_students_encoding_and_the_update_is_the_same(tok, records, method, monkeypatch):
    """One teacher forward per student microbatch: the teacher (a copy of the student) scores the
    student's encoding of the rows instead of encoding them again; the update is bit for bit the
    one with its own encoding."""
    from ltopd.train.distill import DistillTrainer

    cfg = TrainConfig(budget=0.25, selector="cdpruner", floor=1, rollouts=3, max_new_tokens=5, top_k=20,
                      lrs={"lm": 1e-3, "merger": 1e-3, "vision": 1e-3}, student_microbatch=4, seed=3)
    own = DistillTrainer._teacher_logits

    def update(reuse: bool):
        if not reuse:  # the path before: the teacher encodes its rows itself
            monkeypatch.setattr(DistillTrainer, "_teacher_logits",
                                lambda self, *a, **k: own(self, *a[:5], **{**k, "encoded": None}))
        trainer = make_trainer(backbone(tok), method_spec(method), cfg, total_steps=4)
        encodes = []
        real = trainer.teacher.encode
        trainer.teacher.encode = lambda recs, resp=None: encodes.append(resp is not None) or real(recs, resp)
        trainer.optimizer.zero_grad(set_to_none=True)
        loss, _ = trainer.step_loss(records, 0.25, 0)
        monkeypatch.undo()
        grads = {n: p.grad.clone() for n, p in trainer.student.model.named_parameters() if p.grad is not None}
        return float(loss), grads, sum(encodes)

    loss, grads, teacher_encodes = update(True)
    ref_loss, ref_grads, ref_teacher_encodes = update(False)
    assert teacher_encodes == 0 and ref_teacher_encodes >= 1
    assert loss == ref_loss and grads.keys() == ref_grads.keys()
    assert all(torch.equal(grads[n], ref_grads[n]) for n in grads)
