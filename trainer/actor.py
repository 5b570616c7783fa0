"""The actor: a HF Qwen-VL model as the policy, fed the same inputs evalkit's engines build.

Prompts go through :func:`evalkit.engines.prompting.render_prompt` and the model's processor
with the frames exactly as the frame cache made them (``do_resize=False``,
``do_sample_frames=False``), so training sees what the HF/vLLM engines see.

Single process on CPU unless ``torch.distributed`` is initialised; only then is the model
wrapped in FSDP (:func:`maybe_fsdp`). Nothing here starts a process group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from evalkit.engines.base import Request
from evalkit.engines.family import ModelFamily, detect_family
from evalkit.errors import EvalkitError

from .batch import TrainBatch
from .frames import PromptLoader, PromptRef
from .shared_vision import PIXEL_KEYS, VisionCache
from .visual_inputs import _PER_TOKEN, Encoded, _concat, check_placeholders, processor_inputs
from .visual_inputs import VISUAL_KEYS as VISUAL_KEYS
from .visual_inputs import PlaceholderMismatch as PlaceholderMismatch
from .visual_inputs import mm_token_types as mm_token_types


class ActorPolicy(nn.Module):
    """The HF model as a policy callable over :class:`TrainBatch` rows.

    :meth:`set_rows` tells the policy which prompt (visual inputs) each batch row answers;
    :meth:`logits_for` concatenates the visual tensors of a micro-batch's rows in row order,
    which is the order the model fills placeholders in. Rows given as :class:`PromptRef`
    (cache paths, no pixels) are encoded here, through :attr:`loader`, at every forward that
    needs them: the actor loads its frames itself (once per prompt per call).
    """

    def __init__(self, model: nn.Module, processor: Any, family: ModelFamily) -> None:
        super().__init__()
        self.model = model
        self.processor = processor
        self.family = family
        tok = processor.tokenizer
        self.token_ids = {
            "video": int(tok.convert_tokens_to_ids(family.video_pad)),
            "image": int(tok.convert_tokens_to_ids(family.image_pad)),
        }
        self._rows: list[Encoded | PromptRef] = []
        self.loader: PromptLoader | None = None
        """Loads the frames of :class:`PromptRef` rows (set by the recipe)."""
        self.share_vision_per_group = True
        """No-grad forwards encode each prompt's visual inputs once (:mod:`.shared_vision`)."""
        self.vision_cache = VisionCache()
        self.padding_free = False
        """Log-probs from sequences packed into one row (:mod:`.packing`), not padded rows."""
        self.logprob_chunk_tokens = 1024
        """Padding-free path: tokens per vocabulary projection chunk."""

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, dtype: str = "float32") -> ActorPolicy:
        """Load a local checkpoint (processor + ``AutoModelForImageTextToText``) on CPU."""
        from transformers import AutoModelForImageTextToText, AutoProcessor

        processor = AutoProcessor.from_pretrained(model_dir)
        model = AutoModelForImageTextToText.from_pretrained(
            model_dir, dtype=getattr(torch, dtype), attn_implementation="sdpa"
        )
        return cls(model, processor, detect_family(model_dir))

    def encode(self, request: Request) -> Encoded:
        """A request as prompt ids + visual tensors, placeholders checked."""
        out = processor_inputs(self.processor, self.family, request)
        # per-token tensors (mm_token_type_ids) are rebuilt for the whole padded row later
        visual = {k: v for k, v in out.items() if k not in _PER_TOKEN}
        visual = {k: v if isinstance(v, Tensor) else torch.tensor(v) for k, v in visual.items()}
        ids = out["input_ids"][0]
        check_placeholders(ids, visual, self.token_ids, self.family.merge_size, request.id)
        return Encoded(request.id, ids.tolist(), visual)

    def set_rows(self, rows: list[Encoded | PromptRef]) -> None:
        """The prompt of every row of the coming :class:`TrainBatch` (``batch.row_index``)."""
        self._rows = list(rows)
        self.vision_cache.clear()

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Text-only logits (no visual inputs); use :meth:`logits_for` for batch rows."""
        return self._logits(input_ids, attention_mask, {})

    def logits_for(self, batch: TrainBatch) -> Tensor:
        """Logits (B, L, V) of ``batch`` with the visual inputs of its rows."""
        keys, rows = self.batch_rows(batch)
        visual = _concat([r.visual for r in rows])
        who = ", ".join(sorted({r.sample_id for r in rows}))
        check_placeholders(
            batch.input_ids, visual, self.token_ids, self.family.merge_size, f"batch of {who}"
        )
        visual, shared = self.share_vision(keys, rows, visual)
        return self._logits(batch.input_ids, batch.attention_mask, visual, shared)

    def packed_logprobs(
        self, batch: TrainBatch, temperature: float = 1.0, entropy_grad: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Response log-probs and entropies (B, T), padding-free (:mod:`.packing`)."""
        from .packing import packed_logprobs

        return packed_logprobs(self, batch, temperature, entropy_grad)

    def batch_rows(self, batch: TrainBatch) -> tuple[list[Encoded | PromptRef], list[Encoded]]:
        """The prompt objects of ``batch``'s rows (as set_rows got them) and their encodings."""
        if batch.row_index is None:
            raise ValueError("ActorPolicy needs TrainBatch.row_index (set by collate)")
        keys = [self._rows[int(i)] for i in batch.row_index]  # the objects set_rows got
        return keys, self._encoded(keys)

    def share_vision(
        self, keys: list[Encoded | PromptRef], rows: list[Encoded], visual: dict[str, Tensor]
    ) -> tuple[dict[str, Tensor], dict[str, Any] | None]:
        """Without gradient: features once per prompt in place of the pixels (or None)."""
        if not (self.share_vision_per_group and not torch.is_grad_enabled()):
            return visual, None
        shared = self.vision_cache.encoder_outputs(self.model, keys, [r.visual for r in rows])
        return {k: v for k, v in visual.items() if k not in PIXEL_KEYS}, shared

    def _encoded(self, rows: list[Encoded | PromptRef]) -> list[Encoded]:
        """Encode the PromptRef rows (each distinct prompt once; the n rows of a group share it)."""
        done: dict[int, Encoded] = {}
        out = []
        for row in rows:
            if isinstance(row, Encoded):
                out.append(row)
                continue
            if id(row) not in done:
                if self.loader is None:
                    raise EvalkitError("ActorPolicy.loader must be set to take PromptRef rows")
                done[id(row)] = self.encode(self.loader.request(row))
            out.append(done[id(row)])
        return out

    def _logits(
        self,
        input_ids: Tensor,
        mask: Tensor | None,
        visual: dict[str, Tensor],
        encoded: dict[str, Any] | None = None,
    ) -> Tensor:
        extra = self.model_inputs(input_ids, visual, encoded)
        out = self.model(input_ids=input_ids, attention_mask=mask, use_cache=False, **extra)
        return self.guard(out.logits, visual, encoded)

    def model_inputs(
        self, input_ids: Tensor, visual: dict[str, Tensor], encoded: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The model's keyword inputs besides ids and mask: visual tensors, encoder outputs."""
        extra: dict[str, Any] = dict(visual)
        if encoded:  # features computed once per prompt, in place of the pixels
            extra["mm_encoder_outputs"] = encoded
        if visual:  # text 0, image 1, video 2: what the processor marks, for M-RoPE positions
            extra["mm_token_type_ids"] = mm_token_types(input_ids, self.token_ids)
        return extra

    def guard(self, x: Tensor, visual: dict[str, Tensor], encoded: dict[str, Any] | None) -> Tensor:
        """``x`` joined to the vision tower's graph when no pixels or features went in."""
        if not encoded and "pixel_values" not in visual and "pixel_values_videos" not in visual:
            x = x + 0.0 * self.dummy_visual()
        return x

    def dummy_visual(self) -> Tensor:
        """Sum of the vision tower's outputs on a tiny blank input (to be multiplied by 0).

        Why: a micro-batch without any image or video never touches the vision tower, so
        its parameters get no gradient. Under FSDP every rank must run the same collective
        ops over the same flat parameters; a rank whose batch skipped the tower would hang
        or error at the gradient reduce-scatter. Running a smallest input (one temporal
        patch, a 2x2 merge window) and adding 0 x its sum keeps the graph identical on every
        rank and gives each vision parameter an exact zero gradient. Images and videos share
        the one tower in Qwen-VL, so one dummy covers either absent modality.
        """
        fam, merge = self.family, self.family.merge_size
        model: Any = self.model
        vc = model.config.vision_config
        channels = int(getattr(vc, "in_channels", getattr(vc, "in_chans", 3)))
        grid = torch.tensor([[1, merge, merge]], dtype=torch.long)
        dim = channels * fam.temporal_patch * fam.patch_size**2
        visual = model.model.visual
        pixels = torch.zeros(merge * merge, dim, dtype=visual.dtype)
        out = visual(pixels, grid_thw=grid)
        return _tensor_sum(out)


def _tensor_sum(x: Any) -> Tensor:
    if isinstance(x, Tensor):
        return x.float().sum()
    items = x.values() if isinstance(x, dict) else x if isinstance(x, list | tuple) else None
    if items is None and hasattr(x, "to_tuple"):
        items = x.to_tuple()
    total = torch.zeros(())
    for v in items or ():
        total = total + _tensor_sum(v)
    return total


def maybe_fsdp(model: nn.Module) -> nn.Module:
    """FSDP-wrap ``model`` when ``torch.distributed`` is initialised; else return it as is.

    On one CPU process there is nothing to shard, so training runs the plain module.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return model
    from torch.distributed.fsdp import fully_shard

    fully_shard(model)
    return model
