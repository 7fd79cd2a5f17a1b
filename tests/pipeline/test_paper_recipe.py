"""Every number of the paper's training recipe (reported-numbers.md, "Training recipe": Table 9,
Appendix B) is the one config/paper.yaml runs with. Both sides are read, neither is typed here:
the numbers are parsed out of the markdown text, the values out of the profile."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REPORTED = ROOT.parent / "shared" / "paper" / "reported-numbers.md"
PAPER = ROOT / "config" / "paper.yaml"

pytestmark = pytest.mark.skipif(not REPORTED.is_file(), reason="needs ../shared/paper/reported-numbers.md")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def recipe() -> dict[str, Any]:
    """The recipe's numbers, each found by the phrase around it in the markdown."""
    text = REPORTED.read_text().split("## Training recipe", 1)[1].split("\n## ", 1)[0]
    text = " ".join(text.split())  # the markdown wraps lines anywhere

    def find(pattern: str) -> tuple[float, ...]:
        m = re.search(pattern, text)
        assert m, f"reported-numbers.md 'Training recipe' no longer says /{pattern}/"
        return tuple(_num(g) for g in m.groups())

    quotas = find(r"OneThinker ([\d,]+), PixMo ([\d,]+), LLaVA v1\.5 ([\d,]+), Vision-OPD ([\d,]+)")
    lr = find(r"lr ([\d.e-]+) \(language model and merger\), ([\d.e-]+) \(vision encoder\), (\d+)-update warmup")
    alpha, beta, start_pct = find(r"\(alpha=([\d.]+), beta=([\d.]+) -> (\d+)%\)")
    warm_last, = find(r"for steps 0-(\d+)")
    decay = find(r"cosine decay from step (\d+) to (\d+), beta from step (\d+) to (\d+)")
    run = find(r"(\d+) updates, (\d+) questions per update, ([\d,]+) trajectories; FSDP over (\d+) data-parallel ranks")
    micro = find(r"student microbatch <= (\d+) trajectories, teacher microbatch <= (\d+); "
                 r"decode-batch cap (\d+); init seed (\d+)")
    return {
        "questions": find(r"LT-14K: ([\d,]+) single-image questions")[0],
        "quotas": dict(zip(("onethinker", "pixmo", "llava", "vision_opd"), quotas)),
        "sampler_batches": find(r"over (\d+) batches of (\d+) questions"),
        "seeds": dict(zip(("vision_opd", "others"),
                          find(r"seed (\d+) for the Vision-OPD source, (\d+) for the others"))),
        "temperature": find(r"Rollouts: temperature ([\d.]+)")[0],
        "rollouts": find(r"(\d+) per question, at most")[0],
        "max_new_tokens": find(r"at most ([\d,]+) new tokens")[0],
        "jsd_alpha": find(r"Loss: JSD, mixture ([\d.]+)")[0],
        "top_k": find(r"student top-(\d+) U teacher top-(\d+)"),
        "curriculum": {"alpha": alpha, "beta": beta, "start_pct": start_pct, "warm_last": warm_last,
                       "decay": decay},
        "lr": {"lm": lr[0], "merger": lr[0], "vision": lr[1]}, "warmup": lr[2],
        "updates": run[0], "batch": run[1], "trajectories": run[2], "fsdp_ranks": run[3],
        "student_microbatch": micro[0], "teacher_microbatch": micro[1], "decode_batch": micro[2], "init_seed": micro[3],
    }


@pytest.fixture(scope="module")
def paper() -> dict[str, Any]:
    return yaml.safe_load(PAPER.read_text())


@pytest.fixture(scope="module")
def rec() -> dict[str, Any]:
    return recipe()


def need(cfg: dict[str, Any], dotted: str, reported: Any) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            pytest.fail(f"config/paper.yaml lacks {dotted} (the paper's recipe: {reported})")
        node = node[part]
    return node


def test_lt14k_quotas_batches_and_seeds(paper, rec) -> None:
    lt = paper["lt14k"]
    assert need(paper, "lt14k.scale", 1) == 1.0
    quotas = {name: src["quota"] for name, src in lt["sources"].items()}
    assert quotas == rec["quotas"] and sum(quotas.values()) == rec["questions"]
    assert (lt["num_batches"], lt["batch_size"]) == rec["sampler_batches"]
    for name, src in lt["sources"].items():
        assert src["seed"] == rec["seeds"]["vision_opd" if name == "vision_opd" else "others"], name


def test_rollouts_and_loss(paper, rec) -> None:
    t = paper["training"]
    assert need(paper, "training.rollouts", rec["rollouts"]) == rec["rollouts"]
    assert need(paper, "training.max_new_tokens", rec["max_new_tokens"]) == rec["max_new_tokens"]
    assert need(paper, "training.jsd_alpha", rec["jsd_alpha"]) == rec["jsd_alpha"]
    assert rec["top_k"][0] == rec["top_k"][1] == t["top_k"]
    assert need(paper, "training.temperature", rec["temperature"]) == rec["temperature"]


def test_curriculum(paper, rec) -> None:
    from ltopd.train.curriculum import scaled_boundaries

    c = rec["curriculum"]
    assert need(paper, "training.curriculum.alpha", c["alpha"]) == c["alpha"]
    beta = min(paper["grid"]["budgets"])  # the target budget the student trains toward
    assert beta == c["beta"]
    assert round(100 * (2 * c["alpha"] + 1) * beta) == c["start_pct"]
    first_decay, decay_end, plateau_start, total = c["decay"]
    assert first_decay == c["warm_last"] + 1 and plateau_start == decay_end
    assert total == paper["lt14k"]["num_batches"]
    assert scaled_boundaries(int(total)) == (first_decay, decay_end)


def test_optimiser_and_scale(paper, rec) -> None:
    t = paper["training"]
    assert t["lr"] == rec["lr"]
    assert need(paper, "training.warmup_steps", rec["warmup"]) == rec["warmup"]
    updates = min(t.get("steps", paper["lt14k"]["num_batches"]), paper["lt14k"]["num_batches"])
    assert updates == rec["updates"] and paper["lt14k"]["batch_size"] == rec["batch"]
    assert updates * paper["lt14k"]["batch_size"] * t["rollouts"] == rec["trajectories"]


@pytest.mark.parametrize("key,field", [
    ("training.init_seed", "init_seed"),
    ("training.student_microbatch", "student_microbatch"),
    ("training.teacher_microbatch", "teacher_microbatch"),
    ("training.decode_batch", "decode_batch"),
    ("training.distributed.num_processes", "fsdp_ranks"),
])
def test_distributed_recipe(paper, rec, key, field) -> None:
    assert need(paper, key, rec[field]) == rec[field]


def test_fsdp_strategy(paper, rec) -> None:
    assert need(paper, "training.distributed.strategy", f"FSDP over {rec['fsdp_ranks']:g} ranks") == "fsdp"
