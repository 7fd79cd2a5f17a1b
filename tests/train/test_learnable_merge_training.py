"""LT-OPD with the learnable merge in training: LT-OPD's distillation trainer with the module on
the student only; gradients reach the module and nothing the configuration freezes; the rollout's
prefill records the routes and the training forwards replay them; a resumed run equals an
uninterrupted one; another module setting is another job and another student."""
from __future__ import annotations

import pytest
import torch
from test_trainer import CFG, _weights, backbone, records, tok  # noqa: F401  (fixtures)

from ltopd.job_identity import claim, identity
from ltopd.models.learnable_merge import module_of, route
from ltopd.models.parts import parameter_groups
from ltopd.train import distill
from ltopd.train.distill import DistillTrainer
from ltopd.train.families import make_trainer
from ltopd.train.methods import method_spec
from ltopd.train.rollout import rollout
from ltopd.train.trainer import TrainConfig

SECTION = {"hidden": 8, "input": "difference", "prior": "similarity", "temperature": 0.1, "bound": 0.25}
MERGE = TrainConfig(**{**CFG.__dict__, "method_params": SECTION})


def _cfg(**changes) -> TrainConfig:
    return TrainConfig(**{**MERGE.__dict__, **changes})


def test_it_is_ltopds_trainer_with_the_module_on_the_student_only(tok) -> None:
    spec = method_spec("learnable_merge")
    ltopd = method_spec("ltopd")
    assert (spec.family, spec.objective, spec.curriculum, spec.plateau, spec.teacher, spec.on_policy) == \
        (ltopd.family, ltopd.objective, ltopd.curriculum, ltopd.plateau, ltopd.teacher, ltopd.on_policy)
    assert spec.section == "learnable_merge" and spec.adds_module and not ltopd.adds_module
    t = make_trainer(backbone(tok), spec, MERGE, total_steps=4)
    assert type(t) is DistillTrainer
    module = module_of(t.student.model)
    assert module is not None and module.cfg.hidden == 8 and module_of(t.teacher.model) is None
    groups = {g["part"]: g for g in t.optimizer.param_groups}
    assert groups["learnable_merge"]["base_lr"] == MERGE.lrs["merger"]  # the merger's learning rate
    assert {id(p) for g in t.optimizer.param_groups if g["part"] == "learnable_merge" for p in g["params"]} == \
        {id(p) for p in module.parameters()}


def test_gradients_reach_the_module_and_nothing_the_configuration_freezes(tok, records) -> None:
    frozen = {"lm": 1e-3, "merger": 1e-3, "vision": 0.0}  # the vision tower frozen by its lr
    t = make_trainer(backbone(tok), method_spec("learnable_merge"), _cfg(lrs=frozen), total_steps=4)
    vision = parameter_groups(t.student.model)  # (trainable parts only: the tower is left out)
    assert not vision["vision"]
    before = {n: p.detach().clone() for n, p in t.student.model.named_parameters()}
    t.optimizer.zero_grad(set_to_none=True)
    t.step_loss(records, 0.25, step=3)  # backpropagates its microbatches itself
    module = module_of(t.student.model)
    assert module.fc_out.weight.grad is not None and module.fc_out.weight.grad.abs().sum() > 0
    assert module.fc_out.bias.grad.abs().sum() > 0
    named = dict(t.student.model.named_parameters())
    tower = [n for n in named if n.startswith("model.visual.") and not n.startswith("model.visual.merger.")]
    assert tower and all(named[n].grad is None for n in tower)  # the frozen tower takes no gradient
    merger = [n for n in named if n.startswith("model.visual.merger.")]
    assert any(named[n].grad is not None and named[n].grad.abs().sum() > 0 for n in merger)
    assert all(p.grad is None for p in t.teacher.model.parameters())
    logs = t.fit([records[:2], records[2:]])
    assert all(log.metrics["lr_learnable_merge"] == log.metrics["lr_merger"] > 0 for log in logs)
    after = dict(t.student.model.named_parameters())
    assert all(torch.equal(after[n], before[n]) for n in tower)
    assert not torch.equal(after["learnable_merge.fc_out.weight"], before["learnable_merge.fc_out.weight"])
    assert not torch.equal(after["learnable_merge.fc_in.weight"], before["learnable_merge.fc_in.weight"])


def test_a_frozen_merger_freezes_the_module_with_it(tok, records) -> None:
    t = make_trainer(backbone(tok), method_spec("learnable_merge"),
                     _cfg(lrs={"lm": 1e-3, "merger": 0.0, "vision": 0.0}), total_steps=2)
    assert "learnable_merge" not in {g["part"] for g in t.optimizer.param_groups}
    t.fit([records[:2], records[2:]])
    module = module_of(t.student.model)
    assert all(p.grad is None for p in module.parameters()) and not module.fc_out.weight.any()


def test_the_rollout_prefill_records_the_routes_and_training_replays_them(tok, records, monkeypatch) -> None:
    t = make_trainer(backbone(tok), method_spec("learnable_merge"), MERGE, total_steps=4)
    ro = rollout(t.student, records, 2, 0.25, "cdpruner", 1, max_new_tokens=3, seed=7)
    assert ro.selection.routed and len(ro.selection.groups) == len(ro.selection.kept) == 8
    with torch.no_grad():
        feats = [f for r in ro.records for f in t.student.image_features(t.student.encode([r]))]
    for f, kept, groups, priors in zip(feats, ro.selection.kept, ro.selection.groups, ro.selection.priors):
        g, p = route(f, kept, "similarity", 0.1)
        assert torch.equal(groups, g) and torch.equal(priors, p)
    # the training forwards receive the rollout's selection, routes included (not recomputed)
    seen = []
    real = distill.response_logits

    def spy(bb, batch, width, selection, features=None):
        seen.append(selection)
        return real(bb, batch, width, selection, features)

    monkeypatch.setattr(distill, "response_logits", spy)
    recorded = []
    real_rollout = distill.rollout

    def keep(*args, **kwargs):
        out = real_rollout(*args, **kwargs)
        recorded.append(out.selection)
        return out

    monkeypatch.setattr(distill, "rollout", keep)
    t.step_loss(records, 0.25, step=3)
    assert seen and all(s.routed for s in seen)
    replayed = [g for s in seen for g in s.groups]
    assert all(a is b for a, b in zip(replayed, recorded[0].groups))  # the very tensors of the prefill


def test_a_resumed_run_ends_with_the_same_weights(tok, records, tmp_path) -> None:
    batches = [records[i:i + 2] for i in (0, 2, 0, 2)]
    full = make_trainer(backbone(tok), method_spec("learnable_merge"), MERGE, total_steps=4)
    full.fit(batches, tmp_path / "a")
    first = make_trainer(backbone(tok), method_spec("learnable_merge"), MERGE, total_steps=4)
    first.fit(batches, tmp_path / "b", stop_after=2)
    resumed = make_trainer(backbone(tok), method_spec("learnable_merge"), MERGE, total_steps=4)
    assert [log.step for log in resumed.fit(batches, tmp_path / "b")] == [3, 4]
    a, b = _weights(full), _weights(resumed)
    assert any(k.startswith("learnable_merge.") for k in a) and a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not module_of(full.student.model).fc_out.weight.eq(0).all()  # the module trained


def test_another_module_setting_is_another_job_and_another_student(tok, records, tmp_path, capsys) -> None:
    from ltopd.train.job import job_settings

    settings = [job_settings("learnable_merge", {"steps": 2}, 0.05, 1, 0, section)
                for section in (SECTION, {**SECTION, "bound": 0.5})]
    ckpt = tmp_path / "ckpt"
    claim(ckpt, identity(settings[0], {}, code=("ltopd.train.job",)))
    (ckpt / "step-000001").mkdir()
    claim(ckpt, identity(settings[1], {}, code=("ltopd.train.job",)))  # another job's state is set aside
    assert "method_params.bound" in capsys.readouterr().err and not (ckpt / "step-000001").exists()
    students = []
    for section in (SECTION, {**SECTION, "bound": 0.5}):
        t = make_trainer(backbone(tok), method_spec("learnable_merge"), _cfg(method_params=section), total_steps=2)
        t.fit([records[:2], records[2:]])
        students.append(_weights(t))
    assert any(not torch.equal(students[0][k], students[1][k]) for k in students[0])


def test_bad_module_specs_fail() -> None:
    from ltopd.train.methods import MethodSpec

    with pytest.raises(ValueError, match="module must be one of"):
        MethodSpec("x", "distill", module="lora")
    with pytest.raises(ValueError, match="module must be one of"):
        MethodSpec("x", "rl", policy_loss="grpo", module="learnable_merge")  # a family with its own section
