"""Mix-policy groups: online responses plus the sample's offline trajectory in the last slot.

On hard tasks a fresh policy never produces a correct, well-formed answer; every reward in a
group is equal and GRPO's advantages are zero. Putting the sample's offline reference
trajectory (``offline_output``) in one slot of the group gives the group a reward spread.

Two group constructions (``mix_policy.mode``), both putting the slot last, flagged
``is_offline``:

- ``append`` (evalkit's): ask the engine for n-1 responses (:func:`online_count`), then
  append the offline slot. With ``accuracy_gate`` the slot goes in only when the online mean
  accuracy <= the gate; a gated-out group keeps its n-1 online responses (group-relative
  estimators handle groups of any size).
- ``replace_last`` (EasyVideoR1's, ``verl/trainer/ray_trainer.py``
  ``RayPPOTrainer._make_batch_data`` + ``_mix_offline_trajectories_in_gen_output``, and
  ``verl/workers/rollout/vllm_rollout_spmd.py`` ``_mix_offline_trajectories`` when no
  threshold is set): generate n, score all n, and when the online mean accuracy is strictly
  below ``accuracy_gate`` (or always, with no gate) overwrite the n-th response. The group
  always has n slots; the replaced response's reward must be recomputed for the slot.

The slot's token ids are the tokenised trajectory with EOS appended, truncated to the
response budget (with a warning); its ``text`` is what those ids say, so a truncated
trajectory is scored as truncated. EasyVideoR1 differs here: it appends no EOS (its
``get_response_mask`` ends the mask at the first pad token only where pad is one of the EOS
ids) and a trajectory over the budget fails on a shape mismatch. Masks come from
:func:`trainer.batch.collate`. The offline slot's "old" log-probs must be computed by the
training policy like every other slot's.

With ``enable_mix_policy`` off, nothing here changes anything: n online responses per
prompt, offline trajectories ignored - the standard on-policy batch, bit for bit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import Tensor

from .batch import Group, Response
from .config import MixPolicyConfig

log = logging.getLogger(__name__)


class Tokenizer(Protocol):
    """The part of a (HF) tokenizer mix-policy needs."""

    @property
    def eos_token_id(self) -> int | None:
        """Id of the end-of-sequence token."""
        ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Token ids of ``text``."""
        ...

    def decode(self, token_ids: list[int], skip_special_tokens: bool = ...) -> str:
        """Text of ``token_ids``."""
        ...


def mixes(cfg: MixPolicyConfig, offline_text: str | None) -> bool:
    """True when this prompt's group gets an offline slot (before the gate)."""
    return bool(cfg.enable_mix_policy and offline_text)


def online_count(n: int, cfg: MixPolicyConfig, offline_text: str | None) -> int:
    """How many online responses to generate: n-1 when an ``append`` group is mixed, else n."""
    return n - 1 if cfg.mode == "append" and mixes(cfg, offline_text) else n


def offline_response(
    text: str, tokenizer: Tokenizer, max_response_tokens: int, sample_id: str = "?"
) -> Response:
    """Tokenise an offline trajectory, append EOS, truncate to the budget (with a warning).

    A truncated slot's ``text`` is the decoded kept ids (EOS is then cut too), so the reward
    scores what the policy is trained on, not the complete trajectory.
    """
    if tokenizer.eos_token_id is None:
        raise ValueError("mix-policy needs a tokenizer with an eos_token_id")
    ids = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
    if len(ids) > max_response_tokens:
        log.warning(
            "sample %s: offline trajectory has %d tokens (EOS included), truncated to the "
            "response budget of %d",
            sample_id,
            len(ids),
            max_response_tokens,
        )
        ids = ids[:max_response_tokens]
        text = tokenizer.decode(ids, skip_special_tokens=True)
    return Response(token_ids=ids, text=text, is_offline=True)


def gate_open(cfg: MixPolicyConfig, online_accuracies: Sequence[float]) -> bool:
    """The accuracy gate (no gate: True): mean online accuracy <= the gate for ``append``,
    < the gate for ``replace_last`` (EasyVideoR1's comparison)."""
    if cfg.accuracy_gate is None:
        return True
    if not online_accuracies:
        return True
    mean = sum(online_accuracies) / len(online_accuracies)
    return mean < cfg.accuracy_gate if cfg.mode == "replace_last" else mean <= cfg.accuracy_gate


def build_group(
    group_id: int,
    prompt_ids: list[int],
    online: list[Response],
    *,
    n: int,
    cfg: MixPolicyConfig,
    offline_text: str | None = None,
    online_accuracies: Sequence[float] = (),
    tokenizer: Tokenizer | None = None,
    max_response_tokens: int = 0,
    sample: Any = None,
) -> Group:
    """One prompt's group: the online responses, with the offline slot last when mixing applies.

    ``online`` must hold :func:`online_count` responses; ``online_accuracies`` are theirs
    (all n of them in ``replace_last`` mode). ``append`` adds the slot, ``replace_last``
    overwrites the n-th response. ``meta["offline_inserted"]`` records the decision.
    """
    expected = online_count(n, cfg, offline_text)
    if len(online) != expected:
        raise ValueError(
            f"group {group_id}: expected {expected} online responses, got {len(online)}"
        )
    responses = list(online)
    inserted = False
    if mixes(cfg, offline_text) and gate_open(cfg, online_accuracies):
        if tokenizer is None or max_response_tokens < 1:
            raise ValueError("mix-policy needs a tokenizer and a positive max_response_tokens")
        sample_id = getattr(sample, "id", str(group_id))
        assert offline_text is not None  # mixes() checked it
        slot = offline_response(offline_text, tokenizer, max_response_tokens, sample_id)
        if cfg.mode == "replace_last":
            responses[-1] = slot
        else:
            responses.append(slot)
        inserted = True
    meta = {"offline_inserted": inserted} if mixes(cfg, offline_text) else {}
    return Group(group_id, list(prompt_ids), responses, sample=sample, meta=meta)


def merge_offline_rewards(
    group: Group, online: dict[str, Tensor], offline: dict[str, Tensor]
) -> dict[str, Tensor]:
    """Per-slot rewards of ``group``: the online ones, the offline slot's scores last.

    ``online`` scores the responses generated (n-1 for ``append``, n for ``replace_last``,
    whose n-th score belongs to the overwritten response and is dropped); ``offline`` scores
    the slot's (possibly truncated) text. A group without the slot keeps ``online`` as is.
    """
    if not group.meta.get("offline_inserted"):
        return online
    kept = len(group.responses) - 1
    return {k: torch.cat([v[:kept], offline[k]]) for k, v in online.items()}
