"""The actor: a HF Qwen-VL model as the policy, fed the same inputs evalkit's engines build.

Prompts go through :func:`evalkit.engines.prompting.render_prompt` and the model's processor
with the frames exactly as the frame cache made them (``do_resize=False``,
``do_sample_frames=False``), so training sees what the HF/vLLM engines see.

Single process on CPU unless ``torch.distributed`` is initialised; only then is the model
wrapped in FSDP (:func:`maybe_fsdp`; the Ray worker group shards per block with
:func:`trainer.distributed.fsdp.shard_actor`). Nothing here starts a process group.

The modality guard: every forward makes the same vision-tower calls, image then video (the
order of the model's own forward), a real one or a zero-weighted dummy, before any decoder
layer runs. Under per-block FSDP every collective then pairs up across ranks whatever
modalities each rank's micro-batch holds (see :meth:`ActorPolicy.vision_features`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from evalkit.engines.base import Request
from evalkit.engines.family import ModelFamily, trainable_family
from evalkit.engines.reference_rope import use_reference_rope
from evalkit.errors import EvalkitError

from .batch import TrainBatch
from .frames import PromptLoader, PromptRef
from .shared_vision import ENCODERS, PIXEL_KEYS, VisionCache
from .visual_inputs import (
    _PER_TOKEN,
    Encoded,
    _concat,
    check_placeholders,
    mm_token_types,
    processor_inputs,
)

DummyMode = Literal["per_kind", "any", "off"]
"""``per_kind``: a dummy vision call for each absent modality (image, then video), so every
forward makes exactly two; ``any``: one dummy only when the batch has no media at all (the
single-process guard before the distributed issue); ``off``: none (negative control)."""


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
        use_reference_rope(model)  # the M-RoPE positions vLLM and the official model use
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
        self.dummy_mode: DummyMode = "per_kind"
        """Which zero-weighted vision calls stand in for absent modalities (:data:`DummyMode`)."""
        self.vision_trace: list[str] = []
        """Vision-tower calls made, in order (``image``, ``video:dummy``, ...); for tests."""
        self._zero: Tensor | None = None
        """The dummies' output sum of the forward under way (:meth:`model_inputs` ->
        :meth:`guard`)."""
        self.padding_free = False
        """Log-probs from sequences packed into one row (:mod:`.packing`), not padded rows."""
        self.logprob_chunk_tokens = 1024
        """Padding-free path: tokens per vocabulary projection chunk."""

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, dtype: str = "float32") -> ActorPolicy:
        """Load a local checkpoint (processor + ``AutoModelForImageTextToText``) on CPU."""
        from transformers import AutoModelForImageTextToText, AutoProcessor

        family = trainable_family(model_dir)  # before any weight loads
        processor = AutoProcessor.from_pretrained(model_dir)
        model = AutoModelForImageTextToText.from_pretrained(
            model_dir, dtype=getattr(torch, dtype), attn_implementation="sdpa"
        )
        return cls(model, processor, family)

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

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        visual: dict[str, Tensor] | None = None,
        encoded: dict[str, Any] | None = None,
        body: Callable[[], Any] | None = None,
    ) -> Any:
        """Logits of ``input_ids`` with ``visual`` inputs (none: text only), or the result
        of ``body()`` (the padding-free forward of :mod:`.packing`, vision pre-encoding).

        Everything runs inside this call so that, with the policy as the FSDP root
        (:func:`trainer.distributed.fsdp.shard_actor`), the vision calls and the HF model
        made here are part of the root's forward: FSDP2 unshards the root's parameters
        (embeddings, lm_head) only there. Use :meth:`logits_for` for batch rows.
        """
        if body is not None:
            return body()
        if input_ids is None:
            raise TypeError("ActorPolicy.forward needs input_ids (or a body to run)")
        return self._logits(input_ids, attention_mask, visual or {}, encoded)

    def logits_for(self, batch: TrainBatch) -> Tensor:
        """Logits (B, L, V) of ``batch`` with the visual inputs of its rows."""
        keys, rows = self.batch_rows(batch)
        device = batch.input_ids.device  # a GPU worker moved the batch; frames load on CPU
        visual = {k: v.to(device) for k, v in _concat([r.visual for r in rows]).items()}
        who = ", ".join(sorted({r.sample_id for r in rows}))
        check_placeholders(
            batch.input_ids, visual, self.token_ids, self.family.merge_size, f"batch of {who}"
        )
        visual, shared = self.share_vision(keys, rows, visual)
        return self(batch.input_ids, batch.attention_mask, visual, shared)

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
        """The model's keyword inputs besides ids and mask. The vision tower runs HERE, in
        the guard's fixed order (:meth:`vision_features`), its features passed as encoder
        outputs in place of the pixels; the dummies' sum waits for :meth:`guard`."""
        features, self._zero = self.vision_features(visual, encoded or {})
        extra: dict[str, Any] = {k: v for k, v in visual.items() if k not in PIXEL_KEYS}
        if features:
            extra["mm_encoder_outputs"] = features
        if visual:  # text 0, image 1, video 2: what the processor marks, for M-RoPE positions
            extra["mm_token_type_ids"] = mm_token_types(input_ids, self.token_ids)
        return extra

    def guard(self, x: Tensor, visual: dict[str, Tensor], encoded: dict[str, Any] | None) -> Tensor:
        """``x`` joined with weight 0 to the dummy vision calls of this forward (exact zero
        gradients for the absent modalities; see :meth:`vision_features`)."""
        zero, self._zero = self._zero, None
        return x if zero is None else x + 0.0 * zero

    def vision_features(
        self, visual: dict[str, Tensor], encoded: dict[str, Any]
    ) -> tuple[dict[str, Any], Tensor | None]:
        """Encoder outputs per kind, image then video, and the sum of the dummies' outputs.

        Why: under per-block FSDP each vision-tower call is a sequence of all-gathers (and,
        backward, reduce-scatters); a rank that calls the tower twice while another calls it
        once never matches its collectives and hangs. With ``dummy_mode="per_kind"`` every
        forward calls the tower exactly once for images and once for videos, in that order,
        before the decoder: a real call through the model's ``get_*_features`` (the model's
        own code, so the features are those its forward computes from pixels) or a dummy
        on a blank smallest input whose outputs (Qwen3-VL's deepstack ones included) join the
        logits with weight 0. Features given in ``encoded`` (computed once per prompt by
        :mod:`.shared_vision`, no-grad passes of a single process) count as present.
        """
        model: Any = self.model
        out: dict[str, Any] = dict(encoded)
        zero: Tensor | None = None
        present = [kind for kind, (pix, _, _) in ENCODERS.items() if pix in visual]
        for kind, (pix_key, grid_key, method) in ENCODERS.items():  # image first, as the model
            if kind in present:
                encode = getattr(model.model, method)
                out[kind] = encode(visual[pix_key], visual[grid_key], return_dict=True)
                self.vision_trace.append(kind)
                continue
            wanted = self.dummy_mode == "per_kind" or (
                self.dummy_mode == "any" and not present and not encoded and kind == "image"
            )
            if wanted and kind not in encoded:
                part = self.dummy_visual(kind)
                zero = part if zero is None else zero + part
                self.vision_trace.append(f"{kind}:dummy")
        return out, zero

    def dummy_visual(self, kind: str = "image") -> Tensor:
        """Sum of the vision tower's outputs for a blank smallest ``kind`` input (times 0 later).

        Why: a micro-batch without images (or videos) never makes that vision call, so under
        FSDP its rank would skip collectives the other ranks make, and without any media the
        vision parameters would get no gradient at all. One temporal patch in a 2x2 merge
        window, through the same ``get_image_features`` / ``get_video_features`` a real input
        takes, keeps the call sequence identical on every rank; adding 0 x the sum of every
        output (deepstack features included) gives each vision parameter an exact zero
        gradient contribution.
        """
        fam, merge = self.family, self.family.merge_size
        model: Any = self.model
        vc = model.config.vision_config
        channels = int(getattr(vc, "in_channels", getattr(vc, "in_chans", 3)))
        device = next(model.model.visual.parameters()).device
        grid = torch.tensor([[1, merge, merge]], dtype=torch.long, device=device)
        dim = channels * fam.temporal_patch * fam.patch_size**2
        pixels = torch.zeros(merge * merge, dim, dtype=model.model.visual.dtype, device=device)
        out = getattr(model.model, ENCODERS[kind][2])(pixels, grid, return_dict=True)
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
