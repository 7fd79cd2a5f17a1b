"""The learnable merge (the authors' later LT-OPD variant): the discarded visual tokens are merged
into the kept ones by a small learned residual, on the reduction hook of any backbone here.

* Selection: the training selector (CDPruner) keeps K of an image's N post-merger tokens, as for
  LT-OPD (budget, floor and curriculum are the trainer's).
* Routes (:func:`route`, no gradient, FP32): every discarded token joins the group of its nearest
  kept token by cosine similarity of the merged features (the first on a tie: the lowest kept
  index); each kept token anchors its own group. Each group's discarded tokens get detached,
  non-negative prior weights summing to one (:data:`PRIORS`: a softmax of their similarity to the
  anchor at ``temperature``, or equal); an anchor's weight is zero, and a group with no
  discarded token (a singleton) has no weight at all.
* Residual (:class:`LearnableMerge`): per non-singleton group, x is the prior-weighted mean of its
  discarded tokens (``input: mean``) or that mean minus the anchor (``input: difference``, the
  default: what the group adds to its anchor); the kept token becomes
  ``anchor + bound * rms(anchor) * tanh(W_out gelu(W_in x + b_in) + b_out)``: signed, and bounded
  per coordinate by ``bound`` times the anchor's root-mean-square (detached), so the same setting
  means the same on every backbone's feature scale. A singleton group's token is left as it is.
* Init: ``W_in``'s rows are ``hidden`` selected rows of the pretrained merger's (projector's)
  output layer, transposed: that layer maps the merger's H hidden units to the LM width D, so its
  transpose reads a post-merger feature back onto those units; the ``hidden`` units whose columns
  have the largest norm (ties to the lower index), in the merger's order. ``b_in`` and the output
  layer are zero, so at init every kept token is its anchor exactly: the student is CDPruner's.
* Kept tokens keep their sequence order and original M-RoPE positions (the hook's pruning is
  unchanged); no token is added. The routes are computed with the selection at the rollout's
  prefill and replayed in the training forwards (``Selection.groups`` / ``priors``).

The module lives at ``model.learnable_merge`` (the optimiser and the checkpoints see it; it
trains at the merger's learning rate) and is saved beside the student's weights as
``learnable_merge.safetensors``, named with its settings and sha256 in ``learnable_merge.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ltopd.models.hook import Compressor, Selection
from ltopd.models.parts import MERGER_PREFIXES
from ltopd.selectors.base import l2_normalise

NAME = "learnable_merge"  # the model attribute, the profile section and the files' stem
CONFIG_FILE, WEIGHTS_FILE = f"{NAME}.json", f"{NAME}.safetensors"


def _similarity_prior(cos: Tensor, groups: Tensor, k: int, temperature: float) -> Tensor:
    """Softmax, within each group, of the discarded tokens' cosine to their anchor / temperature."""
    s = cos / temperature
    peak = torch.full((k,), -torch.inf, dtype=s.dtype, device=s.device).scatter_reduce(0, groups, s, "amax")
    e = torch.exp(s - peak[groups])
    return e / torch.zeros(k, dtype=s.dtype, device=s.device).index_add(0, groups, e)[groups]


def _equal_prior(cos: Tensor, groups: Tensor, k: int, temperature: float) -> Tensor:
    """One over the group's number of discarded tokens."""
    return 1.0 / torch.bincount(groups, minlength=k).to(cos.dtype)[groups]


# prior name -> (discarded tokens' cosine to their anchor, their groups, K, temperature) -> weights
PRIORS: dict[str, Callable[[Tensor, Tensor, int, float], Tensor]] = {
    "similarity": _similarity_prior,
    "equal": _equal_prior,
}
# input name -> (prior-weighted mean of a group's discarded tokens, its anchor) -> the MLP's input
INPUTS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "difference": lambda pooled, anchor: pooled - anchor,
    "mean": lambda pooled, anchor: pooled,
}


@dataclass(frozen=True)
class LearnableMergeConfig:
    """The profile's ``learnable_merge`` section (the schema says the same ranges)."""

    hidden: int = 64  # MLP width: rows selected from the merger's output layer (at most its hidden units)
    input: str = "difference"  # of INPUTS
    prior: str = "similarity"  # of PRIORS
    temperature: float = 0.1  # the similarity prior's softmax temperature
    bound: float = 0.25  # the residual's bound per coordinate, in units of the anchor's RMS

    def __post_init__(self) -> None:
        for name, value, allowed in (("input", self.input, INPUTS), ("prior", self.prior, PRIORS)):
            if value not in allowed:
                raise ValueError(f"{NAME}.{name}: {value!r} is not allowed; allowed values: {list(allowed)}")
        if isinstance(self.hidden, bool) or not isinstance(self.hidden, int) or self.hidden < 1:
            raise ValueError(f"{NAME}.hidden: {self.hidden!r}; allowed: an integer >= 1")
        for name, value in (("temperature", self.temperature), ("bound", self.bound)):
            if not value > 0:
                raise ValueError(f"{NAME}.{name}: {value!r}; allowed: > 0")

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> LearnableMergeConfig:
        from ltopd.sections import from_section

        return from_section(cls, NAME, section)


@torch.no_grad()
def route(features: Tensor, kept: Tensor, prior: str = "similarity", temperature: float = 0.1
          ) -> tuple[Tensor, Tensor]:
    """(groups, priors) of one image's (N, D) merged features and its sorted kept indices (K,):
    ``groups[j]`` the slot in ``kept`` of token j's nearest kept token by FP32 cosine (a kept
    token's own slot), ``priors[j]`` its weight in that group (FP32; 0 for the anchors). Both on
    the features' device."""
    f = features.detach().float()
    kept = kept.to(f.device)
    k, n = kept.numel(), f.shape[0]
    v = l2_normalise(f)
    cos = v @ v[kept].T  # (N, K)
    best, groups = cos.max(dim=1)  # the first maximum on a tie: the lowest kept index
    groups[kept] = torch.arange(k, device=f.device)
    priors = torch.zeros(n, dtype=torch.float32, device=f.device)
    discarded = torch.ones(n, dtype=torch.bool, device=f.device)
    discarded[kept] = False
    if discarded.any():
        priors[discarded] = PRIORS[prior](best[discarded], groups[discarded], k, temperature)
    return groups, priors


def routed(selection: Selection, features: Sequence[Tensor], cfg: LearnableMergeConfig) -> Selection:
    """``selection`` with its routes: those it carries (computed at a rollout's prefill), else
    computed here from ``features`` (an evaluation's selection)."""
    if selection.routed:
        return selection
    pairs = [route(f, k, cfg.prior, cfg.temperature) for f, k in zip(features, selection.kept)]
    return replace(selection, groups=tuple(g for g, _ in pairs), priors=tuple(p for _, p in pairs))


class LearnableMerge(nn.Module):
    def __init__(self, width: int, cfg: LearnableMergeConfig):
        super().__init__()
        self.cfg, self.width = cfg, width
        self.fc_in = nn.Linear(width, cfg.hidden)
        self.fc_out = nn.Linear(cfg.hidden, width)
        for p in (self.fc_in.bias, self.fc_out.weight, self.fc_out.bias):
            nn.init.zeros_(p)

    @torch.no_grad()
    def init_from(self, layer: nn.Linear) -> None:
        """``fc_in``'s rows: ``hidden`` rows of ``layer``'s transposed weight (the merger's output
        layer, (D, H)), those of the largest column norm, kept in the merger's order."""
        weight = layer.weight.detach()
        if weight.shape[0] != self.width:
            raise ValueError(f"{NAME}: the merger's output layer maps to {weight.shape[0]}, "
                             f"the LM width is {self.width}")
        units = weight.shape[1]
        if self.cfg.hidden > units:
            raise ValueError(f"{NAME}.hidden: {self.cfg.hidden} exceeds the merger's {units} hidden units; "
                             f"allowed: 1 to {units}")
        order = torch.argsort(weight.float().norm(dim=0), descending=True, stable=True)[: self.cfg.hidden]
        self.fc_in.weight.copy_(weight.T[torch.sort(order).values].to(self.fc_in.weight.dtype))

    def merge(self, features: Tensor, kept: Tensor, groups: Tensor, priors: Tensor) -> Tensor:
        """One image's (K, D) tokens for the LM from its (N, D) features and routes."""
        kept, groups = kept.to(features.device), groups.to(features.device)
        anchors = features[kept]
        weights = priors.to(device=features.device, dtype=features.dtype).detach().unsqueeze(1)
        pooled = torch.zeros_like(anchors).index_add(0, groups, weights * features)  # anchors weigh 0
        discarded = torch.ones(features.shape[0], dtype=torch.bool, device=features.device)
        discarded[kept] = False
        merged = torch.bincount(groups[discarded], minlength=kept.numel()) > 0  # non-singleton groups
        x = INPUTS[self.cfg.input](pooled, anchors)
        scale = self.cfg.bound * anchors.detach().pow(2).mean(dim=1, keepdim=True).sqrt()
        residual = scale * torch.tanh(self.fc_out(nn.functional.gelu(self.fc_in(x))))
        return anchors + residual * merged.unsqueeze(1).to(residual.dtype)

    def compressor(self, selection: Selection) -> Compressor:
        """The hook's compressor for a routed ``selection`` (its kept indices are the hook's)."""
        if not selection.routed:
            raise ValueError(f"{NAME}: the selection carries no routes (learnable_merge.routed)")

        def compress(features: Sequence[Tensor], kept: Sequence[Tensor]) -> tuple[Tensor, ...]:
            return tuple(self.merge(f, k, g, p) for f, k, g, p in
                         zip(features, kept, selection.groups or (), selection.priors or (), strict=True))

        return compress


def module_of(model: Any) -> LearnableMerge | None:
    """The module of ``model`` (looked up through a DDP/FSDP wrapper's ``module``)."""
    return getattr(getattr(model, "module", model), NAME, None)


def merger_output_layer(model: Any) -> nn.Linear:
    """The merger's (projector's) last linear layer onto the LM width, in any family here (its
    modules' names start with ltopd.models.parts.MERGER_PREFIXES)."""
    width = model.get_input_embeddings().embedding_dim
    layers = [m for name, m in model.named_modules()
              if name.startswith(MERGER_PREFIXES) and isinstance(m, nn.Linear) and m.out_features == width]
    if not layers:
        raise ValueError(f"{NAME}: no linear layer of the merger maps to the LM width {width}")
    return layers[-1]


def attach(model: Any, cfg: LearnableMergeConfig, state: dict[str, Tensor] | None = None) -> LearnableMerge:
    """Add the module to ``model`` (as ``model.learnable_merge``): initialised from the merger
    (deterministic: no random draw), or from ``state``."""
    if module_of(model) is not None:
        raise ValueError(f"model already has a {NAME} module")
    embeddings = model.get_input_embeddings()
    module = LearnableMerge(embeddings.embedding_dim, cfg).to(device=embeddings.weight.device,
                                                               dtype=embeddings.weight.dtype)
    if state is None:
        module.init_from(merger_output_layer(model))
    else:
        module.load_state_dict(state)
    model.add_module(NAME, module)
    return module


def attach_section(model: Any, section: dict[str, Any] | None) -> LearnableMerge:
    """attach() with the profile's ``learnable_merge`` section (None: the defaults)."""
    return attach(model, LearnableMergeConfig.from_section(section))


def remove(model: Any) -> None:
    """Take the module off ``model`` (nothing else of it stays behind)."""
    if module_of(model) is not None:
        del getattr(model, "module", model)._modules[NAME]


def save(model: Any, directory: Path) -> None:
    """The weights, then the manifest naming them, their sha256 and the module's settings."""
    from safetensors.torch import save_file

    from ltopd.job_identity import sha256_file

    module = module_of(model)
    weights = directory / WEIGHTS_FILE
    save_file({k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}, str(weights))
    manifest = {"module": NAME, "config": asdict(module.cfg), "weights": WEIGHTS_FILE,
                "weights_sha256": sha256_file(weights),
                "parameters": sum(p.numel() for p in module.parameters())}
    (directory / CONFIG_FILE).write_text(json.dumps(manifest, indent=2) + "\n")


@contextmanager
def detached(model: Any) -> Iterator[LearnableMerge | None]:
    """``model`` without the module for the duration (save_pretrained writes the backbone's own
    weights only)."""
    module = module_of(model)
    if module is not None:
        remove(model)
    try:
        yield module
    finally:
        if module is not None:
            model.add_module(NAME, module)


def load_into(model: Any, directory: Path) -> LearnableMerge | None:
    """Attach the module saved in ``directory``, if it has one, after checking its weights
    against the manifest."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        return None
    from safetensors.torch import load_file

    from ltopd.job_identity import sha256_file

    manifest = json.loads(path.read_text())
    weights = directory / manifest["weights"]
    if not weights.is_file() or sha256_file(weights) != manifest["weights_sha256"]:
        raise ValueError(f"{weights}: missing or not the weights {path} names (sha256); retrain the student")
    return attach(model, LearnableMergeConfig(**manifest["config"]), load_file(str(weights)))


def route_selection(model: Any, selection: Selection, features: Sequence[Tensor]) -> Selection:
    """A new selection with its routes (Backbone.select: a rollout's prefill records them)."""
    return routed(selection, features, module_of(model).cfg)


@contextmanager
def visual(backbone: Any, batch: Any, features: Sequence[Tensor] | None, selection: Any,
           with_responses: bool) -> Iterator[dict[str, Any]]:
    """The hook's visual arguments: the features and the merging compressor of the routed selection."""
    features = backbone.image_features(batch) if features is None else tuple(features)
    yield {"features": features, "compress": module_of(backbone.model).compressor(
        routed(selection, features, module_of(backbone.model).cfg))}
