"""AdamW as the paper ran it: one learning rate per part (language model, merger, vision tower),
no weight decay on biases, norms and tensors under 2-D, linear warmup then constant."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ltopd.models.parts import parameter_groups


def no_decay(name: str, param: torch.nn.Parameter) -> bool:
    return param.ndim < 2 or name.endswith(".bias") or "norm" in name.lower()


def build_optimizer(model: torch.nn.Module, lrs: Mapping[str, float], weight_decay: float,
                    betas: tuple[float, float]) -> torch.optim.AdamW:
    """Six groups (lm/merger/vision x decay/no-decay), each tagged with its part and base lr.
    A part with lr 0 is frozen (its parameters are left out)."""
    names = {id(p): n for n, p in model.named_parameters()}
    groups = []
    for part, params in parameter_groups(model).items():
        if lrs.get(part, 0.0) <= 0:
            continue
        for decay in (True, False):
            chosen = [p for p in params if no_decay(names[id(p)], p) != decay]
            if chosen:
                groups.append({"params": chosen, "lr": lrs[part], "base_lr": lrs[part], "part": part,
                               "weight_decay": weight_decay if decay else 0.0})
    if not groups:
        raise ValueError(f"every learning rate is 0 ({dict(lrs)}): nothing to train")
    return torch.optim.AdamW(groups, betas=betas)


def set_lr(optimizer: torch.optim.Optimizer, step: int, warmup_steps: int) -> dict[str, float]:
    """Linear warmup over the first ``warmup_steps`` updates, then constant; returns lr per part."""
    factor = 1.0 if warmup_steps <= 0 else min(1.0, (step + 1) / warmup_steps)
    out = {}
    for g in optimizer.param_groups:
        g["lr"] = g["base_lr"] * factor
        out[g["part"]] = g["lr"]
    return out
