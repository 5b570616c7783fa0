"""Mix-policy groups: n-1 online responses plus the sample's offline trajectory in the n-th slot.

On hard tasks a fresh policy never produces a correct, well-formed answer; every reward in a
group is equal and GRPO's advantages are zero. Putting the sample's offline reference
trajectory (``offline_output``) in one slot of the group gives the group a reward spread.

Protocol per prompt: ask the engine for :func:`online_count` responses; then
:func:`build_group` appends the tokenised offline trajectory (EOS appended, truncated to the
response budget with a warning) and flags that slot ``is_offline``. With the optional gate,
the slot is inserted only when the online responses' mean accuracy <= ``accuracy_gate``;
a gated-out group keeps its n-1 online responses (group-relative estimators handle groups of
any size). Masks come from :func:`trainer.batch.collate`. The offline slot's "old"
log-probs must be computed by the training policy like every other slot's.

With ``enable_mix_policy`` off, nothing here changes anything: n online responses per
prompt, offline trajectories ignored - the standard on-policy batch, bit for bit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

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


def mixes(cfg: MixPolicyConfig, offline_text: str | None) -> bool:
    """True when this prompt's group gets an offline slot (before the gate)."""
    return bool(cfg.enable_mix_policy and offline_text)


def online_count(n: int, cfg: MixPolicyConfig, offline_text: str | None) -> int:
    """How many online responses to generate for a prompt: n-1 when it will be mixed, else n."""
    return n - 1 if mixes(cfg, offline_text) else n


def offline_response(
    text: str, tokenizer: Tokenizer, max_response_tokens: int, sample_id: str = "?"
) -> Response:
    """Tokenise an offline trajectory, append EOS, truncate to the budget (with a warning)."""
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
    return Response(token_ids=ids, text=text, is_offline=True)


def gate_open(cfg: MixPolicyConfig, online_accuracies: Sequence[float]) -> bool:
    """The accuracy gate: insert only when mean online accuracy <= threshold (no gate: True)."""
    if cfg.accuracy_gate is None:
        return True
    if not online_accuracies:
        return True
    return sum(online_accuracies) / len(online_accuracies) <= cfg.accuracy_gate


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
    """One prompt's group: the online responses, plus the offline slot when mixing applies.

    ``online`` must hold
    :func:`online_count` responses. ``meta["offline_inserted"]`` records the decision.
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
        responses.append(offline_response(offline_text, tokenizer, max_response_tokens, sample_id))
        inserted = True
    meta = {"offline_inserted": inserted} if mixes(cfg, offline_text) else {}
    return Group(group_id, list(prompt_ids), responses, sample=sample, meta=meta)
