"""Every training method of the paper as a registry entry over two trainer families.

distill: the student is pulled toward a full-token teacher on response tokens -- on its own
         rollouts (LT-OPD and its ablations) or on the dataset's reference answers (fixed-prefix
         KD). sft: cross-entropy on the reference answers at the student's budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from ltopd.train.losses import OBJECTIVES

TEACHERS = ("frozen", "ema", "trust_region")


@dataclass(frozen=True)
class MethodSpec:
    name: str
    family: str  # "distill" | "sft"
    on_policy: bool = True  # distill on student rollouts; False: on the reference answers
    objective: str = "jsd"
    curriculum: bool = True
    plateau: bool = True
    teacher: str = "frozen"

    def __post_init__(self) -> None:
        if self.family not in ("distill", "sft"):
            raise ValueError(f"{self.name}: family must be distill or sft, got {self.family!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"{self.name}: objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.teacher not in TEACHERS:
            raise ValueError(f"{self.name}: teacher must be one of {TEACHERS}, got {self.teacher!r}")


TRAINED: dict[str, MethodSpec] = {m.name: m for m in (
    MethodSpec("ltopd", "distill"),                                    # on-policy JSD + curriculum
    MethodSpec("opd_no_curriculum", "distill", curriculum=False),      # 5% from the first update
    MethodSpec("ltopd_no_plateau", "distill", plateau=False),          # Appendix H
    MethodSpec("ltopd_forward_kl", "distill", objective="forward_kl"),  # Table 12
    MethodSpec("ltopd_reverse_kl", "distill", objective="reverse_kl"),
    MethodSpec("ltopd_teacher_ema", "distill", teacher="ema"),         # Table 7
    MethodSpec("ltopd_trust_region", "distill", teacher="trust_region"),
    MethodSpec("kd_fixed_prefix", "distill", on_policy=False),          # curriculum + fixed-prefix JSD
    MethodSpec("sft", "sft", curriculum=False),                         # same selector, same budget
    MethodSpec("sft_curriculum", "sft"),
)}


def method_spec(name: str) -> MethodSpec:
    if name not in TRAINED:
        raise ValueError(f"{name!r} has no trainer yet; trainable methods: {sorted(TRAINED)}")
    return TRAINED[name]
