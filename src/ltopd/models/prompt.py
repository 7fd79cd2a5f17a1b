"""The paper's prompt protocol (Appendix D).

System "You are a helpful assistant."; the images come before the text; the options follow the
question as "A. value" lines; the assistant turn is pre-filled with an empty think block and the
opening answer tag, and the model's response ends with the closing answer tag.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

SYSTEM_PROMPT = "You are a helpful assistant."
ASSISTANT_PREFIX = "<think>\n\n</think>\n\n<answer>"
ANSWER_CLOSE = "</answer>"
IMAGE_SPAN = "<|vision_start|><|image_pad|><|vision_end|>"


def option_letter(index: int) -> str:
    """'A', 'B', ... for option `index`."""
    if not 0 <= index < len(string.ascii_uppercase):
        raise ValueError(f"option index {index} outside A..Z")
    return string.ascii_uppercase[index]


def user_text(record: Mapping[str, Any]) -> str:
    """The question followed by one 'A. value' line per option (the selector's query text)."""
    lines = [str(record["question"]).strip()]
    options: Sequence[str] = record.get("options") or []
    lines += [f"{option_letter(i)}. {option}" for i, option in enumerate(options)]
    return "\n".join(lines)


def build_messages(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Chat messages for `record`: system turn, then a user turn with its images before the text."""
    content: list[dict[str, str]] = [{"type": "image"} for _ in record.get("images") or []]
    content.append({"type": "text", "text": user_text(record)})
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]


def render_prompt(record: Mapping[str, Any]) -> str:
    """The full prompt text up to and including the pre-filled '<answer>' (one placeholder per image)."""
    n_images = len(record.get("images") or [])
    return (
        f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
        f"<|im_start|>user\n{IMAGE_SPAN * n_images}{user_text(record)}<|im_end|>\n"
        f"<|im_start|>assistant\n{ASSISTANT_PREFIX}"
    )


def build_target(record: Mapping[str, Any], field: str = "answer") -> str:
    """The assistant continuation after the prefix: the record's `field` text, closed by '</answer>'."""
    return f"{str(record[field]).strip()}{ANSWER_CLOSE}"


def extract_answer(generated: str) -> str:
    """The text before the first '</answer>' (the whole text when the tag never came)."""
    return generated.split(ANSWER_CLOSE, 1)[0].strip()
