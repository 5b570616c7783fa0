"""Padding-free log-probs: a micro-batch's sequences packed into one row, no padding.

Each row of a :class:`TrainBatch` (prompt left-padded, response right-padded) is cut to its
attended tokens and the sequences are laid end to end in one row of N tokens. What keeps
this exact (equal to the padded forward, within float rounding):

- **M-RoPE positions per sequence.** Every sequence's (t, h, w) positions come from the
  model's own ``get_rope_index`` on that sequence alone, with its own ``*_grid_thw`` and
  ``second_per_grid_ts`` (Qwen2.5-VL's seconds per temporal patch); Qwen3-VL's timestamps
  are text tokens of the prompt (``<0.5 seconds>``) and its ``get_rope_index`` splits a
  video's grid per frame, so that too is per sequence. The results are concatenated.
- **No attention across sequences.** The positions go in as a (4, 1, N) tensor whose first
  row is a text position restarting at 0 in each sequence. In transformers 5.19 the text
  model (``Qwen2_5_VLTextModel.forward``, ``Qwen3VLTextModel.forward``) splits that row off
  and hands it to ``masking_utils.create_causal_mask``; with ``attention_mask=None`` and no
  cache, ``_preprocess_mask_arguments`` calls ``find_packed_sequence_indices`` (a new
  sequence wherever the position does not step by +1) and the mask becomes causal AND
  same-sequence (``packed_sequence_mask_function``): block-diagonal for sdpa/eager/flex on
  CPU. flash-attention derives ``cu_seqlens`` from the same row
  (``modeling_flash_attention_utils._is_packed_sequence``). ``cu_seqlens`` is NOT passed as a
  keyword: the top-level forward hands its ``**kwargs`` to the vision tower too, and
  ``vision_utils.get_vision_cu_seqlens`` would pop a ``cu_seqlens`` meant for the text.
- **Visual inputs in row order**, exactly as on the padded path, so features fill the
  packed placeholders in the same order.

Log-probs never materialise the (tokens, vocabulary) logits of the whole micro-batch: the
forward computes no logits (``logits_to_keep`` empty), the text model's last hidden state
is caught by a hook, the positions that predict response tokens are gathered, and
:func:`chunked_logprobs` projects, log-softmaxes and gathers chunk by chunk (recomputed in
backward, not kept). Models with linear-attention
layers (Qwen3.5's gated delta-net) carry state across the packed boundary: refused.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from evalkit.errors import EvalkitError

from .visual_inputs import VISUAL_KEYS, Encoded, PlaceholderMismatch, _concat, mm_token_types

if TYPE_CHECKING:
    from .batch import TrainBatch

ROPE_KEYS = ("image_grid_thw", "video_grid_thw", "second_per_grid_ts")


@dataclasses.dataclass
class PackedBatch:
    """A micro-batch's sequences in one row, and where its response tokens are predicted."""

    input_ids: Tensor
    """(1, N) the attended tokens of every row, row after row."""
    position_ids: Tensor
    """(4, 1, N): text position (restarts at 0 per sequence), then M-RoPE t, h, w."""
    cu_seqlens: Tensor
    """(S + 1,) int32 sequence boundaries (flash-attention's varlen layout)."""
    predict_at: Tensor
    """(K,) packed positions whose hidden state predicts a response token."""
    targets: Tensor
    """(K,) those response tokens."""
    rows: Tensor
    """(K,) the batch row of each predicted token."""
    cols: Tensor
    """(K,) its column in the (B, T) response layout."""
    shape: tuple[int, int]
    """(B, T) of the batch's response tensors."""


def sequence_spans(batch: TrainBatch) -> list[tuple[int, int]]:
    """(prompt tokens, response tokens) attended in each row; checks the padded layout."""
    p_len = batch.prompt_len
    spans = []
    for i in range(len(batch)):
        prompt, response = batch.attention_mask[i, :p_len], batch.attention_mask[i, p_len:]
        lp, lr = int(prompt.sum()), int(response.sum())
        if not (bool(prompt[p_len - lp :].all()) and bool(response[:lr].all())):
            raise ValueError(
                f"row {i}: attention_mask is not a left-padded prompt + right-padded response "
                "(the layout trainer.batch.collate builds); cannot pack it"
            )
        spans.append((lp, lr))
    return spans


def rope_positions(model: Any, ids: Tensor, kinds: Tensor, visual: dict[str, Tensor]) -> Tensor:
    """(3, L) M-RoPE positions of one sequence from the model's own ``get_rope_index``."""
    grids = {k: visual[k] for k in ROPE_KEYS if k in visual}
    pos, _ = model.model.get_rope_index(ids[None], mm_token_type_ids=kinds[None], **grids)
    return pos[:, 0]


def attended_sequences(batch: TrainBatch) -> list[tuple[Tensor, int, int]]:
    """Each row's attended tokens (prompt then response), prompt and response lengths."""
    p_len = batch.prompt_len
    out = []
    for i, (lp, lr) in enumerate(sequence_spans(batch)):
        seq = torch.cat([batch.input_ids[i, p_len - lp : p_len], batch.input_ids[i, p_len:][:lr]])
        out.append((seq, lp, lr))
    return out


def pack_batch(
    batch: TrainBatch, model: Any, visuals: list[dict[str, Tensor]], token_ids: dict[str, int]
) -> PackedBatch:
    """Pack ``batch`` (row i's visual tensors are ``visuals[i]``) into one row."""
    ids, pos, text, lengths = [], [], [], []
    predict, targets, rows, cols = [], [], [], []
    offset = 0
    for i, (seq, lp, lr) in enumerate(attended_sequences(batch)):
        ids.append(seq)
        pos.append(rope_positions(model, seq, mm_token_types(seq, token_ids), visuals[i]))
        text.append(torch.arange(len(seq)))
        lengths.append(len(seq))
        # the hidden state at prompt end - 1 + j predicts response token j
        predict.append(torch.arange(lr) + offset + lp - 1)
        targets.append(batch.response_ids[i, :lr])
        rows.append(torch.full((lr,), i))
        cols.append(torch.arange(lr))
        offset += len(seq)
    positions = torch.cat([torch.cat(text)[None], torch.cat(pos, dim=1)])
    bounds = torch.tensor([0, *lengths]).cumsum(0).to(torch.int32)
    return PackedBatch(
        input_ids=torch.cat(ids)[None],
        position_ids=positions[:, None].to(torch.long),
        cu_seqlens=bounds,
        predict_at=torch.cat(predict).long(),
        targets=torch.cat(targets).long(),
        rows=torch.cat(rows).long(),
        cols=torch.cat(cols).long(),
        shape=(len(batch), int(batch.response_ids.shape[1])),
    )


def check_sequence_placeholders(
    batch: TrainBatch, encoded: list[Encoded], token_ids: dict[str, int], merge: int
) -> None:
    """Strict check per sequence to pack: placeholder tokens == its visual feature rows.

    Raises :class:`PlaceholderMismatch` naming the sample, both counts and the likely cause;
    nothing is ever truncated or padded to make them fit. Runs before packing: M-RoPE
    positions cannot even be laid out for a sequence whose counts disagree.
    """
    for i, ((seq, _, _), row) in enumerate(zip(attended_sequences(batch), encoded, strict=True)):
        for kind, (_, grid_key) in VISUAL_KEYS.items():
            grid = row.visual.get(grid_key)
            features = int((grid.prod(-1) // merge**2).sum()) if grid is not None else 0
            tokens = int((seq == token_ids[kind]).sum())
            if tokens != features:
                shape = None if grid is None else grid.tolist()
                raise PlaceholderMismatch(
                    f"sample {row.sample_id!r} (batch row {i}, padding-free): {tokens} {kind} "
                    f"placeholder tokens but {features} {kind} feature rows (grid {shape}); "
                    + _likely_cause(kind, tokens, features)
                )


def _likely_cause(kind: str, tokens: int, features: int) -> str:
    if features == 0:
        return f"the sample's {kind} inputs are missing (frames not loaded with the prompt?)"
    if tokens == 0:
        return f"the prompt has no {kind} placeholders (tokenised without its {kind}?)"
    if tokens < features:
        return (
            f"the prompt was truncated inside its {kind} (max prompt length), or the {kind} "
            "was resized larger after the prompt was tokenised"
        )
    return (
        f"the {kind} was resized smaller (or frames dropped) after the prompt was tokenised, "
        "so the prompt and its pixels come from different frame budgets"
    )


def _chunk(head: nn.Module, hidden: Tensor, targets: Tensor, temperature: float) -> Tensor:
    """(2, n): the targets' log-probs and the entropies of n positions."""
    logits = head(hidden).float()
    if temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, targets[:, None]).squeeze(-1)
    return torch.stack([picked, -(logp.exp() * logp).sum(-1)])


def chunked_logprobs(
    hidden: Tensor,
    head: nn.Module,
    targets: Tensor,
    temperature: float = 1.0,
    chunk: int = 1024,
    entropy_grad: bool = False,
) -> tuple[Tensor, Tensor]:
    """Log-probs of ``targets`` (K,) and entropies (K,) from hidden states (K, H).

    Projection, log-softmax and gather run ``chunk`` tokens at a time; with gradient each
    chunk is checkpointed, so backward recomputes its logits instead of keeping them: at
    most one chunk of (chunk, vocabulary) floats is alive at any time.
    """
    logps, ents = [], []
    for h, t in zip(hidden.split(chunk), targets.split(chunk), strict=True):
        if torch.is_grad_enabled() and h.requires_grad:
            out = checkpoint(_chunk, head, h, t, temperature, use_reentrant=False)
        else:
            out = _chunk(head, h, t, temperature)
        logps.append(out[0])
        ents.append(out[1] if entropy_grad else out[1].detach())
    if not logps:
        empty = hidden.new_zeros((0,), dtype=torch.float32)
        return empty, empty
    return torch.cat(logps), torch.cat(ents)


def refuse_linear_attention(model: Any) -> None:
    """Packing is exact only when every layer masks by position: no linear attention."""
    text = getattr(model.config, "text_config", model.config)
    if "linear_attention" in (getattr(text, "layer_types", None) or ()):
        raise EvalkitError(
            f"actor.padding_free: {type(model).__name__} has linear-attention layers whose "
            "recurrent state would flow from one packed sequence into the next; set "
            "actor.padding_free: false for this model"
        )


def packed_logprobs(
    actor: Any,  # an ActorPolicy (duck-typed: .actor imports this module lazily)
    batch: TrainBatch,
    temperature: float = 1.0,
    entropy_grad: bool = False,
) -> tuple[Tensor, Tensor]:
    """Response log-probs and entropies (B, T) of ``batch``, padding-free (0 off the mask).

    The whole pass runs as the body of the policy's own forward (``actor(body=...)``): with
    the policy as the FSDP2 root (Ray workers), the root's pre-forward unshards embeddings
    and lm_head and its post-forward hooks the returned tensors for backward, exactly as
    on the padded path; calling the inner HF model directly would skip the root.
    """
    run = functools.partial(_packed_pass, actor, batch, temperature, entropy_grad)
    out: tuple[Tensor, Tensor] = actor(body=run)
    return out


def _packed_pass(
    actor: Any, batch: TrainBatch, temperature: float, entropy_grad: bool
) -> tuple[Tensor, Tensor]:
    """:func:`packed_logprobs` inside the root forward: check, pack, forward, project."""
    model: Any = actor.model
    refuse_linear_attention(model)
    keys, encoded = actor.batch_rows(batch)
    check_sequence_placeholders(batch, encoded, actor.token_ids, actor.family.merge_size)
    device = batch.input_ids.device  # a GPU worker moved the batch; positions are laid on CPU
    on_cpu = batch if device.type == "cpu" else _batch_on_cpu(batch)
    packed = pack_batch(on_cpu, model, [r.visual for r in encoded], actor.token_ids)
    packed = _packed_on(packed, device)
    visual = {k: v.to(device) for k, v in _concat([r.visual for r in encoded]).items()}
    visual, shared = actor.share_vision(keys, encoded, visual)
    inputs = actor.model_inputs(packed.input_ids, visual, shared)
    with _last_hidden_state(model) as captured:
        model(
            input_ids=packed.input_ids,
            attention_mask=None,  # None: the mask comes from the packed text positions
            position_ids=packed.position_ids,
            use_cache=False,
            logits_to_keep=packed.predict_at[:0],  # no logits from the model itself
            **inputs,
        )
    hidden = actor.guard(captured[0][0], visual, shared)  # (N, H), final norm applied
    logp, ent = chunked_logprobs(
        hidden[packed.predict_at],
        model.get_output_embeddings(),
        packed.targets,
        temperature,
        actor.logprob_chunk_tokens,
        entropy_grad,
    )
    return _unpack(logp, packed), _unpack(ent, packed)


@contextmanager
def _last_hidden_state(model: Any) -> Iterator[list[Tensor]]:
    """Catch the text model's ``last_hidden_state`` (after the final norm) during a forward.

    A hook rather than ``output_hidden_states=True``, which would keep every layer's hidden
    states of the micro-batch alive until the output is dropped (no-grad passes too).
    """
    captured: list[Tensor] = []

    def keep(_module: nn.Module, _args: Any, output: Any) -> None:
        captured.append(output.last_hidden_state)

    handle = model.model.language_model.register_forward_hook(keep)
    try:
        yield captured
    finally:
        handle.remove()


def _batch_on_cpu(batch: TrainBatch) -> TrainBatch:
    """``batch`` with its tensors on the CPU (where packing lays out positions)."""
    moved = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
    return dataclasses.replace(
        batch, **{k: v.cpu() for k, v in moved.items() if isinstance(v, Tensor)}
    )


def _packed_on(packed: PackedBatch, device: torch.device) -> PackedBatch:
    """``packed`` with its tensors on ``device`` (a no-op on CPU)."""
    if device.type == "cpu":
        return packed
    moved: dict[str, Any] = {
        f.name: getattr(packed, f.name).to(device)
        for f in dataclasses.fields(packed)
        if isinstance(getattr(packed, f.name), Tensor)
    }
    return dataclasses.replace(packed, **moved)


def _unpack(values: Tensor, packed: PackedBatch) -> Tensor:
    """(K,) values back to the (B, T) response layout, 0 where no token is attended."""
    out = values.new_zeros(packed.shape)
    return out.index_put((packed.rows, packed.cols), values)
