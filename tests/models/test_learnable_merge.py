"""The learnable merge on the reduction hook, against independent references: at init the student
is CDPruner's bit for bit (every family); each discarded token joins its nearest kept token (a
brute-force scan); the priors sum as stated; positions and token counts are CDPruner's; the
residual is the written-out formula; the module round-trips through save/load by its manifest."""
from __future__ import annotations

import json
import math

import pytest
import torch

from ltopd.catalog import BENCHMARKS
from ltopd.data.sources import world_config
from ltopd.data.world import generate_task_item
from ltopd.models import learnable_merge as lm
from ltopd.models.learnable_merge import LearnableMerge, LearnableMergeConfig, attach, module_of, route
from ltopd.models.loading import load_backbone, save_backbone
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.corpus import corpus
from ltopd.twins.tokenizer import build_tokenizer

WORLD = {"image_size": 128}
FAMILIES = ["qwen35-tiny", "glm46v-tiny", "llava-ov-tiny"]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(list(corpus(WORLD, 4, BENCHMARKS)), 600)


@pytest.fixture(scope="module")
def records():
    cfg = world_config({**WORLD, "min_objects": 1, "max_objects": 3})
    return [generate_task_item("color", i, 3, cfg) for i in range(3)]


SMALL = LearnableMergeConfig(hidden=16)


def _pair(tok, twin: str, cfg: LearnableMergeConfig = SMALL):
    """(plain twin, the same twin with the module attached)."""
    plain, merged = twin_backbone(twin, tok, seed=0), twin_backbone(twin, tok, seed=0)
    attach(merged.model, cfg)
    return plain, merged


def _cos32(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine of two rows in FP32, written out (as l2_normalise: norms floored at 1e-6)."""
    a, b = a.float(), b.float()
    return float((a / a.norm().clamp_min(1e-6)) @ (b / b.norm().clamp_min(1e-6)))


def _brute_groups(features: torch.Tensor, kept: torch.Tensor) -> list[int]:
    """Per token, the slot of its nearest kept token by a scan (the first best on a tie); a kept
    token's own slot."""
    kept_list = kept.tolist()
    out = []
    for j in range(features.shape[0]):
        if j in kept_list:
            out.append(kept_list.index(j))
            continue
        best, slot = -math.inf, -1
        for s, i in enumerate(kept_list):
            c = _cos32(features[j], features[i])
            if c > best:
                best, slot = c, s
        out.append(slot)
    return out


@pytest.mark.parametrize("twin", FAMILIES)
def test_at_init_the_student_is_cdpruners_bit_for_bit(tok, records, twin) -> None:
    plain, merged = _pair(tok, twin)
    batch = plain.encode(records, ["a red one</answer>"] * len(records))
    sel = plain.select(batch, 0.1, "cdpruner", 1, 0)
    routed = merged.select(batch, 0.1, "cdpruner", 1, 0)
    assert routed.routed and not sel.routed
    assert all(torch.equal(a, b) for a, b in zip(sel.kept, routed.kept))  # the same selection
    with torch.no_grad():
        feats = plain.image_features(batch)
        tokens = module_of(merged.model).compressor(routed)(feats, routed.kept)
        assert all(torch.equal(t, f[k]) for t, f, k in zip(tokens, feats, sel.kept))  # the kept features themselves
        out_p, pruned_p = plain.forward(batch, sel)
        out_m, pruned_m = merged.forward(batch, routed)
        assert torch.equal(out_p.logits, out_m.logits)
        assert torch.equal(pruned_p.position_ids, pruned_m.position_ids)
        gen = plain.generate(batch, sel, max_new_tokens=4)
        assert torch.equal(gen, merged.generate(batch, routed, max_new_tokens=4))
        # an evaluation's selection (no routes: computed in the forward) gives the same
        assert torch.equal(merged.forward(batch, sel)[0].logits, out_p.logits)


@pytest.mark.parametrize("twin", FAMILIES)
def test_a_trained_module_changes_the_tokens_not_their_number_order_or_positions(tok, records, twin) -> None:
    plain, merged = _pair(tok, twin)
    with torch.no_grad():
        module_of(merged.model).fc_out.weight.normal_(0, 1.0)
    batch = plain.encode(records)
    sel = merged.select(batch, 0.1, "cdpruner", 1, 0)
    lengths: list[int] = []
    lm_module = merged.model.model.language_model
    handle = lm_module.register_forward_pre_hook(
        lambda _m, args, kw: lengths.append(kw["inputs_embeds"].shape[1]), with_kwargs=True)
    try:
        with torch.no_grad():
            out_m, pruned_m = merged.forward(batch, sel)
    finally:
        handle.remove()
    with torch.no_grad():
        out_p, pruned_p = plain.forward(batch, sel)
    assert lengths == [pruned_p.input_ids.shape[1]]  # no token added
    for field in ("input_ids", "attention_mask", "position_ids", "rope_deltas"):
        assert torch.equal(getattr(pruned_m, field), getattr(pruned_p, field)), field
    assert not torch.equal(out_m.logits, out_p.logits)  # the tokens themselves changed


@pytest.mark.parametrize("twin", FAMILIES)
def test_assignment_is_the_nearest_kept_token_by_a_brute_force_scan(tok, records, twin) -> None:
    _, merged = _pair(tok, twin)
    batch = merged.encode(records)
    sel = merged.select(batch, 0.1, "cdpruner", 1, 0)
    with torch.no_grad():
        feats = merged.image_features(batch)
    for f, kept, groups in zip(feats, sel.kept, sel.groups):
        assert groups.tolist() == _brute_groups(f, kept)


def test_assignment_on_random_features_and_ties_go_to_the_lowest_kept_index() -> None:
    g = torch.Generator().manual_seed(5)
    for n, d, k in ((40, 16, 6), (9, 3, 1), (64, 32, 63)):
        feats = torch.randn(n, d, generator=g)
        kept = torch.sort(torch.randperm(n, generator=g)[:k]).values
        groups, _ = route(feats, kept)
        assert groups.tolist() == _brute_groups(feats, kept)
    feats = torch.randn(8, 4, generator=g)
    feats[5] = feats[1]  # two kept tokens with the same direction
    feats[6] = 3 * feats[1]
    groups, _ = route(feats, torch.tensor([1, 5]))
    assert groups[6] == 0 and groups[1] == 0 and groups[5] == 1


@pytest.mark.parametrize("prior", ["similarity", "equal"])
def test_priors_are_detached_non_negative_and_sum_to_one_per_merged_group(prior) -> None:
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(30, 8, generator=g, requires_grad=True)
    kept = torch.tensor([0, 3, 7, 12, 20, 29])
    groups, priors = route(feats, kept, prior, temperature=0.2)
    assert not priors.requires_grad and priors.dtype == torch.float32 and (priors >= 0).all()
    assert (priors[kept] == 0).all()  # the anchors weigh nothing
    cos = [_cos32(feats[j].detach(), feats[kept[groups[j]]].detach()) for j in range(30)]
    for slot in range(len(kept)):
        members = [j for j in range(30) if groups[j] == slot and j not in kept.tolist()]
        if not members:
            assert priors[groups == slot].sum() == 0  # a singleton group: no weight at all
            continue
        assert float(priors[members].sum()) == pytest.approx(1.0, abs=1e-6)
        if prior == "equal":
            assert all(float(priors[j]) == pytest.approx(1 / len(members), rel=1e-6) for j in members)
        else:  # a softmax of the cosine to the anchor at the temperature, written out
            e = [math.exp(cos[j] / 0.2) for j in members]
            assert [float(priors[j]) for j in members] == pytest.approx([x / sum(e) for x in e], rel=1e-5)
    assert any(len([j for j in range(30) if groups[j] == s]) > 2 for s in range(len(kept)))  # groups exist


def test_the_residual_is_the_written_out_bounded_formula() -> None:
    torch.manual_seed(0)
    cfg = LearnableMergeConfig(hidden=5, input="difference", bound=0.3)
    m = LearnableMerge(6, cfg)
    with torch.no_grad():
        m.fc_in.weight.normal_()
        m.fc_out.weight.normal_(0, 10.0)  # saturate: the bound must hold
        m.fc_out.bias.normal_()
    feats = torch.randn(7, 6)
    kept = torch.tensor([1, 4, 6])
    groups = torch.tensor([0, 0, 0, 1, 1, 1, 2])  # token 6 alone: a singleton group
    priors = torch.tensor([0.25, 0.0, 0.75, 0.4, 0.0, 0.6, 0.0])
    got = m.merge(feats, kept, groups, priors)
    for slot, anchor_i, members in ((0, 1, [0, 2]), (1, 4, [3, 5])):
        anchor = feats[anchor_i]
        x = sum(priors[j] * feats[j] for j in members) - anchor
        h = torch.nn.functional.gelu(m.fc_in.weight @ x + m.fc_in.bias)
        r = 0.3 * anchor.pow(2).mean().sqrt() * torch.tanh(m.fc_out.weight @ h + m.fc_out.bias)
        torch.testing.assert_close(got[slot], anchor + r)
        assert ((got[slot] - anchor).abs() <= 0.3 * anchor.pow(2).mean().sqrt() + 1e-6).all()  # bounded
    assert torch.equal(got[2], feats[6])  # nothing merged into a singleton group's token
    mean = LearnableMerge(6, LearnableMergeConfig(hidden=5, input="mean", bound=0.3))
    mean.load_state_dict(m.state_dict())
    x = 0.25 * feats[0] + 0.75 * feats[2]
    h = torch.nn.functional.gelu(m.fc_in.weight @ x + m.fc_in.bias)
    r = 0.3 * feats[1].pow(2).mean().sqrt() * torch.tanh(m.fc_out.weight @ h + m.fc_out.bias)
    torch.testing.assert_close(mean.merge(feats, kept, groups, priors)[0], feats[1] + r)


@pytest.mark.parametrize("twin", FAMILIES)
def test_the_input_layer_starts_from_selected_rows_of_the_mergers_output_layer(tok, twin) -> None:
    bb = twin_backbone(twin, tok, seed=0)
    module = attach(bb.model, LearnableMergeConfig(hidden=8))
    layer = lm.merger_output_layer(bb.model)
    assert layer.out_features == bb.model.get_input_embeddings().embedding_dim
    w = layer.weight.detach()
    norms = w.norm(dim=0)
    rows = sorted(range(w.shape[1]), key=lambda u: (-float(norms[u]), u))[:8]  # the 8 largest columns
    assert torch.equal(module.fc_in.weight, w.T[sorted(rows)])
    assert not module.fc_out.weight.any() and not module.fc_out.bias.any() and not module.fc_in.bias.any()
    with pytest.raises(ValueError, match=r"learnable_merge.hidden: 100000 exceeds the merger's \d+ hidden units"):
        attach(twin_backbone(twin, tok, seed=0).model, LearnableMergeConfig(hidden=100000))


def test_the_student_saves_its_module_beside_its_weights_and_loads_it(tok, records, tmp_path) -> None:
    _, merged = _pair(tok, "qwen35-tiny", LearnableMergeConfig(hidden=12, prior="equal", bound=0.5))
    with torch.no_grad():
        module_of(merged.model).fc_out.weight.normal_()
    save_backbone(merged, tmp_path / "student")
    manifest = json.loads((tmp_path / "student" / lm.CONFIG_FILE).read_text())
    assert manifest["weights"] == lm.WEIGHTS_FILE and (tmp_path / "student" / lm.WEIGHTS_FILE).is_file()
    assert manifest["config"] == {"hidden": 12, "input": "difference", "prior": "equal", "temperature": 0.1,
                                  "bound": 0.5}
    assert not any(k.startswith("learnable_merge.") for k in _model_keys(tmp_path / "student"))
    again = load_backbone(tmp_path / "student")
    assert module_of(again.model).cfg == module_of(merged.model).cfg
    batch = again.encode(records)
    sel = again.select(batch, 0.1, "cdpruner", 1, 0)
    with torch.no_grad():
        assert torch.equal(again.forward(batch, sel)[0].logits, merged.forward(batch, sel)[0].logits)
    (tmp_path / "student" / lm.WEIGHTS_FILE).write_bytes(b"edited")
    with pytest.raises(ValueError, match="not the weights"):
        load_backbone(tmp_path / "student")


def _model_keys(folder) -> set[str]:
    from safetensors import safe_open

    keys: set[str] = set()
    for f in folder.glob("model*.safetensors"):
        with safe_open(str(f), "pt") as fh:
            keys |= set(fh.keys())
    return keys


def test_selection_routes_survive_slicing_concatenation_and_lists() -> None:
    from ltopd.models.hook import Selection

    g = torch.Generator().manual_seed(2)
    feats = [torch.randn(10, 4, generator=g) for _ in range(3)]
    sel = Selection(tuple(torch.tensor(k) for k in ([0, 4], [2, 3, 9], [5])), (10, 10, 10))
    routed = lm.routed(sel, feats, LearnableMergeConfig())
    assert lm.routed(routed, [f + 1 for f in feats], LearnableMergeConfig()) is routed  # replayed, not recomputed
    part = routed.part(slice(1, 3))
    assert torch.equal(part.groups[0], routed.groups[1]) and torch.equal(part.priors[1], routed.priors[2])
    whole = Selection.concat([routed.part(slice(0, 1)), part])
    assert all(torch.equal(a, b) for a, b in zip(whole.groups, routed.groups))
    back = Selection.from_lists(routed.to_lists())
    assert all(torch.equal(a, b) for a, b in zip(back.priors, routed.priors))  # exact through Python floats
    with pytest.raises(ValueError, match="both groups and priors"):
        Selection(sel.kept, sel.n_tokens, groups=routed.groups)


@pytest.mark.parametrize("section, message", [
    ({"input": "sum"}, "learnable_merge.input: 'sum' is not allowed; allowed values: ['difference', 'mean']"),
    ({"prior": "uniform"}, "learnable_merge.prior: 'uniform' is not allowed; allowed values: ['similarity', 'equal']"),
    ({"hidden": 0}, "learnable_merge.hidden: 0; allowed: an integer >= 1"),
    ({"bound": 0.0}, "learnable_merge.bound: 0.0; allowed: > 0"),
    ({"width": 3}, "learnable_merge: unknown key(s) ['width']"),
])
def test_bad_settings_name_the_field_and_the_allowed_values(section, message) -> None:
    with pytest.raises(ValueError) as err:
        LearnableMergeConfig.from_section(section)
    assert message in str(err.value)
