"""A small byte-level BPE tokenizer trained locally, with the Qwen chat special tokens.

The real Qwen3.5 vocabulary (248,320 ids) makes CPU training and generation ~10x slower, so the
tiny twins use a vocabulary of a few thousand ids learned from the project's own text. One
tokenizer serves all twins (ltopd.models.special_tokens).
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ltopd.models.special_tokens import (
    ENDOFTEXT,
    IM_END,
    IMAGE_PAD,
    SPECIAL_TOKENS,
    VIDEO_PAD,
    VISION_END,
    VISION_START,
)

# Renders the same text as ltopd.models.prompt.render_prompt: system turn, user turn with the
# images first, and (with add_generation_prompt) the pre-filled assistant prefix.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n<answer>' }}"
    "{%- endif -%}"
)


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 2000) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `corpus` (same corpus -> same vocabulary) and wrap it for transformers."""
    if vocab_size <= len(SPECIAL_TOKENS) + 256:
        raise ValueError(f"vocab_size={vocab_size} must exceed the 256 bytes plus {len(SPECIAL_TOKENS)} special tokens")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(list(corpus), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        padding_side="left",
        extra_special_tokens={
            "image_token": IMAGE_PAD,
            "video_token": VIDEO_PAD,
            "vision_start_token": VISION_START,
            "vision_end_token": VISION_END,
        },
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer

