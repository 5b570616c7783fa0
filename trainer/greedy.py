"""Greedy responses through the rollout engine: ReMax's baseline and validation's answers.

One greedy (temperature 0) response per request, with the weights the engine holds now (the
caller syncs them), cut at the first visual placeholder as online rollouts are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.engines.base import Engine, Request, SamplingParams

from .batch import Response
from .rollout import EngineLoop, cut_at_visual_tokens, sample_responses, visual_token_ids


def greedy_responses(
    engine: Engine, requests: Sequence[Request], actor: Any, max_tokens: int, loop: EngineLoop
) -> list[Response]:
    """The argmax response to each request (no random numbers drawn: seed unused)."""
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    groups = sample_responses(engine, requests, [1] * len(requests), sampling, 0, loop)
    tok = actor.processor.tokenizer
    banned = set(visual_token_ids(tok, actor.family))
    return [cut_at_visual_tokens(group[0], banned, tok) for group in groups]
