"""Family-agnostic backbone adapter: model + processor + the family's operations.

Families register by `model_type` (BACKBONE_FAMILIES); trainers and the evaluator only talk to `Backbone`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from ltopd.models.glm46v import Glm46VOps
from ltopd.models.hook import (
    IGNORE_INDEX,
    FamilyOps,
    PrunedSequence,
    Selection,
    SelectorLike,
    choose,
    reduced_forward,
    reduced_generate,
    trailing_placeholders,
)
from ltopd.models.llava_ov import LlavaOVOps
from ltopd.models.processor import ImageCopies, ImageTextProcessor, distinct_images
from ltopd.models.prompt import render_prompt, user_text
from ltopd.models.qwen35 import Qwen35Ops
from ltopd.models.special_tokens import ANSWER_CLOSE, IM_END
from ltopd.selectors import SelectionInputs, requirements


class BackboneFamily(FamilyOps, Protocol):
    """FamilyOps plus what loading and selector inputs need."""

    model_type: str
    config_class: type
    model_class: type

    def grid_hw(self, model: Any, batch: Mapping[str, Tensor]) -> list[tuple[int, int]]: ...

    def embed(self, model: Any, ids: Tensor) -> Tensor: ...

    def attention_signals(self, model: Any, batch: Mapping[str, Tensor]) -> dict[str, Tensor]: ...

    def encoder_signals(self, model: Any, batch: Mapping[str, Tensor]) -> dict[str, tuple[Tensor, ...]]: ...


# Selector inputs read from the language model's first full-attention layer on the dense context.
_LM_FIELDS = frozenset({"last_query_attention", "key_states", "text_key_states", "hidden_states"})
# ... and from the vision encoder's self-attention.
_ENCODER_FIELDS = frozenset({"encoder_attention_object", "encoder_attention_output"})

BACKBONE_FAMILIES: dict[str, BackboneFamily] = {ops.model_type: ops for ops in (Qwen35Ops(), Glm46VOps(), LlavaOVOps())}


def family_ops(model_type: str) -> BackboneFamily:
    """The registered operations for `model_type`, or a ValueError naming the supported ones."""
    if model_type not in BACKBONE_FAMILIES:
        raise ValueError(f"unsupported model_type {model_type!r}; supported: {sorted(BACKBONE_FAMILIES)}")
    return BACKBONE_FAMILIES[model_type]


@dataclass
class EncodedBatch:
    """Left-padded model inputs for a batch of records (+ optional responses at the right end).

    response_mask marks response tokens; labels hold them (IGNORE_INDEX elsewhere), unshifted as
    the model's loss expects. query_ids[b] are row b's question+option token ids; image_rows[i]
    is the row of image i; image_copies the images as distinct objects (records asking about one
    picture share it; None: every image its own).
    """

    inputs: dict[str, Tensor]
    response_mask: Tensor
    labels: Tensor
    query_ids: list[list[int]]
    image_rows: list[int]
    image_copies: ImageCopies | None = None


@dataclass
class Backbone:
    model: Any
    processor: ImageTextProcessor

    @property
    def ops(self) -> BackboneFamily:
        return family_ops(self.model.config.model_type)

    @property
    def tokenizer(self) -> Any:
        return self.processor.tokenizer

    def stop_token_ids(self) -> list[int]:
        """Generation stops at the closing answer tag (or the end-of-turn token)."""
        return [self.tokenizer.convert_tokens_to_ids(t) for t in (ANSWER_CLOSE, IM_END)]

    def encode(
        self, records: Sequence[Mapping[str, Any]], responses: Sequence[str | Sequence[int]] | None = None
    ) -> EncodedBatch:
        """Tokenise records into left-padded prompts, optionally followed by response tokens."""
        suffix = None
        if responses is not None:
            if len(responses) != len(records):
                raise ValueError(f"{len(records)} records but {len(responses)} responses")
            suffix = [self._response_ids(r) for r in responses]
        images = [list(r.get("images") or []) for r in records]
        inputs = dict(self.processor([render_prompt(r) for r in records], images, suffix_ids=suffix))
        lengths = [len(s) for s in suffix] if suffix is not None else [0] * len(records)
        width = inputs["input_ids"].shape[1]
        response_mask = torch.arange(width).unsqueeze(0) >= (width - torch.tensor(lengths)).unsqueeze(1)
        labels = inputs["input_ids"].masked_fill(~response_mask, IGNORE_INDEX)
        query_ids = [self.tokenizer(user_text(r), add_special_tokens=False)["input_ids"] for r in records]
        image_rows = [row for row, imgs in enumerate(images) for _ in imgs]
        device = self.model.device
        inputs = {key: value.to(device) for key, value in inputs.items()}
        return EncodedBatch(inputs, response_mask.to(device), labels.to(device), query_ids, image_rows,
                            distinct_images([image for imgs in images for image in imgs]))

    def _response_ids(self, response: str | Sequence[int]) -> list[int]:
        if isinstance(response, str):
            return list(self.tokenizer(response, add_special_tokens=False)["input_ids"])
        return [int(t) for t in response]

    def image_features(self, batch: EncodedBatch) -> tuple[Tensor, ...]:
        """Post-merger features per image (differentiable when grad is enabled).

        Without gradient, an image object the batch holds several times (the questions a benchmark
        asks about one picture) goes through the tower once: each image's features do not depend on
        the other images of its pass (tested bit for bit). With gradient every copy gets its own
        pass, so a trained tower's gradients sum in the order they always did."""
        shared = self._distinct_images(batch)
        if shared is None:
            return self.ops.image_features(self.model, batch.inputs)
        inputs, index = shared
        features = self.ops.image_features(self.model, inputs)
        return tuple(features[i] for i in index)

    def _distinct_images(self, batch: EncodedBatch) -> tuple[dict[str, Tensor], list[int]] | None:
        """Without gradient, the batch's inputs with only its distinct image objects and, per image,
        its index among them; None where every image is its own object or gradient is on."""
        copies = batch.image_copies
        if copies is None or not copies.repeated or torch.is_grad_enabled():
            return None
        return {**batch.inputs, **self.processor.take_images(batch.inputs, copies.distinct)}, copies.index

    def selection_inputs(
        self,
        batch: EncodedBatch,
        features: Sequence[Tensor],
        needs: frozenset[str] = frozenset(),
        seed: int = 0,
    ) -> list[SelectionInputs]:
        """Per-image selector inputs; the dense-context attention signals only when `needs` asks."""
        grids = self.ops.grid_hw(self.model, batch.inputs)
        with torch.no_grad():
            queries = [
                self.ops.embed(self.model, torch.tensor(ids, dtype=torch.long, device=self.model.device)).mean(0)
                for ids in batch.query_ids
            ]
        per_image: list[dict[str, Tensor]] = [{} for _ in features]
        if needs & _LM_FIELDS:
            for fields, extra in zip(per_image, self._attention_fields(batch, features)):
                fields.update(extra)
        if needs & _ENCODER_FIELDS:  # the tower again, with its attention read (once per image object)
            inputs, index = self._distinct_images(batch) or (batch.inputs, range(len(per_image)))
            for name, values in self.ops.encoder_signals(self.model, inputs).items():
                for fields, i in zip(per_image, index):
                    fields[name] = values[i]
        return [
            SelectionInputs(
                features=f.detach(), query=queries[row], grid_hw=grids[i], seed=seed + i, **per_image[i]
            )
            for i, (f, row) in enumerate(zip(features, batch.image_rows))
        ]

    def _attention_fields(self, batch: EncodedBatch, features: Sequence[Tensor]) -> list[dict[str, Tensor]]:
        signals = self.ops.attention_signals(self.model, batch.inputs)
        ids = batch.inputs["input_ids"]
        is_image = ids == self.ops.image_token_id(self.model)
        is_text = batch.inputs["attention_mask"].bool() & ~is_image
        fields = []
        offset = [0] * ids.shape[0]
        trailing = trailing_placeholders(self.ops)
        for f, row in zip(features, batch.image_rows):
            cols = is_image[row].nonzero().squeeze(1)[offset[row] : offset[row] + f.shape[0]]
            offset[row] += f.shape[0] + trailing
            fields.append(
                {
                    "last_query_attention": signals["last_query_attention"][row, cols],
                    "key_states": signals["key_states"][row, cols],
                    "text_key_states": signals["key_states"][row, is_text[row]],
                    "hidden_states": signals["hidden_states"][row, cols],
                }
            )
        return fields

    def select(
        self, batch: EncodedBatch, ratio: float, selector: SelectorLike, floor: int, seed: int = 0,
        features: Sequence[Tensor] | None = None,
    ) -> Selection:
        """Choose the kept visual tokens per image at keep `ratio` (ratio 1 keeps all); `features`
        as in forward() (None: one vision pass here). With a student module that routes the
        tokens it merges (the learnable merge), the selection carries their routes, so a rollout's
        prefill fixes them for the training forwards that replay it."""
        from ltopd.models import addons

        with torch.no_grad():
            features = self.image_features(batch) if features is None else [f.detach() for f in features]
        needs = requirements(selector) if isinstance(selector, str) else frozenset()
        selection = choose(self.selection_inputs(batch, features, needs, seed), ratio, selector, floor)
        return addons.route_selection(self.model, selection, features)

    def full_selection(self, batch: EncodedBatch) -> Selection:
        """Every visual token kept; the counts come from the token grids (no vision pass)."""
        return Selection.full([h * w for h, w in self.ops.grid_hw(self.model, batch.inputs)])

    def forward(
        self, batch: EncodedBatch, selection: Selection | None = None, with_labels: bool = False,
        features: Sequence[Tensor] | None = None, **kwargs: Any
    ) -> tuple[Any, PrunedSequence]:
        """Forward on the context `selection` keeps (dense when None); returns (output, pruned).
        `features`: the batch's post-merger features per image when already computed (one vision
        pass shared by selection, generation and scoring); None runs the vision tower here."""
        selection = self.full_selection(batch) if selection is None else selection
        labels = batch.labels if with_labels else None
        with self._visual(batch, features, selection, with_responses=True) as extra:
            return reduced_forward(self.ops, self.model, batch.inputs, selection, labels, **extra, **kwargs)

    def generate(
        self, batch: EncodedBatch, selection: Selection | None = None, features: Sequence[Tensor] | None = None,
        **kwargs: Any
    ) -> Any:
        """New token ids (B, T) from the reduced context (generate's output object with
        return_dict_in_generate); stops at '</answer>' unless eos_token_id says otherwise.
        `features` as in forward()."""
        selection = self.full_selection(batch) if selection is None else selection
        kwargs.setdefault("eos_token_id", self.stop_token_ids())
        kwargs.setdefault("pad_token_id", self.tokenizer.pad_token_id)
        with self._visual(batch, features, selection, with_responses=False) as extra:
            return reduced_generate(self.ops, self.model, batch.inputs, selection, **extra, **kwargs)

    @contextmanager
    def _visual(self, batch: EncodedBatch, features: Sequence[Tensor] | None, selection: Selection,
                with_responses: bool) -> Iterator[dict[str, Any]]:
        """The hook's visual arguments: the given features (none: the hook computes them); with a
        student module attached (ltopd.models.addons: LLaVA-Mini's, the learnable merge), what
        that module adds for this call."""
        from ltopd.models import addons

        with addons.visual(self, batch, features, selection, with_responses) as extra:
            yield extra
