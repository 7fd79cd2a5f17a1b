"""Analytic KV cache and prefill FLOPs of a decoder LM from its HF-style config (Table 5, Table 11).

Units as in Appendix E: decimal (1 MB = 1e6 bytes, 1 TFLOP = 1e12 operations) and a
multiply-accumulate (MAC) counts as two operations.

What is counted (per prefill of ``L`` tokens through the language model only; the vision tower and
merger run on every visual token before selection, so they are the same for every budget and are
left out, as the paper's 0.146x ratio requires):

* projections: every linear layer of every decoder layer, L x in x out MACs. Full attention:
  q (x2 when the output gate is fused into q_proj, Qwen3.5), k, v, o. Linear attention (Gated
  DeltaNet): in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, plus the depthwise
  causal conv (conv_dim x kernel per token).
* attention: causal softmax attention, scores and weighted values: token i sees i + 1 keys, so
  2 x heads x head_dim x L(L + 1)/2 MACs per full-attention layer (the only quadratic term).
* linear recurrence: the gated delta rule in its recurrent form, per token and value head
  decay (dk x dv multiplies = 1/2 MAC each), S^T k, the rank-1 update k (x) delta and the
  read-out S^T q (dk x dv MACs each): 3.5 dk dv MACs. Chunked kernels reorder this work; the
  count is the algorithm's, not a kernel's.
* MLP: gate, up, down (3 x hidden x intermediate MACs per token).
* lm_head: optional ("none", "last" = the one position a prefill needs, or "all").

Not counted: norms, rotary embeddings, activations, softmax and gating element-wise work, biases
(additions, no MACs), embeddings (a lookup).

KV cache: full-attention layers hold 2 (K and V) x kv_heads x head_dim x bytes per token. Linear-
attention layers keep a fixed-size state whatever the sequence length -- the recurrent matrix
(value_heads x dk x dv, in ``mamba_ssm_dtype``, FP32 for Qwen3.5) and the conv window (conv_dim x
kernel, as transformers stores it) -- reported separately as ``state_bytes`` and NOT included in
``kv_bytes`` (the paper's KV figures scale with the kept tokens: 26.59 -> 3.93 MB is only possible
with the constant state left out).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MB = 1e6
TFLOP = 1e12
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "float64": 8}


def _get(cfg: Mapping[str, Any], *names: str, default: Any = None) -> Any:
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    return default


@dataclass(frozen=True)
class TextArch:
    """The language model's shape, read from an HF config (nested ``text_config`` or flat)."""

    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    layer_types: tuple[str, ...]
    attn_output_gate: bool = False
    linear_k_heads: int = 0
    linear_v_heads: int = 0
    linear_k_dim: int = 0
    linear_v_dim: int = 0
    conv_kernel: int = 0
    state_dtype: str = "float32"
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | Any, name: str = "") -> TextArch:
        """From a config dict (or a transformers config object). Layer kinds come from
        ``layer_types``, else from ``full_attention_interval`` (every n-th layer full), else all
        full attention."""
        cfg = config.to_dict() if hasattr(config, "to_dict") else dict(config)
        text = dict(cfg.get("text_config") or cfg)
        layers = int(text["num_hidden_layers"])
        types = text.get("layer_types")
        if not types:
            every = text.get("full_attention_interval")
            types = (["linear_attention"] * (every - 1) + ["full_attention"]) * (layers // every) if every \
                else ["full_attention"] * layers
        if len(types) != layers:
            raise ValueError(f"layer_types lists {len(types)} layers, num_hidden_layers is {layers}")
        unknown = set(types) - {"full_attention", "linear_attention"}
        if unknown:
            raise ValueError(f"unsupported layer types {sorted(unknown)}")
        heads = int(text["num_attention_heads"])
        return cls(
            hidden=int(text["hidden_size"]),
            intermediate=int(text["intermediate_size"]),
            vocab=int(text["vocab_size"]),
            heads=heads,
            kv_heads=int(_get(text, "num_key_value_heads", default=heads)),
            head_dim=int(_get(text, "head_dim", default=int(text["hidden_size"]) // heads)),
            layer_types=tuple(types),
            attn_output_gate=bool(text.get("attn_output_gate", text.get("model_type", "").startswith("qwen3_5"))),
            linear_k_heads=int(text.get("linear_num_key_heads") or 0),
            linear_v_heads=int(text.get("linear_num_value_heads") or 0),
            linear_k_dim=int(text.get("linear_key_head_dim") or 0),
            linear_v_dim=int(text.get("linear_value_head_dim") or 0),
            conv_kernel=int(text.get("linear_conv_kernel_dim") or 0),
            state_dtype=str(text.get("mamba_ssm_dtype") or "float32"),
            name=name or str(cfg.get("_name") or cfg.get("model_type") or ""),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> TextArch:
        cfg = json.loads(Path(path).read_text())
        return cls.from_config(cfg, name=cfg.get("_name") or Path(path).stem)

    @property
    def full_layers(self) -> int:
        return self.layer_types.count("full_attention")

    @property
    def linear_layers(self) -> int:
        return self.layer_types.count("linear_attention")

    @property
    def conv_dim(self) -> int:
        """Channels of the linear layers' causal conv: q, k (key dim each) and v (value dim)."""
        return 2 * self.linear_k_heads * self.linear_k_dim + self.linear_v_heads * self.linear_v_dim

    # -- per-token MACs of each part ------------------------------------------------------------
    def full_projection_macs(self) -> int:
        q_out = self.heads * self.head_dim * (2 if self.attn_output_gate else 1)
        kv_out = 2 * self.kv_heads * self.head_dim
        return self.hidden * (q_out + kv_out) + self.heads * self.head_dim * self.hidden

    def linear_projection_macs(self) -> int:
        value_dim = self.linear_v_heads * self.linear_v_dim
        outs = self.conv_dim + value_dim + 2 * self.linear_v_heads  # qkv, z, b, a
        return self.hidden * outs + value_dim * self.hidden + self.conv_dim * self.conv_kernel

    def linear_recurrence_macs(self) -> float:
        return 3.5 * self.linear_v_heads * self.linear_k_dim * self.linear_v_dim

    def mlp_macs(self) -> int:
        return 3 * self.hidden * self.intermediate


@dataclass(frozen=True)
class KVCache:
    tokens: float
    per_token_bytes: int  # all full-attention layers together
    kv_bytes: float  # tokens x per_token_bytes: what the paper's KV column measures
    state_bytes: int  # linear-attention layers: constant, independent of the tokens

    @property
    def kv_mb(self) -> float:
        return self.kv_bytes / MB

    @property
    def state_mb(self) -> float:
        return self.state_bytes / MB


def kv_cache(arch: TextArch, tokens: float, bytes_per_element: int = 2, state_bytes_per_element: int | None = None,
             conv_bytes_per_element: int | None = None) -> KVCache:
    """KV cache after ``tokens`` tokens (BF16 by default, as Appendix E). The linear layers'
    recurrent state uses ``state_bytes_per_element`` (default: the config's mamba_ssm_dtype) and
    their conv window ``conv_bytes_per_element`` (default: the KV element size)."""
    per_token = arch.full_layers * 2 * arch.kv_heads * arch.head_dim * bytes_per_element
    s_bytes = DTYPE_BYTES[arch.state_dtype] if state_bytes_per_element is None else state_bytes_per_element
    c_bytes = bytes_per_element if conv_bytes_per_element is None else conv_bytes_per_element
    recurrent = arch.linear_v_heads * arch.linear_k_dim * arch.linear_v_dim * s_bytes
    conv = arch.conv_dim * arch.conv_kernel * c_bytes
    return KVCache(tokens, per_token, tokens * per_token, arch.linear_layers * (recurrent + conv))


@dataclass(frozen=True)
class PrefillFlops:
    """Operations (2 per MAC) of one prefill, by part."""

    tokens: float
    projections: float
    attention: float
    linear_recurrence: float
    mlp: float
    lm_head: float

    @property
    def total(self) -> float:
        return self.projections + self.attention + self.linear_recurrence + self.mlp + self.lm_head

    @property
    def tflops(self) -> float:
        return self.total / TFLOP

    def as_dict(self) -> dict[str, float]:
        return {"tokens": self.tokens, "projections": self.projections, "attention": self.attention,
                "linear_recurrence": self.linear_recurrence, "mlp": self.mlp, "lm_head": self.lm_head,
                "total": self.total}


def prefill_flops(arch: TextArch, tokens: float, lm_head: str = "last", causal: bool = True,
                  reduced_tokens: float | None = None, prune_layer: int = 0) -> PrefillFlops:
    """FLOPs of a prefill of ``tokens`` tokens (module docstring: what is counted).

    ``causal=False`` counts every query against every key (L^2 instead of L(L+1)/2), the
    convention of counters that ignore the mask. With ``reduced_tokens``, layers from
    ``prune_layer`` on see only that many tokens (pruning inside the LM, e.g. EPIC/FastV at
    layer 2); the default prune_layer 0 is pruning before the LM (LT-OPD, CDPruner, HiPrune).
    """
    if lm_head not in ("none", "last", "all"):
        raise ValueError(f"lm_head must be 'none', 'last' or 'all', got {lm_head!r}")
    if not 0 <= prune_layer <= len(arch.layer_types):
        raise ValueError(f"prune_layer {prune_layer} outside 0..{len(arch.layer_types)}")
    proj = attn = rec = mlp = 0.0
    for i, kind in enumerate(arch.layer_types):
        L = float(tokens if reduced_tokens is None or i < prune_layer else reduced_tokens)
        if kind == "full_attention":
            proj += L * arch.full_projection_macs()
            pairs = L * (L + 1) / 2 if causal else L * L
            attn += 2 * arch.heads * arch.head_dim * pairs
        else:
            proj += L * arch.linear_projection_macs()
            rec += L * arch.linear_recurrence_macs()
        mlp += L * arch.mlp_macs()
    last = float(tokens if reduced_tokens is None else reduced_tokens)
    head_rows = {"none": 0.0, "last": min(last, 1.0), "all": last}[lm_head]
    head = head_rows * arch.hidden * arch.vocab
    return PrefillFlops(last, 2 * proj, 2 * attn, 2 * rec, 2 * mlp, 2 * head)


def keep_count(n: float, ratio: float, floor: int) -> int:
    """Visual tokens kept of ``n`` at ``ratio``: min(n, max(floor, ceil(n x ratio))) (the hook's rule)."""
    n = int(round(n))
    return min(n, max(floor, math.ceil(n * ratio - 1e-9)))


@dataclass(frozen=True)
class ProtocolTokens:
    """Mean prompt tokens of the measured questions: text (everything but the image) and visual."""

    text: float
    visual: float

    def total(self, kept: float | None = None) -> float:
        return self.text + (self.visual if kept is None else kept)


def tokens_from_kv(arch: TextArch, kv_full_mb: float, kv_reduced_mb: float, ratio: float, floor: int,
                   bytes_per_element: int = 2) -> tuple[ProtocolTokens, int]:
    """Invert the KV formula: the (text, visual) token means and the kept count that give the
    reported full and reduced KV sizes (the paper does not state its token counts).

    full = text + visual and reduced = text + keep_count(visual), solved by iterating on the
    integer kept count (it depends on visual only through a ceil)."""
    per_token = kv_cache(arch, 1, bytes_per_element).per_token_bytes
    full, reduced = kv_full_mb * MB / per_token, kv_reduced_mb * MB / per_token
    kept = 0
    for _ in range(50):
        visual = (full - reduced) + kept
        new = keep_count(visual, ratio, floor)
        if new == kept:
            break
        kept = new
    return ProtocolTokens(text=full - visual, visual=visual), kept


def load_arch(path: str | Path) -> TextArch:
    return TextArch.from_file(path)
