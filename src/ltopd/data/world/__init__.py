"""The procedural synthetic visual world: seeded scenes, PIL rendering, questions with answers
in the four LT-14K source styles. See generate.py for the entry points."""

from .baseline import answer_prior_baseline
from .config import WorldConfig
from .generate import generate_item, generate_items, generate_task_item, item_rng
from .palette import COLORS, SHAPES, SIZE_CLASSES
from .render import render_scene
from .scene import Obj, Scene, sample_scene
from .styles import STYLES, Style
from .tasks import POPE_SPLITS, SCENE_NEEDS, TASKS, TaskNotApplicable, pope_negatives
from .text import WORDS, TextBlock, text_mask

__all__ = [
    "COLORS", "POPE_SPLITS", "SCENE_NEEDS", "SHAPES", "SIZE_CLASSES", "STYLES", "TASKS", "WORDS",
    "Obj", "Scene", "Style", "TaskNotApplicable", "TextBlock", "WorldConfig",
    "answer_prior_baseline", "generate_item", "generate_items", "generate_task_item",
    "item_rng", "pope_negatives", "render_scene", "sample_scene", "text_mask",
]
