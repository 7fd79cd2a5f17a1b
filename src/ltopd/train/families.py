"""Method family -> its trainer class (train/methods.py gives each method its family): the one
place that knows every trainer, so none registers itself by being imported."""
from __future__ import annotations

from ltopd.models.backbone import Backbone
from ltopd.train.distill import DistillTrainer
from ltopd.train.epic import EpicTrainer
from ltopd.train.llava_mini import LlavaMiniTrainer
from ltopd.train.methods import MethodSpec
from ltopd.train.rl import RLTrainer
from ltopd.train.sft import SFTTrainer
from ltopd.train.trainer import TrainConfig, Trainer

TRAINERS: dict[str, type[Trainer]] = {
    "distill": DistillTrainer,     # LT-OPD, its ablations, fixed-prefix KD
    "sft": SFTTrainer,             # SFT, SFT + curriculum
    "rl": RLTrainer,               # GRPO, GSPO, DAPO
    "epic": EpicTrainer,
    "llava_mini": LlavaMiniTrainer,
}


def make_trainer(student: Backbone, method: MethodSpec, cfg: TrainConfig, total_steps: int) -> Trainer:
    if method.family not in TRAINERS:
        raise ValueError(f"method {method.name!r}: no trainer for family {method.family!r}; known: {sorted(TRAINERS)}")
    return TRAINERS[method.family](student, method, cfg, total_steps)
