"""Qwen3.5 family operations: M-RoPE positions, post-merger features, reduced forward/generate.

Uses the library's own pieces (get_rope_index, get_image_features, mm_encoder_outputs) so nothing
in transformers is patched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.models.qwen3_5.modeling_qwen3_5 import apply_rotary_pos_emb, apply_rotary_pos_emb_vision

from ltopd.models.hook import ConfigTokenIds, PrunedSequence, dense_attention_signals


class Qwen35Ops(ConfigTokenIds):
    """FamilyOps for Qwen3_5ForConditionalGeneration (image inputs; t = 1 per image)."""

    model_type = "qwen3_5"
    config_class = Qwen3_5Config
    model_class = Qwen3_5ForConditionalGeneration

    def merge_size(self, model: Qwen3_5ForConditionalGeneration) -> int:
        return int(model.config.vision_config.spatial_merge_size)

    def mrope_positions(self, model: Qwen3_5ForConditionalGeneration, batch: Mapping[str, Tensor]) -> Tensor:
        """(3, B, S) positions of the full sequence; padding columns hold 0."""
        mask = batch["attention_mask"]
        if batch.get("image_grid_thw") is None:
            text = (mask.long().cumsum(-1) - 1).clamp_min(0) * mask
            return text.unsqueeze(0).expand(3, -1, -1).clone()
        positions, _ = model.model.get_rope_index(
            batch["input_ids"],
            mm_token_type_ids=batch["mm_token_type_ids"],
            image_grid_thw=batch["image_grid_thw"],
            attention_mask=mask,
        )
        return positions

    def image_features(
        self, model: Qwen3_5ForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, ...]:
        """Post-merger features, one (N_i, D) tensor per image."""
        if batch.get("pixel_values") is None:
            return ()
        out = model.model.get_image_features(batch["pixel_values"], batch["image_grid_thw"], return_dict=True)
        return tuple(out.pooler_output)

    def grid_hw(self, model: Qwen3_5ForConditionalGeneration, batch: Mapping[str, Tensor]) -> list[tuple[int, int]]:
        """Merged-token grid (h, w) per image."""
        if batch.get("image_grid_thw") is None:
            return []
        merge = self.merge_size(model)
        return [(int(h) // merge, int(w) // merge) for _, h, w in batch["image_grid_thw"].tolist()]

    def embed(self, model: Qwen3_5ForConditionalGeneration, ids: Tensor) -> Tensor:
        return model.get_input_embeddings()(ids)

    def _encoder_outputs(self, kept: Sequence[Tensor]) -> dict[str, BaseModelOutputWithPooling] | None:
        return {"image": BaseModelOutputWithPooling(pooler_output=tuple(kept))} if kept else None

    def forward(
        self, model: Qwen3_5ForConditionalGeneration, pruned: PrunedSequence, kept: Sequence[Tensor], **kwargs: Any
    ) -> Any:
        # Explicit positions bypass compute_3d_position_ids; the deltas are set too so that any
        # continuation from this cache without positions lands on the full sequence's positions.
        model.model.rope_deltas = pruned.rope_deltas
        return model(
            input_ids=pruned.input_ids,
            attention_mask=pruned.attention_mask,
            position_ids=pruned.position_ids,
            labels=pruned.labels,
            mm_encoder_outputs=self._encoder_outputs(kept),
            **kwargs,
        )

    def generate(
        self, model: Qwen3_5ForConditionalGeneration, pruned: PrunedSequence, kept: Sequence[Tensor], **kwargs: Any
    ) -> Any:
        """New token ids only (in `.sequences` with return_dict_in_generate).

        generate() extends the 4-row position_ids by last + 1 per step, which continues the full
        sequence's positions because the prompt always ends in kept text.
        """
        model.model.rope_deltas = pruned.rope_deltas
        out = model.generate(
            input_ids=pruned.input_ids,
            attention_mask=pruned.attention_mask,
            position_ids=pruned.position_ids,
            mm_encoder_outputs=self._encoder_outputs(kept),
            **kwargs,
        )
        prompt_width = pruned.input_ids.shape[1]
        if isinstance(out, Tensor):
            return out[:, prompt_width:]
        out.sequences = out.sequences[:, prompt_width:]
        return out

    def attention_layer(self, model: Qwen3_5ForConditionalGeneration) -> int:
        """The first full-attention LM layer: attention-score selectors must read softmax attention."""
        return model.config.text_config.layer_types.index("full_attention")

    def attention_signals(
        self, model: Qwen3_5ForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> dict[str, Tensor]:
        """Dense-context signals at the first full-attention layer L (no grad), per batch position.

        last_query_attention (B, S): last token's softmax attention, averaged over heads;
        key_states (B, S, KV*d): post-norm, post-rotary keys at L; hidden_states (B, S, D): the
        output of layer L (the input of layer L + 1).
        """
        return dense_attention_signals(
            model.model.language_model.layers, self.attention_layer(model),
            lambda: model(**_model_inputs(batch), output_hidden_states=True),
            batch["attention_mask"], apply_rotary_pos_emb, project_qk=_gated_qk,
        )

    def encoder_signals(
        self, model: Qwen3_5ForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> dict[str, tuple[Tensor, ...]]:
        """Vision-encoder attention received per merged token, one (N_i,) tensor per image.

        The encoder has no CLS token, so a patch's score is its softmax attention averaged over
        heads and over the image's queries; a merged token averages its merge_size^2 patches.
        'encoder_attention_object' reads the middle block ((depth - 1) // 2), 'encoder_attention_output'
        the last block.
        """
        visual = model.model.visual
        depth = len(visual.blocks)
        layers = {"encoder_attention_object": (depth - 1) // 2, "encoder_attention_output": depth - 1}
        captured: dict[str, tuple] = {}
        handles = [
            visual.blocks[idx].attn.register_forward_pre_hook(
                lambda _m, args, kwargs, name=name: captured.__setitem__(name, (args, kwargs)), with_kwargs=True
            )
            for name, idx in layers.items()
        ]
        try:
            with torch.no_grad():
                self.image_features(model, batch)
        finally:
            for handle in handles:
                handle.remove()
        unit = self.merge_size(model) ** 2
        out = {}
        with torch.no_grad():
            for name, idx in layers.items():
                args, kwargs = captured[name]
                attn = visual.blocks[idx].attn
                hidden = args[0] if args else kwargs["hidden_states"]
                cu_seqlens = kwargs["cu_seqlens"]
                q, k, _v = attn.qkv(hidden).reshape(hidden.shape[0], 3, attn.num_heads, -1).unbind(1)
                q, k = apply_rotary_pos_emb_vision(q, k, *kwargs["position_embeddings"])
                per_image = []
                for start, end in zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist()):
                    scores = torch.einsum("qhd,khd->hqk", q[start:end], k[start:end]) * attn.scaling
                    received = scores.softmax(-1).mean(dim=(0, 1))
                    per_image.append(received.view(-1, unit).mean(1))
                out[name] = tuple(per_image)
        return out


def _model_inputs(batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
    keys = ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw")
    return {key: batch[key] for key in keys if batch.get(key) is not None}


def _gated_qk(attn: Any, h: Tensor) -> tuple[Tensor, Tensor]:
    """Qwen3.5's full-attention q_proj also emits the output gate (dropped here); q and k are
    RMS-normed per head before the rotary embedding."""
    bsz, seq, _ = h.shape
    q, _gate = torch.chunk(attn.q_proj(h).view(bsz, seq, -1, attn.head_dim * 2), 2, dim=-1)
    q = attn.q_norm(q).transpose(1, 2)
    k = attn.k_norm(attn.k_proj(h).view(bsz, seq, -1, attn.head_dim)).transpose(1, 2)
    return q, k
