"""LLaVA-Mini (Zhang et al. 2025c) on any backbone here: modality pre-fusion + visual compression.

LLaVA-Mini feeds the language model a handful of compressed visual tokens and text tokens that
have already absorbed the image in a few pre-fusion transformer layers. Reproduced on the
reduction hook, at the profile's budget:

* compression: each image's K = keep_count(N, budget, floor) output tokens sit at the positions
  the training selector keeps (so they carry real rotary coordinates); token j is a learned
  cross-attention of its anchor over all N post-merger tokens of the image (query = W_q(anchor +
  q0), keys W_k(tokens), values the tokens).
* pre-fusion: ``fusion_layers`` transformer blocks over [all N visual tokens of the row ; the
  prompt's text embeddings]; their text outputs replace the text embeddings the language model
  reads. Response and generated tokens are not fused (the prompt is fused once, at prefill).

Both enter through zero-initialised tanh gates, so training starts exactly from the pruned
student (adaptation: LLaVA-Mini initialises pre-fusion from LM layers and trains in two stages).
The module lives at ``model.llava_mini`` (the optimiser and checkpoints see it) and is saved
beside the checkpoint as ``llava_mini.json`` + ``llava_mini.safetensors``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

NAME = "llava_mini"
CONFIG_FILE, WEIGHTS_FILE = "llava_mini.json", "llava_mini.safetensors"


@dataclass(frozen=True)
class LlavaMiniConfig:
    fusion_layers: int = 1
    heads: int = 4
    lr: float = 1e-3  # the new module's learning rate (trained from scratch; the backbone keeps `training.lr`)

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> LlavaMiniConfig:
        from ltopd.sections import from_section

        return from_section(cls, "llava_mini", section)


class LlavaMini(nn.Module):
    def __init__(self, hidden: int, cfg: LlavaMiniConfig):
        super().__init__()
        if hidden % cfg.heads:
            raise ValueError(f"llava_mini.heads {cfg.heads} must divide the LM width {hidden}")
        self.cfg, self.hidden = cfg, hidden
        self.query = nn.Parameter(torch.zeros(hidden))
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.compress_gate = nn.Parameter(torch.zeros(()))
        self.fusion = nn.ModuleList(
            nn.TransformerEncoderLayer(hidden, cfg.heads, dim_feedforward=2 * hidden, dropout=0.0, batch_first=True,
                                       norm_first=True) for _ in range(cfg.fusion_layers))
        self.fusion_gate = nn.Parameter(torch.zeros(()))
        self._context: dict[str, Any] | None = None
        self._hook: Any = None  # the embedding hook's handle (attach)

    # -- compression ----------------------------------------------------------------------------
    def compress(self, features: Sequence[Tensor], kept: Sequence[Tensor]) -> tuple[Tensor, ...]:
        """Per image (N, D) features and its kept indices (K,) -> (K, D) compressed tokens."""
        out = []
        for f, idx in zip(features, kept):
            anchor = f[idx.to(f.device)]
            q = self.q_proj(anchor + self.query.to(f.dtype))
            attn = torch.softmax(q @ self.k_proj(f).T / self.hidden ** 0.5, dim=-1)
            out.append(anchor + torch.tanh(self.compress_gate) * (attn @ f - anchor))
        return tuple(out)

    # -- pre-fusion -----------------------------------------------------------------------------
    def fuse(self, visual: Tensor, text: Tensor) -> Tensor:
        """Text embeddings (L, D) after attending, with the row's visual tokens (N, D), through
        the fusion blocks (gated residual)."""
        x = torch.cat([visual, text]).unsqueeze(0)
        for block in self.fusion:
            x = block(x)
        return text + torch.tanh(self.fusion_gate) * (x[0, visual.shape[0]:] - text)

    @contextmanager
    def fusing(self, row_visual: Sequence[Tensor], response_lengths: Sequence[int], skip_ids: Sequence[int]
               ) -> Iterator[None]:
        """Arm the embedding hook for the next full-sequence embedding call (the forward or the
        generation prefill): rows' text tokens (not ``skip_ids``, not the last
        ``response_lengths[b]`` columns) are fused with ``row_visual[b]``."""
        self._context = {"visual": list(row_visual), "responses": list(response_lengths), "skip": list(skip_ids)}
        try:
            yield
        finally:
            self._context = None

    def embedding_hook(self, _module: nn.Module, args: tuple, output: Tensor) -> Tensor | None:
        ctx, self._context = self._context, None  # one-shot: decode steps embed without fusion
        if ctx is None:
            return None
        ids = args[0]
        if ids.dim() != 2 or ids.shape[0] != len(ctx["visual"]):
            raise RuntimeError(f"llava_mini: embedding call of shape {tuple(ids.shape)} does not match the "
                               f"{len(ctx['visual'])} armed rows")
        text = ~torch.isin(ids, torch.tensor(ctx["skip"], device=ids.device))
        width = ids.shape[1]
        rows = []
        for b in range(ids.shape[0]):
            mask = text[b].clone()
            if ctx["responses"][b]:
                mask[width - ctx["responses"][b]:] = False
            row = output[b]
            if mask.any() and ctx["visual"][b].numel():
                row = row.clone()
                row[mask] = self.fuse(ctx["visual"][b].to(row.dtype), output[b][mask])
            rows.append(row)
        return torch.stack(rows)


def adapter_of(model: Any) -> LlavaMini | None:
    """The module of ``model`` (looked up through a DDP/FSDP wrapper's ``module``)."""
    return getattr(getattr(model, "module", model), "llava_mini", None)


module_of = adapter_of  # the name every student module (ltopd.models.addons) answers to


def attach(model: Any, cfg: LlavaMiniConfig, state: dict[str, Tensor] | None = None) -> LlavaMini:
    """Add a LLaVA-Mini module to ``model`` (as ``model.llava_mini``) and hook its embeddings."""
    if adapter_of(model) is not None:
        raise ValueError("model already has a llava_mini module")
    hidden = model.get_input_embeddings().embedding_dim
    mini = LlavaMini(hidden, cfg).to(device=model.device, dtype=model.get_input_embeddings().weight.dtype)
    if state is not None:
        mini.load_state_dict(state)
    model.add_module("llava_mini", mini)
    mini._hook = model.get_input_embeddings().register_forward_hook(mini.embedding_hook)
    return mini


def attach_section(model: Any, section: dict[str, Any] | None, seed: int = 0) -> LlavaMini:
    """attach() with the profile's ``llava_mini`` section, its random init drawn from ``seed``
    (the global RNG left alone)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return attach(model, LlavaMiniConfig.from_section(section))


def remove(model: Any) -> None:
    """Take the module and its embedding hook off ``model``."""
    mini = adapter_of(model)
    if mini is not None:
        mini._hook.remove()
        del getattr(model, "module", model)._modules["llava_mini"]


def save(model: Any, directory: Path) -> None:
    from safetensors.torch import save_file

    mini = adapter_of(model)
    (directory / CONFIG_FILE).write_text(json.dumps(asdict(mini.cfg), indent=2))
    save_file({k: v.detach().contiguous().cpu() for k, v in mini.state_dict().items()}, str(directory / WEIGHTS_FILE))


@contextmanager
def detached(model: Any) -> Iterator[LlavaMini | None]:
    """``model`` without its llava_mini submodule for the duration (save_pretrained writes the
    backbone's own weights only)."""
    mini = adapter_of(model)
    if mini is not None:
        del model._modules["llava_mini"]
    try:
        yield mini
    finally:
        if mini is not None:
            model.add_module("llava_mini", mini)


def load_into(model: Any, directory: Path) -> LlavaMini | None:
    """Attach the saved module of ``directory`` if it has one."""
    if not (directory / CONFIG_FILE).is_file():
        return None
    from safetensors.torch import load_file

    cfg = LlavaMiniConfig(**json.loads((directory / CONFIG_FILE).read_text()))
    return attach(model, cfg, load_file(str(directory / WEIGHTS_FILE)))


@contextmanager
def visual(backbone: Any, batch: Any, features: Sequence[Tensor] | None, selection: Any,
           with_responses: bool) -> Iterator[dict[str, Any]]:
    """The hook's visual arguments (the features, the compressor) with the prompt's pre-fusion
    armed for this call."""
    mini = adapter_of(backbone.model)
    features = backbone.image_features(batch) if features is None else tuple(features)
    rows = len(batch.query_ids)
    empty = torch.zeros(0, mini.hidden, device=backbone.model.device)
    row_visual = [torch.cat([f for f, r in zip(features, batch.image_rows) if r == b] or [empty])
                  for b in range(rows)]
    responses = batch.response_mask.sum(1).tolist() if with_responses else [0] * rows
    skip = [backbone.ops.image_token_id(backbone.model), backbone.ops.pad_token_id(backbone.model)]
    with mini.fusing(row_visual, responses, skip):
        yield {"features": features, "compress": mini.compress}
