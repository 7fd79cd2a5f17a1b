"""The Qwen chat special tokens every twin's tokenizer carries, in a fixed order (so every
tokenizer built by ltopd.twins.tokenizer gives them the same ids), and the names the adapters use.

Every family shares the Qwen chat format; only the image placeholders differ (GLM-4.xV's image
span, LLaVA-OneVision's `<image>`), so one tokenizer serves all twins.
"""

from __future__ import annotations

IM_START, IM_END, ENDOFTEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
VISION_START, VISION_END = "<|vision_start|>", "<|vision_end|>"
IMAGE_PAD, VIDEO_PAD = "<|image_pad|>", "<|video_pad|>"
THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE = "<think>", "</think>", "<answer>", "</answer>"
GLM_IMAGE_START, GLM_IMAGE_END, GLM_IMAGE = "<|begin_of_image|>", "<|end_of_image|>", "<|image|>"
LLAVA_IMAGE = "<image>"

# Order fixes the ids (Qwen's 0..10 first, then the other families' image tokens 11..14), so
# every tokenizer built from them shares them.
SPECIAL_TOKENS: tuple[str, ...] = (
    ENDOFTEXT,
    IM_START,
    IM_END,
    VISION_START,
    VISION_END,
    IMAGE_PAD,
    VIDEO_PAD,
    THINK_OPEN,
    THINK_CLOSE,
    ANSWER_OPEN,
    ANSWER_CLOSE,
    GLM_IMAGE_START,
    GLM_IMAGE_END,
    GLM_IMAGE,
    LLAVA_IMAGE,
)
