"""LLaVA-OneVision family operations (LlavaOnevisionForConditionalGeneration: SigLIP + 2-layer
MLP projector + Qwen2), the stand-in for the paper's LLaVA-OV-1.5.

transformers has no LLaVA-OV-1.5 class (no RICE-ViT encoder, no 2x2 patch merger); llava_onevision
is the same family's 1.0 design with the same LLaVA-style interface and a Qwen2 language model
with 1-D RoPE, as LLaVA-OV-1.5's Qwen3 LM has. What differs: SigLIP with learned absolute
positions instead of RICE-ViT's 2-D RoPE at native resolution, an MLP projector on every patch
instead of a 2x2 merger, and anyres tiles with per-row newline tokens.

Layout under pruning: every image is ONE base tile (the whole image resized to the tower's
square input; no anyres crops) giving a side x side grid of projected patch tokens, followed by
one `image_newline` token -- LLaVA-OneVision's own layout for multi-image inputs, and the closest
to OV-1.5's one-grid-per-image. Selectors choose among the grid tokens only; the newline is a
learned separator (like `<|vision_end|>`), so it is always kept (`trailing_placeholders = 1`)
and never counts against the budget. Positions are 1-D: kept tokens keep their full-sequence
position, text positions keep the gaps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from transformers import LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.models.qwen2.modeling_qwen2 import apply_rotary_pos_emb

from ltopd.models.hook import ConfigTokenIds, PrunedSequence, dense_attention_signals

# FastV / DART read the attention of layer K - 1 with K = 2 (0-based index 1).
SIGNAL_LAYER = 1


class LlavaOVOps(ConfigTokenIds):
    """FamilyOps for LlavaOnevisionForConditionalGeneration with one base tile per image."""

    model_type = "llava_onevision"
    config_class = LlavaOnevisionConfig
    model_class = LlavaOnevisionForConditionalGeneration
    trailing_placeholders = 1

    def mrope_positions(self, model: LlavaOnevisionForConditionalGeneration, batch: Mapping[str, Tensor]) -> Tensor:
        """The 1-D positions (0.. over real tokens, 0 on padding) repeated on 3 rows, the hook's format."""
        mask = batch["attention_mask"].long()
        text = (mask.cumsum(-1) - 1).clamp_min(0) * mask
        return text.unsqueeze(0).expand(3, -1, -1).clone()

    def image_features(
        self, model: LlavaOnevisionForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, ...]:
        """Projected grid features of each base tile, one (side^2, D) tensor per image (no newline).

        The single-tile branch of LlavaOnevisionModel.get_image_features, whose anyres branch
        cannot be switched off for single-image samples.
        """
        if batch.get("pixel_values") is None:
            return ()
        config = model.config
        if config.vision_feature_select_strategy != "full":
            raise ValueError("only vision_feature_select_strategy='full' keeps the square patch grid selectors need")
        tower = model.model.vision_tower
        pixels = batch["pixel_values"]
        # a smaller tile (the downsampling control, ltopd.models.downsample): positions interpolated
        out = tower(pixels.to(tower.dtype), output_hidden_states=True,
                    interpolate_pos_encoding=pixels.shape[-1] != int(config.vision_config.image_size))
        layer = config.vision_feature_layer
        if isinstance(layer, int):
            hidden = out.hidden_states[layer]
        else:
            hidden = torch.cat([out.hidden_states[i] for i in layer], dim=-1)
        return tuple(model.model.multi_modal_projector(hidden))

    def grid_hw(
        self, model: LlavaOnevisionForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> list[tuple[int, int]]:
        if batch.get("pixel_values") is None:
            return []
        side = batch["pixel_values"].shape[-1] // int(model.config.vision_config.patch_size)  # the tile's own grid
        return [(side, side)] * batch["pixel_values"].shape[0]

    def embed(self, model: LlavaOnevisionForConditionalGeneration, ids: Tensor) -> Tensor:
        return model.get_input_embeddings()(ids)

    def with_newline(self, model: LlavaOnevisionForConditionalGeneration, kept: Sequence[Tensor]) -> tuple[Tensor, ...]:
        """Each image's kept features followed by the learned newline (gradients reach it too)."""
        newline = model.model.image_newline
        return tuple(torch.cat([k, newline[None].to(k)]) for k in kept)

    def _encoder_outputs(
        self, model: LlavaOnevisionForConditionalGeneration, kept: Sequence[Tensor]
    ) -> dict[str, BaseModelOutputWithPooling] | None:
        return {"image": BaseModelOutputWithPooling(pooler_output=self.with_newline(model, kept))} if kept else None

    def forward(
        self, model: LlavaOnevisionForConditionalGeneration, pruned: PrunedSequence, kept: Sequence[Tensor],
        **kwargs: Any,
    ) -> Any:
        # Row 1 of the hook's positions holds each kept token's full-sequence 1-D position.
        return model(
            input_ids=pruned.input_ids,
            attention_mask=pruned.attention_mask,
            position_ids=pruned.position_ids[1],
            labels=pruned.labels,
            mm_encoder_outputs=self._encoder_outputs(model, kept),
            **kwargs,
        )

    def generate(
        self, model: LlavaOnevisionForConditionalGeneration, pruned: PrunedSequence, kept: Sequence[Tensor],
        **kwargs: Any,
    ) -> Any:
        """New token ids only (in `.sequences` with return_dict_in_generate).

        generate() extends the explicit position_ids by last + 1 per step, which continues the
        full sequence's positions because the prompt always ends in kept text.
        """
        out = model.generate(
            input_ids=pruned.input_ids,
            attention_mask=pruned.attention_mask,
            position_ids=pruned.position_ids[1],
            mm_encoder_outputs=self._encoder_outputs(model, kept),
            **kwargs,
        )
        prompt_width = pruned.input_ids.shape[1]
        if isinstance(out, Tensor):
            return out[:, prompt_width:]
        out.sequences = out.sequences[:, prompt_width:]
        return out

    def attention_layer(self, model: LlavaOnevisionForConditionalGeneration) -> int:
        """Every Qwen2 layer is full attention: read layer SIGNAL_LAYER (the last one in shallower LMs)."""
        return min(SIGNAL_LAYER, model.config.text_config.num_hidden_layers - 1)

    def attention_signals(
        self, model: LlavaOnevisionForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> dict[str, Tensor]:
        """See hook.dense_attention_signals; the dense context keeps every grid token."""
        positions = self.mrope_positions(model, batch)[0]
        features = self.image_features(model, batch)

        def run() -> Any:
            return model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                position_ids=positions,
                mm_encoder_outputs=self._encoder_outputs(model, features),
                output_hidden_states=True,
            )

        layers = model.model.language_model.layers
        return dense_attention_signals(
            layers, self.attention_layer(model), run, batch["attention_mask"], apply_rotary_pos_emb
        )

    def encoder_signals(
        self, model: LlavaOnevisionForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> dict[str, tuple[Tensor, ...]]:
        """SigLIP attention received per grid token, one (side^2,) tensor per image.

        SigLIP has no CLS token: a patch's score is its softmax attention averaged over heads and
        over the tile's queries (no merger, so one patch is one token). 'encoder_attention_object'
        reads the middle layer ((depth - 1) // 2), 'encoder_attention_output' the last.
        """
        encoder_layers = model.model.vision_tower.encoder.layers
        depth = len(encoder_layers)
        picks = {"encoder_attention_object": (depth - 1) // 2, "encoder_attention_output": depth - 1}
        captured: dict[str, Tensor] = {}
        handles = [
            encoder_layers[idx].self_attn.register_forward_pre_hook(
                lambda _m, args, kwargs, name=name: captured.__setitem__(
                    name, args[0] if args else kwargs["hidden_states"]
                ),
                with_kwargs=True,
            )
            for name, idx in picks.items()
        ]
        try:
            with torch.no_grad():
                self.image_features(model, batch)
        finally:
            for handle in handles:
                handle.remove()
        out = {}
        with torch.no_grad():
            for name, idx in picks.items():
                attn = encoder_layers[idx].self_attn
                hidden = captured[name]
                n_images, seq, _ = hidden.shape
                q = attn.q_proj(hidden).view(n_images, seq, attn.num_heads, attn.head_dim).transpose(1, 2)
                k = attn.k_proj(hidden).view(n_images, seq, attn.num_heads, attn.head_dim).transpose(1, 2)
                received = (q @ k.transpose(-1, -2) * attn.scale).softmax(-1).mean(dim=(1, 2))
                out[name] = tuple(received)
        return out
