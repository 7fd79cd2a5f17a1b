"""The modules a trained method adds to its student, one registry: LLaVA-Mini's pre-fusion and
compressor (ltopd.models.llava_mini) and the learnable merge (ltopd.models.learnable_merge).

Each lives at ``model.<name>`` and answers to the same functions: ``module_of(model)``,
``attach_section(model, section)`` (from its profile section), ``remove(model)``,
``save(model, folder)`` / ``load_into(model, folder)`` (its files beside the student's weights),
``detached(model)`` (the model without it, for save_pretrained) and ``visual(backbone, batch,
features, selection, with_responses)`` (the reduction hook's visual arguments of one forward or
generation); one that routes the tokens it merges also has ``route_selection(model, selection,
features)`` (Backbone.select: a rollout's prefill records the routes). At most one is attached.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from torch import Tensor

from ltopd.models import learnable_merge, llava_mini
from ltopd.models.hook import Selection

ADDONS: dict[str, ModuleType] = {"llava_mini": llava_mini, "learnable_merge": learnable_merge}


def addon(name: str) -> ModuleType:
    if name not in ADDONS:
        raise ValueError(f"unknown student module {name!r}; allowed values: {list(ADDONS)}")
    return ADDONS[name]


def attached(model: Any) -> tuple[str, ModuleType] | None:
    """(name, implementation) of the module ``model`` carries, or None."""
    found = [(name, impl) for name, impl in ADDONS.items() if impl.module_of(model) is not None]
    if len(found) > 1:
        raise ValueError(f"a model carries one student module at most; this one has {[n for n, _ in found]}")
    return found[0] if found else None


def save(model: Any, folder: Path) -> None:
    if (found := attached(model)) is not None:
        found[1].save(model, folder)


def load_into(model: Any, folder: Path) -> None:
    """Attach the module whose files ``folder`` holds (a trained student's), if any."""
    for impl in ADDONS.values():
        impl.load_into(model, folder)
    attached(model)  # one at most


@contextmanager
def detached(model: Any) -> Iterator[None]:
    """``model`` without its module for the duration."""
    with ExitStack() as stack:
        for impl in ADDONS.values():
            stack.enter_context(impl.detached(model))
        yield


def route_selection(model: Any, selection: Selection, features: Sequence[Tensor]) -> Selection:
    """``selection`` with the routes of the model's module, where it routes (else unchanged)."""
    found = attached(model)
    router = getattr(found[1], "route_selection", None) if found else None
    return selection if router is None else router(model, selection, features)


@contextmanager
def visual(backbone: Any, batch: Any, features: Sequence[Tensor] | None, selection: Selection,
           with_responses: bool) -> Iterator[dict[str, Any]]:
    """The reduction hook's visual arguments: the given features (none: the hook computes them),
    or, with a module attached, what the module's own ``visual`` gives."""
    found = attached(backbone.model)
    if found is None:
        yield {} if features is None else {"features": tuple(features)}
        return
    with found[1].visual(backbone, batch, features, selection, with_responses) as extra:
        yield extra
