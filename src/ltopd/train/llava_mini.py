"""LLaVA-Mini's training on LT-14K (Table 2's reproduced baseline): cross-entropy on the reference
answers with the pre-fusion and compression module (ltopd.models.llava_mini) attached to the
student and trained with it, at the target budget from the first update."""

from __future__ import annotations

from dataclasses import replace

import torch

from ltopd.models.backbone import Backbone
from ltopd.models.llava_mini import LlavaMiniConfig, adapter_of, attach
from ltopd.train.methods import MethodSpec
from ltopd.train.sft import SFTTrainer
from ltopd.train.trainer import TrainConfig


class LlavaMiniTrainer(SFTTrainer):
    def __init__(self, student: Backbone, method: MethodSpec, cfg: TrainConfig, total_steps: int) -> None:
        mini = LlavaMiniConfig.from_section(cfg.method_params)
        if adapter_of(student.model) is None:
            with torch.random.fork_rng():  # the module's init is seeded and leaves the global RNG alone
                torch.manual_seed(cfg.seed)
                attach(student.model, mini)
        super().__init__(student, method, replace(cfg, lrs={**cfg.lrs, "llava_mini": mini.lr}), total_steps)
