"""POPE twin: "Is there a X in the image?" with X present (yes) or absent (no).

As in POPE, every image is asked about in all three splits: the same three present objects,
and three absent ones per split drawn by the world's negative sampling (random: any absent
colour-shape pair; popular: absent pairs using the scene's most frequent colour or shape;
adversarial: absent pairs whose colour and shape both occur). Records come in (yes, no) units
ordered image -> question slot -> split, so every split is yes/no balanced and the split sizes
differ by at most one unit (n must be even).
"""

from __future__ import annotations

import numpy as np

from ltopd.data.world import (
    POPE_SPLITS,
    Scene,
    TaskNotApplicable,
    WorldConfig,
    pope_negatives,
    render_scene,
)

from .synthetic import bench_rng, draw, make_record, with_article

NAME = "pope"
PER_IMAGE = 3  # present (and absent) objects asked about per image and split


def _choose(scene: Scene, rng: np.random.Generator) -> tuple[list[str], dict[str, list[str]]]:
    present = sorted({o.name for o in scene.objects})
    negatives = {s: sorted(f"{c} {h}" for c, h in pope_negatives(scene, s)) for s in POPE_SPLITS}
    if len(present) < PER_IMAGE or min(len(v) for v in negatives.values()) < PER_IMAGE:
        raise TaskNotApplicable
    chosen = [present[int(i)] for i in rng.choice(len(present), PER_IMAGE, replace=False)]
    absent = {s: [v[int(i)] for i in rng.choice(len(v), PER_IMAGE, replace=False)]
              for s, v in negatives.items()}
    return chosen, absent


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    if n % 2:
        raise ValueError(f"pope: n must be even (yes/no balanced units), got {n}")
    records: list[dict] = []
    image = 0
    while len(records) < n:
        scene, (present, absent) = draw(bench_rng(NAME, seed, image), cfg, _choose)
        picture = render_scene(scene)
        for slot in range(PER_IMAGE):
            for split in POPE_SPLITS:
                for answer, obj in (("yes", present[slot]), ("no", absent[split][slot])):
                    records.append(make_record(
                        NAME, f"{split}-{image:05d}-{slot}-{answer}", [picture],
                        f"Is there {with_article(obj)} in the image?", [], answer, "exists",
                        {"template": "pope/exists", "split": split, "image_id": image,
                         "object": obj, "scene": scene.to_dict()}))
        image += 1
    return records[:n]  # whole (yes, no) units, since n is even
