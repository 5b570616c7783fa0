"""Rollout groups as token-id lists, and their collation into padded training tensors.

Layout of a :class:`TrainBatch` (the usual one for causal LMs): prompts LEFT-padded to a
common length P, responses RIGHT-padded to T, concatenated into ``input_ids`` (B, P + T).
The logits at positions P-1 .. P+T-2 predict the response tokens 0 .. T-1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch
from torch import Tensor


@dataclass
class Response:
    """One response slot of a group."""

    token_ids: list[int]
    text: str = ""
    is_offline: bool = False
    """True for the mix-policy slot holding the offline reference trajectory."""
    logprobs: list[float] | None = None
    """The rollout engine's log-prob of each token (what it sampled from); None: unknown."""


@dataclass
class Group:
    """The responses to one prompt; they share ``group_id`` for group-relative advantages."""

    group_id: int
    prompt_ids: list[int]
    responses: list[Response]
    sample: Any = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainBatch:
    """Padded tensors of B sequences (see the module docstring for the layout)."""

    input_ids: Tensor
    attention_mask: Tensor
    response_ids: Tensor
    response_mask: Tensor
    group_ids: Tensor
    is_offline: Tensor
    row_index: Tensor | None = None
    """(B,) position of each row in the collated batch, kept through :meth:`select` so a
    policy with per-row inputs (the actor's visual tensors) can find them."""
    rollout_logp: Tensor | None = None
    """(B, T) the engine's log-probs of the response tokens (0 on padding and on rows
    without them, e.g. offline slots); None when no online row has them."""

    @property
    def prompt_len(self) -> int:
        """P: the padded prompt length."""
        return int(self.input_ids.shape[1] - self.response_ids.shape[1])

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def select(self, index: Tensor | slice) -> TrainBatch:
        """The rows ``index`` of every tensor."""
        return replace(
            self,
            **{
                f.name: getattr(self, f.name)[index]
                for f in fields(self)
                if getattr(self, f.name) is not None
            },
        )


def collate(
    groups: Sequence[Group], pad_id: int, max_response_tokens: int | None = None
) -> TrainBatch:
    """Flatten groups (in order, responses in slot order) into one padded :class:`TrainBatch`."""
    rows = [(g, r) for g in groups for r in g.responses]
    if not rows:
        raise ValueError("collate: no responses to collate")
    empty = [g.group_id for g in groups if not g.prompt_ids]
    if empty:
        raise ValueError(f"collate: groups {empty} have an empty prompt")
    p_len = max(len(g.prompt_ids) for g, _ in rows)
    t_len = max(len(r.token_ids) for _, r in rows)
    if max_response_tokens is not None and t_len > max_response_tokens:
        raise ValueError(f"a response has {t_len} tokens, over the budget {max_response_tokens}")
    t_len = max(t_len, 1)
    bsz = len(rows)
    input_ids = torch.full((bsz, p_len + t_len), pad_id, dtype=torch.long)
    attention = torch.zeros((bsz, p_len + t_len), dtype=torch.long)
    for i, (g, r) in enumerate(rows):
        lp, lr = len(g.prompt_ids), len(r.token_ids)
        input_ids[i, p_len - lp : p_len] = torch.tensor(g.prompt_ids, dtype=torch.long)
        input_ids[i, p_len : p_len + lr] = torch.tensor(r.token_ids, dtype=torch.long)
        attention[i, p_len - lp : p_len + lr] = 1
    return TrainBatch(
        rollout_logp=_rollout_logp([r for _, r in rows], t_len),
        input_ids=input_ids,
        attention_mask=attention,
        response_ids=input_ids[:, p_len:].clone(),
        response_mask=attention[:, p_len:].clone(),
        group_ids=torch.tensor([g.group_id for g, _ in rows], dtype=torch.long),
        is_offline=torch.tensor([r.is_offline for _, r in rows], dtype=torch.bool),
        row_index=torch.arange(bsz),
    )


def _rollout_logp(responses: list[Response], t_len: int) -> Tensor | None:
    """Engine log-probs padded to (B, T); None unless every online response has them."""
    online = [r for r in responses if not r.is_offline]
    if not online or any(r.logprobs is None for r in online):
        return None
    out = torch.zeros((len(responses), t_len), dtype=torch.float32)
    for i, r in enumerate(responses):
        if r.logprobs is not None and not r.is_offline:
            if len(r.logprobs) != len(r.token_ids):
                raise ValueError(
                    f"a response has {len(r.token_ids)} tokens but {len(r.logprobs)} log-probs"
                )
            out[i, : len(r.logprobs)] = torch.tensor(r.logprobs, dtype=torch.float32)
    return out


PolicyFn = Callable[[Tensor, Tensor], Tensor]
"""``policy(input_ids (B, L), attention_mask (B, L)) -> logits (B, L, V)``."""


def response_log_softmax(policy: PolicyFn, batch: TrainBatch, temperature: float = 1.0) -> Tensor:
    """Log-softmax (B, T, V) of the distributions that predict the response tokens.

    A policy with a ``logits_for(batch)`` method (the HF actor, whose rows carry visual
    inputs) gets the whole batch; a plain callable gets ids and mask.
    """
    logits_for = getattr(policy, "logits_for", None)
    if logits_for is not None:
        logits = logits_for(batch)
    else:
        logits = policy(batch.input_ids, batch.attention_mask)
    p_len, t_len = batch.prompt_len, batch.response_ids.shape[1]
    logits = logits[:, p_len - 1 : p_len + t_len - 1].float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1)


def packed_path(policy: Any) -> Callable[..., tuple[Tensor, Tensor]] | None:
    """The policy's padding-free ``packed_logprobs`` when switched on (``actor.padding_free``)."""
    return policy.packed_logprobs if getattr(policy, "padding_free", False) else None


def response_logprobs(policy: PolicyFn, batch: TrainBatch, temperature: float = 1.0) -> Tensor:
    """Log-probs (B, T) of the response tokens under ``policy`` (logits / temperature)."""
    packed = packed_path(policy)
    if packed is not None:
        return packed(batch, temperature)[0]
    logp = response_log_softmax(policy, batch, temperature)
    return logp.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)


def online_texts(groups: list[Group]) -> dict[str, list[str]]:
    """Each group's online response texts (offline slots left out), by its sample's id."""
    return {
        str(getattr(g.sample, "id", g.group_id)): [r.text for r in g.responses if not r.is_offline]
        for g in groups
    }
