"""Qwen2-VL / Qwen2.5-VL M-RoPE positions as the reference implementation computes them.

Why: transformers 5.x rewrote ``Qwen2_5_VLModel.get_rope_index`` (and Qwen2-VL's) on top of
``mm_token_type_ids``; after a vision block it resumes text at ``start + max(H, W) / merge``
(transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py ``get_rope_index``, the
``current_pos += max(grid_thw[1], grid_thw[2]) // spatial_merge_size`` line), which ignores
the block's temporal extent. The reference code (Qwen's release, transformers 4.x
``Qwen2_5_VLForConditionalGeneration.get_rope_index``; vLLM 0.32
``Qwen2_5_VLForConditionalGeneration.get_mrope_input_positions``) resumes text at the largest
position of the block + 1. The two agree only while ``(T-1) * tokens_per_second *
second_per_grid_ts < max(H, W) / merge``; for a sparsely sampled clip (SynthVideo's cached
clips: second_per_grid_ts 1.67-2.5 s) every text token after the video, and so every
generated token, gets another position under HF than under vLLM and the official model.

:func:`use_reference_rope` sets :func:`reference_rope_index` on a loaded model in place of
HF's method, so every forward (the HF engine's generate, the trainer's actor, packing) and
vLLM rollouts see the same positions. Qwen3-VL is left alone: each frame is its own block
of temporal size 1 there (time is written as ``<t seconds>`` text), where HF is right.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import Tensor

# model_type of the configs whose HF get_rope_index is replaced
REFERENCE_ROPE_TYPES = ("qwen2_vl", "qwen2_5_vl")


def use_reference_rope(model: Any) -> bool:
    """Put :func:`reference_rope_index` on ``model`` (or its inner ``.model``) when it is a
    Qwen2-VL / Qwen2.5-VL model; returns whether it did."""
    inner = getattr(model, "model", model)
    config = getattr(inner, "config", None)
    if getattr(config, "model_type", None) not in REFERENCE_ROPE_TYPES:
        return False
    if not hasattr(inner, "get_rope_index"):
        return False
    # an instance attribute, as HF calls self.get_rope_index / self.model.get_rope_index; a
    # plain object (not a bound method) so that the model still pickles and deep-copies
    inner.get_rope_index = ReferenceRopeIndex(inner.config)
    return True


class ReferenceRopeIndex:
    """``get_rope_index`` stand-in holding the model's config."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
        """What :func:`reference_rope_index` gives for this config."""
        return reference_rope_index(self, *args, **kwargs)


def reference_rope_index(
    self: Any,
    input_ids: Tensor,
    mm_token_type_ids: Tensor,
    image_grid_thw: Tensor | None = None,
    video_grid_thw: Tensor | None = None,
    second_per_grid_ts: Tensor | None = None,
    attention_mask: Tensor | None = None,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """(3, B, L) positions and (B, 1) deltas, HF's signature, the reference's values."""
    vision = self.config.vision_config
    merge = int(vision.spatial_merge_size)
    # Qwen2-VL has no tokens_per_second: its temporal index is the grid index itself
    tps = getattr(vision, "tokens_per_second", None)
    grids: dict[int, Any] = {
        1: iter(image_grid_thw) if image_grid_thw is not None else iter(()),
        2: iter(video_grid_thw) if video_grid_thw is not None else iter(()),
    }
    seconds = iter(second_per_grid_ts) if second_per_grid_ts is not None else None
    out = torch.zeros(3, *input_ids.shape, dtype=input_ids.dtype, device=input_ids.device)
    deltas = []
    for b in range(input_ids.shape[0]):
        keep = (
            attention_mask[b].bool()
            if attention_mask is not None
            else torch.ones_like(input_ids[b], dtype=torch.bool)
        )
        kinds = mm_token_type_ids[b][keep].tolist()
        pos = _row_positions(kinds, grids, seconds, merge, tps)
        out[:, b, keep] = pos.to(out.device, out.dtype)
        deltas.append(int(pos.max()) + 1 - len(kinds) if pos.numel() else 0)
    return out, torch.tensor(deltas, device=input_ids.device).unsqueeze(1)


def _row_positions(
    kinds: list[int], grids: dict[int, Any], seconds: Any, merge: int, tps: float | None
) -> Tensor:
    """One sequence: text counts on from the last position + 1; a vision block is a
    (t, h, w) grid offset by the same start; the next part starts after the block's max."""
    parts: list[Tensor] = []
    start = 0
    for kind, run in itertools.groupby(kinds):
        n = len(list(run))
        if kind == 0:
            parts.append(torch.arange(n).expand(3, -1) + start)
            start += n
            continue
        while n > 0:  # adjacent blocks of one kind form one run: one grid each
            t, h, w = (int(x) for x in next(grids[kind]))
            h, w = h // merge, w // merge
            step = next(seconds) if kind == 2 and seconds is not None else None
            block = _block_positions(t, h, w, kind, step, tps) + start
            parts.append(block)
            start = int(block.max()) + 1
            n -= t * h * w
    return torch.cat(parts, dim=1) if parts else torch.zeros(3, 0, dtype=torch.long)


def _block_positions(
    t: int, h: int, w: int, kind: int, step: Tensor | None, tps: float | None
) -> Tensor:
    """(3, t*h*w) positions of one vision block before its offset."""
    t_index = torch.arange(t).view(-1, 1).expand(-1, h * w)
    if tps is not None and kind == 2:
        # reference order and dtype: (index * second_per_grid_t) * tokens_per_second, with
        # second_per_grid_t the processor's float32 value (1.0 when none was given), floored
        spg = torch.as_tensor(1.0 if step is None else step, dtype=torch.float32)
        t_index = (t_index * spg.cpu() * tps).long()
    h_index = torch.arange(h).view(1, -1, 1).expand(t, -1, w)
    w_index = torch.arange(w).view(1, 1, -1).expand(t, h, -1)
    return torch.stack([t_index.flatten(), h_index.flatten(), w_index.flatten()])
