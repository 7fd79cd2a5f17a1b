"""OCRBench twin: the five reported categories in the official proportions 3:2:2:2:1 (index
mod 10), each record with ``category`` and ``answers``.

* text_recognition: "what is written in the image?" over a word or number;
* scene_vqa: questions about a sign or a date among the objects;
* doc_vqa: table lookups ("what is the quantity of ...");
* kie: key information from a receipt-like document, with OCRBench's KIE prompt;
* hmer: a rendered formula (linear equations, powers, products) to transcribe in LaTeX; the
  answers hold the plain form and the braced power form (x^2 and x^{2}).
"""

from __future__ import annotations

import numpy as np

from ltopd.data.world import Scene, WorldConfig, render_scene
from ltopd.data.world.tasks import TaskNotApplicable

from .synthetic import bench_rng, draw, make_record, pick, text_block, with_text

NAME = "ocrbench"
PATTERN = ("text_recognition",) * 3 + ("scene_vqa",) * 2 + ("doc_vqa",) * 2 + ("kie",) * 2 \
    + ("hmer",)
KIE_SUFFIX = " Answer this question using the text in the image directly."
HMER_PROMPT = "Please write out the expression of the formula in the image using LaTeX format."
Item = tuple[Scene, str, list[str], str]  # scene, question, answers, template


def _fields(scene: Scene) -> dict[str, str]:
    if scene.text is None:
        raise TaskNotApplicable
    return dict(scene.text.fields)


def _recognition(rng: np.random.Generator, cfg: WorldConfig) -> Item:
    kind = ("word", "number")[int(rng.integers(2))]
    scene, value = draw(rng, cfg, lambda sc, _: _fields(sc)["text"], text=True, text_kind=kind)
    return scene, "what is written in the image?", [value], f"ocr/recognition-{kind}"


def _scene_vqa(rng: np.random.Generator, cfg: WorldConfig) -> Item:
    kind = ("sign", "date")[int(rng.integers(2))]
    scene, value = draw(rng, cfg, lambda sc, _: _fields(sc)["text"], text=True, text_kind=kind)
    q = "What is written on the sign?" if kind == "sign" else "What date is shown in the image?"
    return scene, q, [value], f"ocr/scene-{kind}"


def _doc_vqa(rng: np.random.Generator, cfg: WorldConfig) -> Item:
    def ask(scene: Scene, trng: np.random.Generator) -> tuple[str, str]:
        key, value = pick(trng, sorted(_fields(scene).items()))
        return key.split(":")[1], value
    scene, (word, value) = draw(rng, cfg, ask, text=True, text_kind="table")
    return scene, f"In the table, what is the quantity of {word}?", [value], "ocr/doc-table"


def _kie(rng: np.random.Generator, cfg: WorldConfig) -> Item:
    def ask(scene: Scene, trng: np.random.Generator) -> tuple[str, str]:
        return pick(trng, sorted(_fields(scene).items()))
    scene, (key, value) = draw(rng, cfg, ask, text=True, text_kind="document")
    label = {"name": "name", "date": "date", "total": "total amount"}[key]
    return scene, f"what is the {label} in the receipt?{KIE_SUFFIX}", [value], f"ocr/kie-{key}"


def formula(rng: np.random.Generator) -> tuple[str, list[str]]:
    """(rendered text, acceptable LaTeX answers) of a small random formula."""
    a, b, c = (int(v) for v in rng.integers(2, 10, size=3))
    var = "xyab"[int(rng.integers(4))]
    form = int(rng.integers(3))
    if form == 0:
        text = f"{a}{var} + {b} = {c}"
        return text, [text]
    if form == 1:
        text = f"{var}^2 + {b}{var} - {c}"
        return text, [text, text.replace("^2", "^{2}")]
    text = f"({var} + {a})({var} - {b})"
    return text, [text]


def _hmer(rng: np.random.Generator, cfg: WorldConfig) -> Item:
    text, answers = formula(rng)
    scene, _ = draw(rng, cfg, lambda sc, _: None, text=False)
    scene = with_text(scene, text_block([text], cfg.font_px, "formula", {"text": text}), rng,
                      cfg.object_gap_px)
    return scene, HMER_PROMPT, answers, "ocr/hmer"


BUILDERS = {"text_recognition": _recognition, "scene_vqa": _scene_vqa, "doc_vqa": _doc_vqa,
            "kie": _kie, "hmer": _hmer}


def item(index: int, seed: int, cfg: WorldConfig) -> dict:
    rng = bench_rng(NAME, seed, index)
    category = PATTERN[index % len(PATTERN)]
    scene, q, answers, template = BUILDERS[category](rng, cfg)
    return make_record(NAME, f"{index:06d}", [render_scene(scene)], q, [], answers[0], category,
                       {"template": template, "category": category, "answers": answers,
                        "index": index, "scene": scene.to_dict()})


def synthetic(n: int, seed: int, cfg: WorldConfig) -> list[dict]:
    return [item(i, seed, cfg) for i in range(n)]
