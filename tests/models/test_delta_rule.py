"""The re-batched Gated DeltaNet kernels equal transformers' reference ones: on random inputs
(several shapes, grouped and ungrouped heads, one and several chunks, with and without an
initial state, with and without the final state), on the released twin's logits, and in its
greedy answers; and they run only where the reference would (CPU, no gradient).

Tolerance: float32, atol 2e-5 (rtol 0) on outputs and states of magnitude ~1, a margin over
the differences a changed summation order leaves (the same mathematics, other products and one
triangular solve instead of two); the twin's logits: atol 1e-4.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers.models.qwen3_5 import modeling_qwen3_5 as reference

from ltopd.bench.suites import SUITES, synthetic_records
from ltopd.models import delta_rule
from ltopd.models.loading import load_backbone

ROOT = Path(__file__).resolve().parents[2]
TWIN = ROOT / "releases" / "qwen35-tiny"
ATOL = 2e-5

# (batch, tokens, key heads, value heads, head size, initial state)
SHAPES = [
    (4, 108, 2, 4, 32, False),  # the twin's heads, two chunks
    (3, 200, 2, 4, 32, True),  # four chunks, continuing a state
    (2, 65, 1, 3, 16, True),  # one token past a chunk, three value heads per key head
    (5, 7, 2, 2, 8, False),  # one short chunk, no grouping
    (2, 64, 2, 4, 32, False),  # exactly one chunk
    (3, 1, 2, 4, 32, True),  # a single token
]


def _inputs(b, t, hk, hv, d, init, seed=0, decay=4.0):
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(b, t, hk, d, generator=gen) for _ in range(2))
    v = torch.randn(b, t, hv, d, generator=gen)
    g = -torch.rand(b, t, hv, generator=gen) * decay  # log decays, <= 0
    beta = torch.rand(b, t, hv, generator=gen)
    state = torch.randn(b, hv, d, d, generator=gen) if init else None
    return (q, k, v), {"g": g, "beta": beta, "initial_state": state}


def _assert_equal(ours, ref, final):
    torch.testing.assert_close(ours[0], ref[0], atol=ATOL, rtol=0)
    assert ours[0].dtype == ref[0].dtype and ours[0].is_contiguous()
    if final:
        torch.testing.assert_close(ours[1], ref[1], atol=ATOL, rtol=0)
    else:
        assert ours[1] is None and ref[1] is None


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("final", [True, False])
@pytest.mark.parametrize("l2norm", [True, False])
def test_chunked_form_equals_the_reference(shape, final, l2norm):
    args, kwargs = _inputs(*shape)
    if not l2norm:  # the rule is stable for keys of norm <= 1 (the model always normalises)
        args = (args[0], torch.nn.functional.normalize(args[1], dim=-1), args[2])
    kwargs.update(output_final_state=final, use_qk_l2norm_in_kernel=l2norm)
    originals = [x.clone() for x in args]
    with torch.no_grad():
        ours = delta_rule.chunk_gated_delta_rule(*args, **kwargs)
        ref = reference.torch_chunk_gated_delta_rule(*args, **kwargs)
    _assert_equal(ours, ref, final)
    assert all(torch.equal(a, b) for a, b in zip(args, originals)), "the inputs were modified"


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[1] <= 65])
@pytest.mark.parametrize("final", [True, False])
def test_recurrent_form_equals_the_reference(shape, final):
    args, kwargs = _inputs(*shape, seed=1)
    kwargs.update(output_final_state=final, use_qk_l2norm_in_kernel=True)
    state = kwargs["initial_state"]
    before = None if state is None else state.clone()
    with torch.no_grad():
        ours = delta_rule.recurrent_gated_delta_rule(*args, **kwargs)
        ref = reference.torch_recurrent_gated_delta_rule(*args, **kwargs)
    _assert_equal(ours, ref, final)
    assert state is None or torch.equal(state, before), "the initial state was modified"


def test_strong_and_no_decay_and_a_chunk_size_argument():
    """Decays that underflow within a chunk (exp(-40 * 30) = 0) and none at all (g = 0); the
    reference's chunk_size argument (the model never passes it) is honoured as a maximum."""
    for decay in (40.0, 0.0):
        args, kwargs = _inputs(3, 130, 2, 4, 32, True, seed=2, decay=decay)
        kwargs.update(output_final_state=True, use_qk_l2norm_in_kernel=True)
        with torch.no_grad():
            ref = reference.torch_chunk_gated_delta_rule(*args, **kwargs)
            for chunk in (16, 64):
                _assert_equal(delta_rule.chunk_gated_delta_rule(*args, chunk_size=chunk, **kwargs), ref, True)


def test_bfloat16_inputs_come_back_in_bfloat16():
    args, kwargs = _inputs(2, 70, 2, 4, 32, False, seed=3)
    args = tuple(x.bfloat16() for x in args)
    kwargs.update(output_final_state=True, use_qk_l2norm_in_kernel=True)
    with torch.no_grad():
        ours = delta_rule.chunk_gated_delta_rule(*args, **kwargs)
        ref = reference.torch_chunk_gated_delta_rule(*args, **kwargs)
    assert ours[0].dtype == torch.bfloat16 and ours[1].dtype == torch.float32
    torch.testing.assert_close(ours[0].float(), ref[0].float(), atol=1e-2, rtol=0)  # bf16 rounding
    torch.testing.assert_close(ours[1], ref[1], atol=ATOL, rtol=0)


@pytest.fixture(scope="module")
def twin():
    return load_backbone(TWIN)


@pytest.fixture(scope="module")
def records():
    return synthetic_records("gqa", 24, 0, {"image_size": 256})


def _counting(monkeypatch):
    calls = {name: 0 for name in delta_rule.FAST}
    for name, fn in dict(delta_rule.FAST).items():
        def counted(*args, _fn=fn, _name=name, **kwargs):
            calls[_name] += 1
            return _fn(*args, **kwargs)
        monkeypatch.setitem(delta_rule.FAST, name, counted)
    return calls


def test_loading_installs_the_kernels_in_every_linear_attention_layer(twin):
    layers = twin.model.config.text_config.layer_types
    installed = delta_rule.install(twin.model)  # idempotent
    assert len(installed) == layers.count("linear_attention") > 0


def test_twin_logits_equal_with_and_without_the_fast_path(twin, records, monkeypatch):
    batch = twin.encode(records[:12])
    calls = _counting(monkeypatch)
    with torch.no_grad():
        features = twin.image_features(batch)
        out, pruned = twin.forward(batch, features=features)
        fast = out.logits
        assert calls["chunk_gated_delta_rule"] == 3  # one per linear-attention layer
        delta_rule.install(twin.model, enabled=False)
        try:
            ref = twin.forward(batch, features=features)[0].logits
        finally:
            delta_rule.install(twin.model)
    assert calls["chunk_gated_delta_rule"] == 3, "the library's path ran the fast kernel"
    mask = pruned.attention_mask.bool()
    # float32 rounding, amplified over the layers: within 3e-5 of the largest logit (|logit| ~ 18: atol
    # ~5e-4; 1.8e-4 seen on one machine, under 1e-4 on another: the GEMMs' summation order differs)
    scale = ref[mask].abs().max().item()
    torch.testing.assert_close(fast[mask], ref[mask], atol=3e-5 * scale, rtol=0)


def test_greedy_answers_identical_with_and_without_the_fast_path(twin, records, monkeypatch):
    from ltopd.models.inference import predict_settings

    settings = [(1.0, None), (0.05, "cdpruner")]
    calls = _counting(monkeypatch)
    cap = SUITES["gqa"].generation_cap
    fast = predict_settings(twin, records, settings, floor=1, batch_size=12, max_new_tokens=cap)
    assert calls["chunk_gated_delta_rule"] > 0 and calls["fused_recurrent_gated_delta_rule"] > 0
    delta_rule.install(twin.model, enabled=False)
    try:
        ref = predict_settings(twin, records, settings, floor=1, batch_size=12, max_new_tokens=cap)
    finally:
        delta_rule.install(twin.model)
    assert fast == ref


def test_gradients_keep_the_reference(twin, records, monkeypatch):
    """Training needs the reference's autograd graph: with gradients on, the library's kernel runs."""
    calls = _counting(monkeypatch)
    batch = twin.encode(records[:2])
    features = twin.image_features(batch)
    out, _ = twin.forward(batch, features=features)
    out.logits.sum().backward()
    assert calls == {name: 0 for name in delta_rule.FAST}
    twin.model.zero_grad(set_to_none=True)
