"""Vision encoded once per prompt: the n responses of a group share one prompt's features.

Old and reference log-probs are forwards without gradient over n rows per prompt that
differ only in their response; the per-row path runs the vision tower on the same
images/video n times. Here each distinct prompt's visual inputs go through the model's own
``get_video_features`` / ``get_image_features`` once, and the forward receives the
features of every row through transformers' ``mm_encoder_outputs`` argument (the
precomputed-encoder hook of Qwen2.5-VL / Qwen3-VL ``Model.forward``) instead of pixels.

Everything else stays the model's code: the grids (``*_grid_thw``, ``second_per_grid_ts``)
of every row still go in, so the M-RoPE positions come from the same ``get_rope_index``
call as on the per-row path; the features are scattered into the same placeholder
positions; Qwen3-VL's deepstack features are tiled the same way as the main ones. The
update forward (with gradient) keeps per-row vision: its vision gradients would be sums in
another order, not bit-equal.

Features are cached by prompt (the object each batch row points at) for the life of a
:meth:`VisionCache.scope`, so a group cut across micro-batches is still encoded once; the
weights must not change inside a scope (they do not within one log-prob pass).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch import Tensor

# kind -> (pixel key, grid key, the model method that encodes it)
ENCODERS = {
    "image": ("pixel_values", "image_grid_thw", "get_image_features"),
    "video": ("pixel_values_videos", "video_grid_thw", "get_video_features"),
}
PIXEL_KEYS = {pix for pix, _, _ in ENCODERS.values()}


class VisionCache:
    """Encoder outputs per (prompt, kind), kept while a :meth:`scope` is open."""

    def __init__(self) -> None:
        self._scoped: dict[tuple[int, str], tuple[Any, Any]] | None = None
        self.encoded = 0
        """Prompts (per kind) run through the vision tower so far (for tests and metrics)."""

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Reuse features across forwards until the scope closes (weights fixed inside)."""
        outer = self._scoped
        self._scoped = {} if outer is None else outer
        try:
            yield
        finally:
            self._scoped = outer

    def clear(self) -> None:
        """Drop the features of an open scope (the rows changed)."""
        if self._scoped is not None:
            self._scoped.clear()

    def encoder_outputs(
        self, model: Any, keys: Sequence[object], visuals: Sequence[dict[str, Tensor]]
    ) -> dict[str, Any]:
        """``mm_encoder_outputs`` for rows whose prompts are ``keys`` (a row's visual
        tensors are ``visuals[i]``; rows with the same key share one encoding)."""
        store = self._scoped if self._scoped is not None else {}
        out = {}
        for kind, (pix_key, grid_key, method) in ENCODERS.items():
            per_row = []
            for key, visual in zip(keys, visuals, strict=True):
                if pix_key not in visual:
                    continue
                slot = (id(key), kind)
                if slot not in store:  # the key is held too, so its id is not reused
                    encode = getattr(model.model, method)
                    feats = encode(visual[pix_key], visual[grid_key], return_dict=True)
                    store[slot] = (key, feats)
                    self.encoded += 1
                per_row.append(store[slot][1])
            if per_row:
                out[kind] = _tile(per_row)
        return out


def _tile(per_row: list[Any]) -> Any:
    """One encoder output holding the rows' per-media features in row order."""
    first = per_row[0]
    fields: dict[str, Any] = {"pooler_output": tuple(t for o in per_row for t in o.pooler_output)}
    deep = getattr(first, "deepstack_features", None)
    if deep is not None:  # Qwen3-VL: per layer, a tuple of per-media features
        fields["deepstack_features"] = [
            tuple(t for o in per_row for t in o.deepstack_features[layer])
            for layer in range(len(deep))
        ]
    return dataclasses.replace(first, **fields)
