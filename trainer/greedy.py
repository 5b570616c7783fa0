"""One response per prompt through the rollout engine: ReMax's greedy baseline and the
validation answers (greedy by default, or sampled as EasyVideoR1's val_override_config).

The engine answers with the weights it holds now (the caller syncs them); responses are cut
at the first visual placeholder as online rollouts are.
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
    return one_response_each(engine, requests, actor, sampling, 0, loop)


def one_response_each(
    engine: Engine,
    requests: Sequence[Request],
    actor: Any,
    sampling: SamplingParams,
    seed: int,
    loop: EngineLoop,
) -> list[Response]:
    """One response per request under ``sampling`` (seeded on the HF engine)."""
    groups = sample_responses(engine, requests, [1] * len(requests), sampling, seed, loop)
    tok = actor.processor.tokenizer
    banned = set(visual_token_ids(tok, actor.family))
    return [cut_at_visual_tokens(group[0], banned, tok) for group in groups]
