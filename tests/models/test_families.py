"""The three families' twins (Qwen3.5, GLM-4.6V, LLaVA-OneVision) through the reduction hook,
against independent references.

References are built by hand from lists (which placeholder columns survive, which features fill
them, which positions they carry) and run through the model without the hook; for LLaVA-OV the
dense features come from the library's own multi-image (single-tile) path.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image
from transformers.modeling_outputs import BaseModelOutputWithPooling

from ltopd.models.hook import Selection
from ltopd.models.loading import load_backbone, save_backbone
from ltopd.twins.architectures import twin_backbone
from ltopd.twins.tokenizer import build_tokenizer

CORPUS = [
    "What colour is the square? How many circles are there? Is there a red triangle?",
    "A. red B. blue C. green D. yellow. The answer is 3 shapes.",
] * 20
ONE_TWIN_PER_FAMILY = ["qwen35-tiny", "glm46v-tiny", "llava-ov-tiny"]  # one twin of each family


def _image(side_w: int, side_h: int, seed: int) -> Image.Image:
    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (side_h, side_w, 3), generator=g, dtype=torch.uint8)
    return Image.fromarray(pixels.numpy())


RECORDS = [
    {"question": "What colour is the square?", "options": ["red", "blue"], "images": [_image(128, 128, 1)]},
    {"question": "How many circles?", "options": [], "images": [_image(96, 128, 2)]},
]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(CORPUS, 400)


@pytest.fixture(scope="module", params=ONE_TWIN_PER_FAMILY)
def bb(request, tok):
    return twin_backbone(request.param, tok, seed=3)


def _is_llava(bb) -> bool:
    return bb.model.config.model_type == "llava_onevision"


def _fixed(bb, batch, pick) -> Selection:
    sizes = [f.shape[0] for f in bb.image_features(batch)]
    return Selection(tuple(pick(n) for n in sizes), tuple(sizes))


def _library_llava_features(bb, batch) -> tuple[torch.Tensor, ...]:
    """LLaVA-OV's own single-tile features (grid + newline) via its multi-image path (>= 2 images)."""
    pixels = batch.inputs["pixel_values"]
    side = bb.model.config.vision_config.image_size
    out = bb.model.model.get_image_features(
        pixels,
        image_sizes=torch.tensor([[side, side]] * pixels.shape[0]),
        batch_num_images=torch.tensor([pixels.shape[0]]),
        return_dict=True,
    )
    return tuple(out.pooler_output)


def _dense(bb, batch, **kwargs):
    """The unhooked model on the full left-padded batch."""
    if not _is_llava(bb):
        return bb.model(**batch.inputs, **kwargs)
    mask = batch.inputs["attention_mask"]
    positions = (mask.cumsum(-1) - 1).clamp_min(0) * mask
    return bb.model(
        input_ids=batch.inputs["input_ids"],
        attention_mask=mask,
        position_ids=positions,
        mm_encoder_outputs={"image": BaseModelOutputWithPooling(pooler_output=_library_llava_features(bb, batch))},
        **kwargs,
    )


def _reference_inputs(bb, record, selection):
    """Pruned single-sample embeddings and full-sequence positions built by hand (no prune_sequence)."""
    batch = bb.encode([record])
    ids = batch.inputs["input_ids"][0].tolist()
    if _is_llava(bb):
        pos = torch.arange(len(ids))
        trailing = 1
    else:
        pos, _ = bb.model.model.get_rope_index(
            batch.inputs["input_ids"], batch.inputs["mm_token_type_ids"], batch.inputs["image_grid_thw"]
        )
        pos = pos[:, 0]
        trailing = 0
    image_id = bb.model.config.image_token_id
    kept_sets = [set(k.tolist()) for k in selection.kept]
    keep_cols, image_index, token_index = [], 0, 0
    for col, tok in enumerate(ids):
        if tok != image_id:
            keep_cols.append(col)
            continue
        if token_index >= selection.n_tokens[image_index] or token_index in kept_sets[image_index]:
            keep_cols.append(col)
        token_index += 1
        if token_index == selection.n_tokens[image_index] + trailing:
            image_index, token_index = image_index + 1, 0
    feats = list(selection.apply(bb.image_features(batch)))
    if trailing:
        feats = [torch.cat([f, bb.model.model.image_newline[None]]) for f in feats]
    embeds = bb.model.get_input_embeddings()(torch.tensor([ids[c] for c in keep_cols])).clone()
    image_rows = [i for i, c in enumerate(keep_cols) if ids[c] == image_id]
    embeds[image_rows] = torch.cat(feats)
    return embeds, pos[..., keep_cols], int(pos.max())


def _reference_logits(bb, embeds, pos, extra_ids, next_pos):
    """Logits of a no-cache forward on [pruned prompt + extra_ids] with hand-built positions."""
    extra = torch.tensor(extra_ids, dtype=torch.long)
    full = torch.cat([embeds, bb.model.get_input_embeddings()(extra)]).unsqueeze(0)
    extra_pos = next_pos + torch.arange(len(extra_ids))
    if _is_llava(bb):
        position_ids = torch.cat([pos, extra_pos]).unsqueeze(0)
    else:
        rope = torch.cat([pos, extra_pos.view(1, -1).expand(3, -1)], dim=1).unsqueeze(1)
        text_row = torch.arange(full.shape[1]).view(1, 1, -1)
        position_ids = torch.cat([text_row, rope], dim=0)
    return bb.model(inputs_embeds=full, position_ids=position_ids).logits[0]


def test_twin_processor_spans(bb, tok):
    batch = bb.encode(RECORDS[:1])
    ids = batch.inputs["input_ids"][0].tolist()
    image_id = bb.model.config.image_token_id
    n_placeholders = ids.count(image_id)
    first = ids.index(image_id)
    if _is_llava(bb):
        assert n_placeholders == 64 + 1  # 8x8 grid of the 112 px tile + the newline token
        assert batch.inputs["pixel_values"].shape == (1, 3, 112, 112)
        assert tok.decode(ids[first + n_placeholders]) == "\n"
    else:  # Qwen3.5: 128 px -> 8x8 patches of 16 -> 4x4 merged; GLM: 128 -> 140 px -> 10x10 of 14 -> 5x5
        qwen = bb.model.config.model_type == "qwen3_5"
        assert n_placeholders == (16 if qwen else 25)
        assert batch.inputs["image_grid_thw"].tolist() == ([[1, 8, 8]] if qwen else [[1, 10, 10]])
        assert tok.convert_ids_to_tokens([ids[first - 1], ids[first + n_placeholders]]) == (
            ["<|vision_start|>", "<|vision_end|>"] if qwen else ["<|begin_of_image|>", "<|end_of_image|>"]
        )
        big = bb.encode([{"question": "q", "images": [_image(256, 256, 5)]}])
        assert big.inputs["image_grid_thw"].tolist() == [[1, 16, 16]]  # 64 merged tokens
    n_params = sum(p.numel() for p in bb.model.parameters())
    assert 5e5 < n_params < 5e6


def test_questions_about_one_image_object_share_its_tower_pass(bb, monkeypatch):
    """Questions about one picture (one image object, as ltopd.data.rows reads equal bytes): without
    gradient the tower runs once per distinct object, and every copy's features equal, bit for bit,
    those of a batch in which each copy is an object of its own; with gradient every copy is passed."""
    passes: list[int] = []
    tower = bb.ops.image_features
    monkeypatch.setattr(bb.ops, "image_features", lambda model, inputs: passes.append(
        len(out := tower(model, inputs))) or out)
    picture, other = _image(128, 128, 5), _image(96, 128, 6)
    shared = [{"question": q, "options": [], "images": [im]} for q, im in (
        ("Is it red?", picture), ("How many?", other), ("Is there a circle?", picture), ("What colour?", picture))]
    separate = [{**r, "images": [r["images"][0].copy()]} for r in shared]
    encoder = frozenset({"encoder_attention_object", "encoder_attention_output"})  # HiPrune's: the tower again
    with torch.no_grad():
        batch, alone = bb.encode(shared), bb.encode(separate)
        got, want = bb.image_features(batch), bb.image_features(alone)
        assert passes == [2, 4]
        signals, wanted = bb.selection_inputs(batch, got, encoder), bb.selection_inputs(alone, want, encoder)
    assert passes == [2, 4, 2, 4]
    assert len(got) == len(want) == 4 and all(torch.equal(a, b) for a, b in zip(got, want))
    assert got[0] is got[2] is got[3]
    assert all(torch.equal(getattr(a, name), getattr(b, name)) for a, b in zip(signals, wanted) for name in encoder)
    bb.image_features(bb.encode(shared))
    assert passes[-1] == 4


def test_keep_all_equals_unhooked_model_batched(bb):
    batch = bb.encode(RECORDS, ["red</answer>", "3</answer>"])
    with torch.no_grad():
        dense = _dense(bb, batch).logits
        hooked, pruned = bb.forward(batch, Selection.full([f.shape[0] for f in bb.image_features(batch)]))
    assert pruned.input_ids.shape == batch.inputs["input_ids"].shape
    mask = batch.inputs["attention_mask"].bool()
    assert torch.allclose(hooked.logits[mask], dense[mask], atol=1e-5, rtol=0)


def test_cached_greedy_decoding_matches_full_recompute(bb):
    record = RECORDS[0]
    batch = bb.encode([record])
    selection = _fixed(bb, batch, lambda n: torch.tensor([0, 5, n - 1]))
    with torch.no_grad():
        out = bb.generate(
            batch, selection, max_new_tokens=5, do_sample=False, eos_token_id=None,
            return_dict_in_generate=True, output_logits=True,
        )
        tokens = out.sequences[0, -5:].tolist()
        embeds, pos, full_max = _reference_inputs(bb, record, selection)
        ref = _reference_logits(bb, embeds, pos, tokens, full_max + 1)
    prompt_len = embeds.shape[0]
    for step in range(5):
        ref_step = ref[prompt_len - 1 + step]
        assert torch.allclose(out.logits[step][0], ref_step, atol=1e-4, rtol=0)
        assert tokens[step] == int(ref_step.argmax())


def test_batched_left_padding_equals_per_sample(bb):
    responses = ["red</answer>", "3 circles</answer>"]
    batch = bb.encode(RECORDS, responses)
    selection = _fixed(bb, batch, lambda n: torch.arange(0, n, 2))
    with torch.no_grad():
        batched, pruned = bb.forward(batch, selection)
        gen = bb.generate(bb.encode(RECORDS), selection, max_new_tokens=4, do_sample=False, eos_token_id=None)
        for row, record in enumerate(RECORDS):
            single = bb.encode([record], [responses[row]])
            sel = Selection(selection.kept[row : row + 1], selection.n_tokens[row : row + 1])
            alone, alone_pruned = bb.forward(single, sel)
            n = alone_pruned.input_ids.shape[1]
            assert pruned.input_ids[row, -n:].tolist() == alone_pruned.input_ids[0].tolist()
            assert torch.allclose(batched.logits[row, -n:], alone.logits[0], atol=1e-4, rtol=0)
            alone_gen = bb.generate(bb.encode([record]), sel, max_new_tokens=4, do_sample=False, eos_token_id=None)
            assert gen[row].tolist() == alone_gen[0].tolist()


def test_replayed_selection_gives_identical_logits(bb):
    batch = bb.encode(RECORDS[:1], ["red</answer>"])
    selection = bb.select(batch, 0.25, "cdpruner", floor=1)
    replay = Selection.from_lists(selection.to_lists())
    with torch.no_grad():
        first, _ = bb.forward(batch, selection)
        second, _ = bb.forward(bb.encode(RECORDS[:1], ["red</answer>"]), replay)
    assert torch.equal(first.logits, second.logits)


def test_cdpruner_at_five_percent_prunes_and_generates(bb):
    batch = bb.encode(RECORDS[:1])
    selection = bb.select(batch, 0.05, "cdpruner", floor=1)
    n = selection.n_tokens[0]
    assert len(selection.kept[0]) == -(-n * 5 // 100)  # ceil(5% of the grid)
    with torch.no_grad():
        out = bb.generate(batch, selection, max_new_tokens=3, do_sample=False, eos_token_id=None,
                          return_dict_in_generate=True, output_logits=True)
        forward, pruned = bb.forward(batch, selection)
    assert pruned.input_ids.shape[1] == batch.inputs["input_ids"].shape[1] - (n - len(selection.kept[0]))
    assert torch.allclose(out.logits[0][0], forward.logits[0, -1], atol=1e-5, rtol=0)


def test_gradients_reach_vision_projector_and_lm_at_five_percent(bb):
    batch = bb.encode(RECORDS, ["red</answer>", "3</answer>"])
    selection = bb.select(batch, 0.05, "random", floor=1)
    bb.model.zero_grad(set_to_none=True)
    out, _ = bb.forward(batch, selection, with_labels=True)
    out.loss.backward()
    inner = bb.model.model
    if _is_llava(bb):
        groups = {
            "vision tower": inner.vision_tower.encoder.layers[0].self_attn.q_proj.weight,
            "projector": inner.multi_modal_projector.linear_2.weight,
            "image newline": inner.image_newline,
        }
    elif bb.model.config.model_type == "qwen3_5":  # Gated DeltaNet layers, then a full-attention one
        groups = {
            "vision tower": inner.visual.blocks[0].attn.qkv.weight,
            "merger": inner.visual.merger.linear_fc2.weight,
            "LM linear attention": inner.language_model.layers[0].linear_attn.in_proj_qkv.weight,
        }
        groups["LM"] = inner.language_model.layers[3].self_attn.q_proj.weight
    else:
        groups = {
            "vision tower": inner.visual.blocks[0].attn.qkv.weight,
            "downsample": inner.visual.downsample.weight,
            "merger": inner.visual.merger.down_proj.weight,
        }
    if "LM" not in groups:
        groups["LM"] = inner.language_model.layers[0].self_attn.q_proj.weight
    for name, param in groups.items():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    bb.model.zero_grad(set_to_none=True)


def test_save_load_round_trip_gives_identical_logits(bb, tmp_path):
    batch = bb.encode(RECORDS, ["A</answer>", "3</answer>"])
    save_backbone(bb, tmp_path / "ckpt")
    loaded = load_backbone(tmp_path / "ckpt")
    assert type(loaded.model) is type(bb.model) and type(loaded.processor) is type(bb.processor)
    again = loaded.encode(RECORDS, ["A</answer>", "3</answer>"])
    assert all(torch.equal(batch.inputs[k], again.inputs[k]) for k in batch.inputs)
    selection = _fixed(bb, batch, lambda n: torch.arange(1, n, 3))
    with torch.no_grad():
        first, _ = bb.forward(batch, selection)
        second, _ = loaded.forward(again, selection)
    assert torch.equal(first.logits, second.logits)


def test_attention_fields_match_eager_attention_weights(bb):
    batch = bb.encode(RECORDS)
    features = bb.image_features(batch)
    needs = frozenset({"last_query_attention", "key_states", "text_key_states", "hidden_states"})
    inputs = bb.selection_inputs(batch, features, needs)
    bb.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = _dense(bb, batch, output_attentions=True, output_hidden_states=True)
    finally:
        bb.model.set_attn_implementation("sdpa")
    layer = bb.ops.attention_layer(bb.model)
    # a hybrid LM (Qwen3.5) returns the attentions of its full-attention layers only
    kinds = getattr(bb.model.config.text_config, "layer_types", None)
    index = sum(k == "full_attention" for k in kinds[:layer]) if kinds else layer
    reference = out.attentions[index][:, :, -1, :].mean(1)
    is_image = batch.inputs["input_ids"] == bb.model.config.image_token_id
    for row, (item, feats) in enumerate(zip(inputs, features)):
        cols = is_image[row].nonzero().squeeze(1)[: feats.shape[0]]  # the grid, not LLaVA's newline
        assert torch.allclose(item.last_query_attention, reference[row, cols], atol=1e-6, rtol=0)
        assert torch.allclose(item.hidden_states, out.hidden_states[layer + 1][row, cols], atol=1e-5, rtol=0)
    assert [len(k) for k in bb.select(batch, 0.25, "fastv", floor=1).kept] == [
        -(-f.shape[0] // 4) for f in features
    ]


def test_encoder_attention_fields_and_hiprune(bb):
    batch = bb.encode(RECORDS)
    features = bb.image_features(batch)
    inputs = bb.selection_inputs(batch, features, frozenset({"encoder_attention_object", "encoder_attention_output"}))
    # Each head's query rows sum to 1 over the image's patches; a merged token averages merge^2 patches.
    unit = 1 if _is_llava(bb) else bb.model.config.vision_config.spatial_merge_size ** 2
    for item, feats in zip(inputs, features):
        for signal in (item.encoder_attention_object, item.encoder_attention_output):
            assert signal.shape == (feats.shape[0],) and (signal > 0).all()
            assert torch.allclose(signal.sum(), torch.tensor(1.0 / unit), atol=1e-5)
    selection = bb.select(batch, 0.5, "hiprune", floor=1)
    assert [len(k) for k in selection.kept] == [-(-f.shape[0] // 2) for f in features]
