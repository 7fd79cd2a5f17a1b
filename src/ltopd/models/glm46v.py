"""GLM-4.6V family operations (Glm46VForConditionalGeneration with glm4v sub-models).

GLM-4.xV keeps Qwen2-VL's multimodal interface: M-RoPE positions from get_rope_index over
mm_token_type_ids, per-image post-merger features from get_image_features, 4-row position_ids
(text row + t/h/w) and rope_deltas for decoding, mm_encoder_outputs for precomputed features.
So the Qwen3.5 operations apply unchanged; what differs is the language model (all layers full
attention, GLM's partial interleaved rotary, bias on q/k/v) and hence the attention signals.
Its vision blocks have the same fused-qkv attention and 2-D rotary as Qwen's, so the encoder
signals are inherited too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor
from transformers import Glm46VConfig, Glm46VForConditionalGeneration
from transformers.models.glm4v.modeling_glm4v import apply_rotary_pos_emb

from ltopd.models.hook import dense_attention_signals
from ltopd.models.qwen35 import Qwen35Ops, _model_inputs

# FastV / DART read the attention of layer K - 1 with K = 2 (0-based index 1).
SIGNAL_LAYER = 1


class Glm46VOps(Qwen35Ops):
    """FamilyOps for Glm46VForConditionalGeneration (image inputs; t = 1 per image)."""

    model_type = "glm46v"
    config_class = Glm46VConfig
    model_class = Glm46VForConditionalGeneration

    def attention_layer(self, model: Glm46VForConditionalGeneration) -> int:
        """Every GLM layer is full attention: read layer SIGNAL_LAYER (the last one in shallower LMs)."""
        return min(SIGNAL_LAYER, model.config.text_config.num_hidden_layers - 1)

    def attention_signals(
        self, model: Glm46VForConditionalGeneration, batch: Mapping[str, Tensor]
    ) -> dict[str, Tensor]:
        """See hook.dense_attention_signals; the dense context is the model's own unpruned forward."""

        def run() -> Any:
            return model(**_model_inputs(batch), output_hidden_states=True)

        layers = model.model.language_model.layers
        return dense_attention_signals(
            layers, self.attention_layer(model), run, batch["attention_mask"], apply_rotary_pos_emb
        )
