"""Every training method of the paper as a registry entry over five trainer families.

distill: the student is pulled toward a full-token teacher on response tokens -- on its own
         rollouts (LT-OPD and its ablations) or on the dataset's reference answers (fixed-prefix
         KD). sft: cross-entropy on the reference answers at the student's budget.
rl:      policy gradient on the student's own rollouts with a correctness reward (GRPO, GSPO,
         DAPO; Table 6). epic: EPIC's progressive consistency distillation (the same weights
         as teacher at a smaller reduction than the student, on the reference answers).
llava_mini: LLaVA-Mini's pre-fusion and compression module trained with the student (CE).

A method may add a module to its student (``module``, of MODULES: ltopd.models.addons), trained
by its family's trainer beside the backbone: LT-OPD with the learnable merge is LT-OPD's
distillation with the merge module at the merger's learning rate.
"""

from __future__ import annotations

from dataclasses import dataclass

# The divergences ltopd.train.losses registers (DIVERGENCES), by name: validation reads them here
# without importing torch (a profile check runs in every job and every Snakemake parse).
OBJECTIVES = ("jsd", "forward_kl", "reverse_kl")
TEACHERS = ("frozen", "ema", "trust_region")
FAMILIES = ("distill", "sft", "rl", "epic", "llava_mini")
POLICY_LOSSES = ("grpo", "gspo", "dapo")
# The profile section holding a family's own hyperparameters (beside `training`).
SECTIONS = {"rl": "rl", "epic": "epic", "llava_mini": "llava_mini"}
# Student modules a method of another family adds (ltopd.models.addons), each with its own profile
# section of the same name; the module trains at the merger's learning rate.
MODULES = ("learnable_merge",)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    family: str  # one of FAMILIES
    on_policy: bool = True  # distill on student rollouts; False: on the reference answers
    objective: str = "jsd"
    curriculum: bool = True
    plateau: bool = True
    teacher: str = "frozen"
    policy_loss: str | None = None  # rl family: grpo | gspo | dapo
    module: str | None = None  # a student module of MODULES, attached and trained with the student

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family must be one of {FAMILIES}, got {self.family!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"{self.name}: objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.teacher not in TEACHERS:
            raise ValueError(f"{self.name}: teacher must be one of {TEACHERS}, got {self.teacher!r}")
        if (self.family == "rl") != (self.policy_loss is not None) or (
                self.policy_loss is not None and self.policy_loss not in POLICY_LOSSES):
            raise ValueError(f"{self.name}: the rl family (and only it) needs policy_loss in {POLICY_LOSSES}, "
                             f"got {self.policy_loss!r}")
        if self.module is not None and (self.module not in MODULES or self.family in SECTIONS):
            raise ValueError(f"{self.name}: module must be one of {MODULES} on a family without a section of its "
                             f"own, got {self.module!r} on {self.family!r}")

    @property
    def section(self) -> str | None:
        """The profile section with this method's own hyperparameters: its family's or its module's."""
        return SECTIONS.get(self.family) or self.module

    @property
    def adds_module(self) -> bool:
        """Whether the student carries a module of its own (LLaVA-Mini's, or ``module``)."""
        return self.family == "llava_mini" or self.module is not None


TRAINED: dict[str, MethodSpec] = {m.name: m for m in (
    MethodSpec("ltopd", "distill"),                                    # on-policy JSD + curriculum
    MethodSpec("learnable_merge", "distill", module="learnable_merge"),  # LT-OPD + the learnable merge
    MethodSpec("opd_no_curriculum", "distill", curriculum=False),      # 5% from the first update
    MethodSpec("ltopd_no_plateau", "distill", plateau=False),          # Appendix H
    MethodSpec("ltopd_forward_kl", "distill", objective="forward_kl"),  # Table 12
    MethodSpec("ltopd_reverse_kl", "distill", objective="reverse_kl"),
    MethodSpec("ltopd_teacher_ema", "distill", teacher="ema"),         # Table 7
    MethodSpec("ltopd_trust_region", "distill", teacher="trust_region"),
    MethodSpec("kd_fixed_prefix", "distill", on_policy=False),          # curriculum + fixed-prefix JSD
    MethodSpec("sft", "sft", curriculum=False),                         # same selector, same budget
    MethodSpec("sft_curriculum", "sft"),
    # Table 6: general-purpose RL applied directly at the target budget (no curriculum).
    MethodSpec("grpo", "rl", curriculum=False, policy_loss="grpo"),
    MethodSpec("gspo", "rl", curriculum=False, policy_loss="gspo"),
    MethodSpec("dapo", "rl", curriculum=False, policy_loss="dapo"),
    MethodSpec("epic", "epic", curriculum=False),                       # its own progressive schedule
    MethodSpec("llava_mini", "llava_mini", curriculum=False),           # pre-fusion + compression, CE
)}


def method_spec(name: str) -> MethodSpec:
    if name not in TRAINED:
        raise ValueError(f"{name!r} has no trainer yet; trainable methods: {sorted(TRAINED)}")
    return TRAINED[name]
