"""What the lab scripts (binding_lab.py, pooled_probe.py, answer_attention.py) share:
the scenes they ask about, single-attribute existence items, and loading a saved pretraining state
into a twin."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import numpy as np
import torch

from ltopd.data.sources import world_config
from ltopd.data.world import generate_task_item
from ltopd.data.world.config import WorldConfig
from ltopd.data.world.palette import COLORS, SHAPES

VISION_PREFIX = "model.visual."  # the Qwen3.5 twin's tower and merger


def lab_world(min_objects: int, max_objects: int) -> WorldConfig:
    """Scenes of `min_objects`-`max_objects` shapes of 32-96 px on a 256 px canvas, no text, light clutter."""
    return world_config(
        {
            "image_size": 256,
            "min_objects": min_objects,
            "max_objects": max_objects,
            "text_prob": 0.0,
            "clutter": 0.1,
            "min_object_px": 32,
            "max_object_px": 96,
        }
    )


def load_state(model: torch.nn.Module, path: str, vision_only: bool = False) -> list[str]:
    """Load a pretrain_state.pt's weights into `model` (only the tower and merger with
    `vision_only`, the language model then kept as it is); returns the keys left unloaded."""
    state = torch.load(path, map_location="cpu", weights_only=False)["model"]
    if vision_only:
        state = {k: v for k, v in state.items() if k.startswith(VISION_PREFIX)}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise ValueError(f"{path}: weights the model does not have: {unexpected[:5]}")
    return missing


def exists1(seed: int, start: int, w: WorldConfig, cot: bool = False, pairs: bool = False,
            hint: bool = False, echo: bool = False) -> Iterator[dict]:
    """Single-attribute existence: 'Is there a red object?' / 'Is there a star?' (balanced). With
    `cot` ("exists1cot") the answer names the values present before the verdict: "blue, so no".
    With `pairs` ("exists1pair") items come in pairs on one image, a present then an absent value,
    so a batch's yes and no share their images and the answer prior's gradient cancels. With `hint`
    ("exists1hint") the question first states the values present ("The image shows blue."), so the
    match is between two words of the prompt: no image needed. With `echo` ("exists1echo") the
    answer repeats the asked value before the verdict: "red no"."""
    for i in itertools.count(start):
        scene, yes = (i // 2, i % 2 == 0) if pairs else (i, (i // 2) % 2 == 0)
        r = dict(generate_task_item("color", scene, seed, w))
        sc = json.loads(r["meta"])["scene"]
        rng = np.random.default_rng(i)
        by = ("color", "shape")[(scene if pairs else i) % 2]
        present = sorted({o[by] for o in sc["objects"]})
        pool = list(COLORS) if by == "color" else list(SHAPES)
        absent = [v for v in pool if v not in present]
        v = present[rng.integers(len(present))] if yes else absent[rng.integers(len(absent))]
        r["question"] = f"Is there a {v} object in the image?" if by == "color" else f"Is there a {v} in the image?"
        if hint:
            r["question"] = f"The image shows {' and '.join(present)}. {r['question']}"
        verdict = "yes" if yes else "no"
        r["answer"] = r["response"] = (f"{' '.join(present)}, so {verdict}" if cot else f"{v} {verdict}" if echo
                                       else verdict)
        r["options"] = []
        template = ("exists1cot" if cot else "exists1pair" if pairs else "exists1hint" if hint
                    else "exists1echo" if echo else "exists1")
        r["meta"] = json.dumps({**json.loads(r["meta"]), "template": template})
        yield r
