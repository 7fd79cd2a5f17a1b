"""The visual-token reduction hook between the visual merger and the language model.

No library patching: positions are computed on the FULL sequence, the unkept image placeholders are
dropped from the token tensors together with their position columns, and the model runs with the
explicit positions and only the kept post-merger features. So kept tokens keep their original
3-D rotary coordinates, text positions keep their gaps, and decoded tokens continue from the full
sequence's positions.

A `Selection` records the kept indices per image; a later forward can replay it exactly (rollout
prefill -> training forward sees the same context).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from ltopd.selectors import SelectionInputs, keep_count, select

IGNORE_INDEX = -100
# A selector is a registry name or a callable with select()'s (inputs, k) -> indices contract.
SelectorLike = str | Callable[[SelectionInputs, int], Tensor]
# (all features per image, kept indices per image) -> the tokens the LM reads per image.
Compressor = Callable[[Sequence[Tensor], Sequence[Tensor]], tuple[Tensor, ...]]


def check_ratio(ratio: float) -> float:
    """The keep ratio must lie in (0, 1]; anything else is a configuration error."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 < float(ratio) <= 1.0:
        raise ValueError(f"visual-token keep ratio {ratio!r} is outside (0, 1]")
    return float(ratio)


@dataclass(frozen=True)
class Selection:
    """Kept post-merger token indices per image (images in batch row order), sorted ascending.

    ``groups`` and ``priors`` (optional, per image, both (N,)): the route of every token to a kept
    token's group (its slot in ``kept``; a kept token is its own group's anchor) and its detached
    prior weight in that group (0 for the anchors). A module that merges the discarded tokens into
    the kept ones (ltopd.models.learnable_merge) computes them with the selection, at a rollout's
    prefill, and every later forward replays them with it."""

    kept: tuple[Tensor, ...]
    n_tokens: tuple[int, ...]
    groups: tuple[Tensor, ...] | None = None
    priors: tuple[Tensor, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.kept) != len(self.n_tokens):
            raise ValueError(f"{len(self.kept)} index sets for {len(self.n_tokens)} images")
        for i, (idx, n) in enumerate(zip(self.kept, self.n_tokens)):
            ok = idx.ndim == 1 and idx.numel() >= 1 and int(idx.min()) >= 0 and int(idx.max()) < n
            if not ok or (idx[1:] <= idx[:-1]).any():
                raise ValueError(f"image {i}: kept indices must be sorted, unique and within [0, {n})")
        if (self.groups is None) != (self.priors is None):
            raise ValueError("a selection's routes need both groups and priors")
        if self.groups is not None:
            for name, per in (("groups", self.groups), ("priors", self.priors)):
                if len(per) != len(self.kept) or any(t.shape != (n,) for t, n in zip(per, self.n_tokens)):
                    raise ValueError(f"{name}: one (N,) tensor per image, N = {self.n_tokens}")

    @property
    def routed(self) -> bool:
        """Whether the selection carries its tokens' routes (groups and priors)."""
        return self.groups is not None

    def part(self, images: slice) -> Selection:
        """The selection of ``images`` (a slice of the batch's images), routes included."""
        cut = None if self.groups is None else self.groups[images]
        return Selection(self.kept[images], self.n_tokens[images], cut,
                         None if self.priors is None else self.priors[images])

    @classmethod
    def concat(cls, selections: Sequence[Selection]) -> Selection:
        """The selections of consecutive batches as one (routes kept where every part has them)."""
        routed = bool(selections) and all(s.routed for s in selections)
        return cls(tuple(k for s in selections for k in s.kept), tuple(n for s in selections for n in s.n_tokens),
                   tuple(g for s in selections for g in s.groups) if routed else None,
                   tuple(p for s in selections for p in s.priors) if routed else None)

    @classmethod
    def full(cls, n_tokens: Sequence[int]) -> Selection:
        """Keep every token (the dense teacher's context)."""
        return cls(tuple(torch.arange(n) for n in n_tokens), tuple(int(n) for n in n_tokens))

    def keep_mask(self) -> Tensor:
        """Bool mask over all images' tokens concatenated, True where kept."""
        parts = []
        for idx, n in zip(self.kept, self.n_tokens):
            mask = torch.zeros(n, dtype=torch.bool)
            mask[idx.cpu()] = True
            parts.append(mask)
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool)

    def apply(self, features: Sequence[Tensor]) -> tuple[Tensor, ...]:
        """The kept rows of each image's (N, D) features (differentiable)."""
        sizes = [f.shape[0] for f in features]
        if sizes != list(self.n_tokens):
            raise ValueError(f"features have {sizes} tokens, selection expects {self.n_tokens}")
        return tuple(f[idx.to(f.device)] for f, idx in zip(features, self.kept))

    def to_lists(self) -> dict[str, list]:
        """Plain-Python form for storing next to a rollout (routes included when it has them)."""
        out: dict[str, list] = {"kept": [idx.tolist() for idx in self.kept], "n_tokens": list(self.n_tokens)}
        if self.groups is not None and self.priors is not None:
            out.update(groups=[g.tolist() for g in self.groups], priors=[p.tolist() for p in self.priors])
        return out

    @classmethod
    def from_lists(cls, data: dict[str, list]) -> Selection:
        routes = {}
        if "groups" in data:  # float32 priors survive the round trip through Python floats exactly
            routes = {"groups": tuple(torch.tensor(g, dtype=torch.long) for g in data["groups"]),
                      "priors": tuple(torch.tensor(p, dtype=torch.float32) for p in data["priors"])}
        return cls(tuple(torch.tensor(k, dtype=torch.long) for k in data["kept"]), tuple(data["n_tokens"]), **routes)


def choose(
    inputs: Sequence[SelectionInputs], ratio: float, selector: SelectorLike, floor: int
) -> Selection:
    """Run `selector` on each image with budget keep_count(N, ratio, floor)."""
    ratio = check_ratio(ratio)
    kept, sizes = [], []
    for item in inputs:
        n = int(item.features.shape[0])
        k = keep_count(n, ratio, floor)
        idx = select(selector, item, k) if isinstance(selector, str) else selector(item, k)
        kept.append(torch.sort(idx.detach().long().cpu()).values)
        sizes.append(n)
    return Selection(tuple(kept), tuple(sizes))


@dataclass(frozen=True)
class PrunedSequence:
    """Token tensors with the unkept image placeholders removed, re-left-padded.

    position_ids is (4, B, S'): row 0 the text positions used for masking (0.. over the kept
    tokens), rows 1-3 the full sequence's (t, h, w) M-RoPE coordinates of the kept tokens.
    rope_deltas (B, 1) make `next index + delta` the full sequence's next position.
    """

    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    rope_deltas: Tensor
    labels: Tensor | None


def prune_sequence(
    input_ids: Tensor,
    attention_mask: Tensor,
    mrope_positions: Tensor,
    image_token_id: int,
    image_keep: Tensor,
    pad_token_id: int,
    labels: Tensor | None = None,
) -> PrunedSequence:
    """Drop unkept image placeholders and padding, then left-pad again (common padding vanishes).

    mrope_positions (3, B, S) are the full sequence's positions; image_keep is a bool over all
    image placeholders in row-major order (the order the model scatters features in).
    """
    is_image = input_ids == image_token_id
    if int(is_image.sum()) != image_keep.numel():
        raise ValueError(f"{int(is_image.sum())} image placeholders but a keep mask over {image_keep.numel()} tokens")
    keep = attention_mask.bool().clone()
    keep[is_image] &= image_keep.to(keep.device)
    lengths = keep.sum(1)
    width = int(lengths.max())
    batch = input_ids.shape[0]
    # Left-aligned gather: row b's kept columns, shifted so the last kept token sits at column width-1.
    order = torch.argsort(keep.int(), dim=1, stable=True)  # unkept first, kept in original order after
    cols = order[:, order.shape[1] - width :]
    new_mask = (torch.arange(width, device=keep.device).unsqueeze(0) >= (width - lengths).unsqueeze(1)).long()
    new_ids = torch.where(new_mask.bool(), input_ids.gather(1, cols), torch.full_like(cols, pad_token_id))
    rope = mrope_positions.gather(2, cols.unsqueeze(0).expand(3, -1, -1)) * new_mask.unsqueeze(0)
    text_row = (new_mask.cumsum(1) - 1).clamp_min(0) * new_mask
    position_ids = torch.cat([text_row.unsqueeze(0), rope], dim=0)
    full_max = mrope_positions.masked_fill(~attention_mask.bool().unsqueeze(0), -1).amax(dim=(0, 2))
    rope_deltas = (full_max + 1 - lengths).view(batch, 1)
    new_labels = None
    if labels is not None:
        new_labels = torch.where(new_mask.bool(), labels.gather(1, cols), torch.full_like(cols, IGNORE_INDEX))
    return PrunedSequence(new_ids, new_mask, position_ids, rope_deltas, new_labels)


class FamilyOps(Protocol):
    """What the hook needs from a model family (see ltopd.models.qwen35 for Qwen3.5).

    A family may also set `trailing_placeholders` (default 0): placeholders after each image's
    selectable tokens that are always kept (LLaVA-OneVision's image_newline token).
    """

    def image_token_id(self, model: Any) -> int: ...

    def pad_token_id(self, model: Any) -> int: ...

    def mrope_positions(self, model: Any, batch: Mapping[str, Tensor]) -> Tensor: ...

    def image_features(self, model: Any, batch: Mapping[str, Tensor]) -> tuple[Tensor, ...]: ...

    def forward(self, model: Any, pruned: PrunedSequence, kept: Sequence[Tensor], **kwargs: Any) -> Any: ...

    def generate(self, model: Any, pruned: PrunedSequence, kept: Sequence[Tensor], **kwargs: Any) -> Any: ...


def trailing_placeholders(ops: FamilyOps) -> int:
    return int(getattr(ops, "trailing_placeholders", 0))


def placeholder_keep(selection: Selection, trailing: int = 0) -> Tensor:
    """Bool mask over every image placeholder: per image its selection, then `trailing` Trues."""
    if not trailing:
        return selection.keep_mask()
    parts = []
    for idx, n in zip(selection.kept, selection.n_tokens):
        mask = torch.ones(n + trailing, dtype=torch.bool)
        mask[:n] = False
        mask[idx.cpu()] = True
        parts.append(mask)
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.bool)


class ConfigTokenIds:
    """Image placeholder and pad ids as every supported family's config stores them."""

    def image_token_id(self, model: Any) -> int:
        return int(model.config.image_token_id)

    def pad_token_id(self, model: Any) -> int:
        pad = model.config.text_config.pad_token_id
        return 0 if pad is None else int(pad)


def plain_qk(attn: Any, h: Tensor) -> tuple[Tensor, Tensor]:
    """Pre-rotary queries and keys (B, heads, S, d) of a plain q_proj/k_proj attention block."""
    bsz, seq, _ = h.shape
    q = attn.q_proj(h).view(bsz, seq, -1, attn.head_dim).transpose(1, 2)
    k = attn.k_proj(h).view(bsz, seq, -1, attn.head_dim).transpose(1, 2)
    return q, k


def dense_attention_signals(
    layers: Sequence[Any],
    layer_idx: int,
    run: Callable[[], Any],
    attention_mask: Tensor,
    rotary: Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor]],
    project_qk: Callable[[Any, Tensor], tuple[Tensor, Tensor]] | None = None,
) -> dict[str, Tensor]:
    """Selector signals at LM layer `layer_idx` (plain q_proj/k_proj softmax attention) of the dense
    context that `run()` forwards with output_hidden_states (no grad), per batch position.

    last_query_attention (B, S): the last token's softmax attention, averaged over heads;
    key_states (B, S, KV*d): post-rotary keys; hidden_states (B, S, D): the layer's output.
    """
    layer = layers[layer_idx]
    captured: dict[str, Any] = {}

    def grab(_module: Any, args: tuple, kwargs: dict) -> None:
        captured["hidden"] = args[0] if args else kwargs["hidden_states"]
        captured["rope"] = kwargs["position_embeddings"]

    handle = layer.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            out = run()
    finally:
        handle.remove()
    with torch.no_grad():
        attn = layer.self_attn
        h = layer.input_layernorm(captured["hidden"])
        bsz, seq, _ = h.shape
        q, k = (project_qk or plain_qk)(attn, h)
        q, k = rotary(q, k, *captured["rope"])
        k_rep = k.repeat_interleave(attn.num_key_value_groups, dim=1)
        scores = torch.einsum("bhd,bhsd->bhs", q[:, :, -1], k_rep) * attn.scaling
        scores = scores.masked_fill(~attention_mask.bool().unsqueeze(1), float("-inf"))
    return {
        "last_query_attention": scores.softmax(-1).mean(1),
        "key_states": k.transpose(1, 2).reshape(bsz, seq, -1),
        "hidden_states": out.hidden_states[layer_idx + 1],
    }


def reduce(
    ops: FamilyOps,
    model: Any,
    batch: Mapping[str, Tensor],
    selection: Selection,
    labels: Tensor | None = None,
    features: Sequence[Tensor] | None = None,
    compress: Compressor | None = None,
) -> tuple[PrunedSequence, tuple[Tensor, ...]]:
    """Pruned token tensors and the kept features for `selection` (features computed if not
    given); ``compress`` replaces the kept rows by tokens computed from every feature (LLaVA-Mini)."""
    features = ops.image_features(model, batch) if features is None else tuple(features)
    kept = selection.apply(features) if compress is None else compress(features, selection.kept)
    with torch.no_grad():
        positions = ops.mrope_positions(model, batch)
    pruned = prune_sequence(
        batch["input_ids"],
        batch["attention_mask"],
        positions,
        ops.image_token_id(model),
        placeholder_keep(selection, trailing_placeholders(ops)),
        ops.pad_token_id(model),
        labels,
    )
    return pruned, kept


def reduced_forward(
    ops: FamilyOps,
    model: Any,
    batch: Mapping[str, Tensor],
    selection: Selection,
    labels: Tensor | None = None,
    features: Sequence[Tensor] | None = None,
    compress: Compressor | None = None,
    **kwargs: Any,
) -> tuple[Any, PrunedSequence]:
    """Forward on the reduced context (gradients flow to LM, merger and vision tower).

    Returns the model output and the pruned sequence (its attention_mask says which output
    columns are real; response tokens sit at the right end exactly as in the input).
    """
    pruned, kept = reduce(ops, model, batch, selection, labels, features, compress)
    return ops.forward(model, pruned, kept, **kwargs), pruned


def reduced_generate(
    ops: FamilyOps,
    model: Any,
    batch: Mapping[str, Tensor],
    selection: Selection,
    features: Sequence[Tensor] | None = None,
    compress: Compressor | None = None,
    **generate_kwargs: Any,
) -> Any:
    """Generated token ids (B, new) after prefilling the reduced context (or generate's output
    object, its sequences cropped the same way, with return_dict_in_generate)."""
    pruned, kept = reduce(ops, model, batch, selection, None, features, compress)
    return ops.generate(model, pruned, kept, **generate_kwargs)
